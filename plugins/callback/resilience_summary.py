# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: resilience_summary
type: aggregate
short_description: What the resilience layer did in a playbook, per provider, and breaker metrics
version_added: 0.2.0
description:
  - Adds up the C(resilience) result of every resilient.virt task on every host (ok and failed
    tasks, each item of a loop) and, at the end of the playbook, prints one line per provider
    key - tasks, calls, attempts, retries and the seconds waited between them, rate limit waits
    and their seconds, failures the circuit breaker counted, calls it refused, failed calls, the
    breaker's state changes and its last known state.
  - It does not replace the stdout callback; enable it next to it with
    C(ANSIBLE_CALLBACKS_ENABLED=resilient.virt.resilience_summary) or C(callbacks_enabled) in
    C(ansible.cfg).
  - With O(metrics_file) or O(pushgateway_url), it adds this playbook's provider calls to the
    totals kept in the state store O(state_store), then writes Prometheus metrics - the circuit
    breakers, provider calls by operation and outcome, their durations, attempts, retries, rate
    limit waits, and gauges of the store's fleets, backups and failover reservations - to
    O(metrics_file) for node_exporter's textfile collector (replaced atomically, mode 0644)
    and pushes them to O(pushgateway_url). It needs the Python library C(prometheus_client) on
    the controller; without it a warning says so and nothing is written or pushed.
  - When the store cannot be read, the metrics get what the results said instead (the breaker
    states the tasks published, counters of this playbook only) and a warning says so; the play
    never fails because of the metrics.
  - With O(traces), the tasks record each provider call and, at the end of the playbook, the
    callback sends them as OpenTelemetry spans over OTLP/HTTP - one span per call, with its
    attempts, waits, circuit breaker refusal and changes of state as events, under one span for
    the run whose parent is O(traceparent) - configured by the OpenTelemetry SDK's
    C(OTEL_EXPORTER_OTLP_*) environment variables. It needs the Python libraries
    C(opentelemetry-sdk) and C(opentelemetry-exporter-otlp-proto-http) on the controller; without
    them a warning says so and the tasks record nothing.
  - Results of tasks with C(no_log) are hidden from callbacks, so their calls are not counted.
author:
  - resilient.virt developers (!UNKNOWN)
options:
  metrics_file:
    description:
      - Path of the metrics file to write at the end of the playbook, such as
        C(/var/lib/node_exporter/textfile/resilient_virt.prom); its directory must exist.
      - Unset, no file is written.
    type: path
    env:
      - name: RESILIENT_VIRT_SUMMARY_METRICS_FILE
    ini:
      - section: callback_resilience_summary
        key: metrics_file
  state_store:
    description:
      - The state store to read the circuit breakers from for O(metrics_file), as the modules'
        O(resilient.virt.vm#module:state_store) - set the one the plays use.
      - Default C(~/.ansible/resilient_virt/state.db), as for the modules.
    type: str
    env:
      - name: RESILIENT_VIRT_STATE_STORE
    ini:
      - section: callback_resilience_summary
        key: state_store
  pushgateway_url:
    description:
      - URL of a Prometheus Pushgateway to push the metrics to at the end of the playbook, such
        as C(https://pushgateway.example.com:9091); they replace those of O(pushgateway_job)
        there. A C(user:password@) in it is sent as HTTP basic authentication. HTTPS
        certificates are verified.
      - Unset, nothing is pushed.
    type: str
    env:
      - name: RESILIENT_VIRT_SUMMARY_PUSHGATEWAY_URL
    ini:
      - section: callback_resilience_summary
        key: pushgateway_url
    version_added: 0.3.0
  pushgateway_job:
    description:
      - The C(job) label of the metrics pushed to O(pushgateway_url).
    type: str
    default: resilient_virt
    env:
      - name: RESILIENT_VIRT_SUMMARY_PUSHGATEWAY_JOB
    ini:
      - section: callback_resilience_summary
        key: pushgateway_job
    version_added: 0.3.0
  traces:
    description:
      - Send a span for every provider call to the OTLP/HTTP endpoint of the OpenTelemetry SDK's
        variables (C(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or C(OTEL_EXPORTER_OTLP_ENDPOINT), with
        C(OTEL_EXPORTER_OTLP_HEADERS) and the others) at the end of the playbook.
      - The callback sets C(RESILIENT_VIRT_RECORD_SPANS=true) in the controller's environment so
        that the tasks record their calls; a task that runs on another host records them only
        when its C(environment) sets that variable too.
    type: bool
    default: false
    env:
      - name: RESILIENT_VIRT_SUMMARY_TRACES
    ini:
      - section: callback_resilience_summary
        key: traces
    version_added: 0.3.0
  traceparent:
    description:
      - The W3C trace context (C(00-<trace id>-<span id>-<flags>)) the run's span is a child of,
        as for P(community.general.opentelemetry#callback), so that the spans of both callbacks
        are in one trace. Unset, the run's span starts a trace of its own.
    type: str
    env:
      - name: TRACEPARENT
    version_added: 0.3.0
"""

EXAMPLES = r"""
# ansible.cfg
# [defaults]
# callbacks_enabled = resilient.virt.resilience_summary
#
# [callback_resilience_summary]
# metrics_file = /var/lib/node_exporter/textfile/resilient_virt.prom
# state_store = sqlite:///var/lib/resilient_virt/state.db

# or for one run:
# ANSIBLE_CALLBACKS_ENABLED=resilient.virt.resilience_summary \
# RESILIENT_VIRT_SUMMARY_METRICS_FILE=/var/lib/node_exporter/textfile/resilient_virt.prom \
# ansible-playbook site.yml
"""

import os

from ansible.plugins.callback import CallbackBase

from ansible_collections.resilient.virt.plugins.module_utils._masking import scrub, secret_values
from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import list_breakers
from ansible_collections.resilient.virt.plugins.module_utils._resilience.spans import RECORD_ENV
from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import merge
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils._backup.records import NAMESPACE as BACKUPS
from ansible_collections.resilient.virt.plugins.module_utils._failover.storage import NAMESPACE as FAILOVER
from ansible_collections.resilient.virt.plugins.module_utils._fleet.status import NAMESPACE as FLEETS
from ansible_collections.resilient.virt.plugins.plugin_utils import _state_gauges
from ansible_collections.resilient.virt.plugins.plugin_utils._metric_totals import add_run, coverage_of
from ansible_collections.resilient.virt.plugins.plugin_utils._metrics import (
    MissingClient, client, exposition, families, push, write_textfile)
from ansible_collections.resilient.virt.plugins.plugin_utils._traces import MissingSdk, check, export, sdk, task_of

RESULT_KEY = "resilience"
SPANS_KEY = "resilience_spans"
FAILOVER_ACTIONS = ("resilient.virt.failover_reservation", "failover_reservation")
BREAKER_FACT = "resilient_virt_breakers"
COLUMNS = (("provider", None), ("tasks", "tasks"), ("calls", "calls"), ("attempts", "attempts"),
           ("retries", "retries"), ("backoff_s", "backoff_seconds"),
           ("rate_waits", "rate_limit_waits"), ("rate_s", "rate_limit_seconds"),
           ("failures", "failures"), ("refused", "refused"), ("failed", "failed_calls"),
           ("breaker", "state"), ("transitions", "transitions"))


def _cell(entry, field):
    value = entry.get(field)
    if field == "transitions":
        return ", ".join("%s->%s x%d" % (t["from"], t["to"], t["count"]) for t in value) or "-"
    if isinstance(value, float):
        return "%.2f" % value
    return "-" if value is None else str(value)


def table(totals):
    """The summary's lines: a header and one line per provider key, in columns."""
    rows = [[column[0] for column in COLUMNS]]
    for key in sorted(totals):
        rows.append([key] + [_cell(totals[key], column[1]) for column in COLUMNS[1:]])
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    return ["  ".join([row[0].ljust(widths[0])] + [cell.rjust(width) for cell, width in
                                                   zip(row[1:-1], widths[1:])] + [row[-1]]).rstrip()
            for row in rows]


class CallbackModule(CallbackBase):
    """Adds up the ``resilience`` results of a playbook; prints them and writes the metrics."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "resilient.virt.resilience_summary"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        super().__init__(display=display, options=options)
        self.totals = {}  # provider key -> the entries added up, plus "tasks" and "state"
        self.coverage = {}  # creator -> the coverage of its last failover_reservation run
        self.traces = False  # traces asked for, and the SDK is there to send them
        self.calls = []  # (task attributes, resilience_spans result) of every task and loop item
        self.playbook = None
        self.play = ""

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        if not self.get_option("traces") or self.traces:
            return
        try:
            check()
        except MissingSdk as exc:
            self._warn("resilience_summary: no traces are sent: %s" % exc)
            return
        self.traces = True
        os.environ[RECORD_ENV] = "true"  # read by every task (workers and module processes)

    def _add_spans(self, result):
        """Keep the recorded calls of one result, with the task's attributes."""
        task = None
        data = result._result
        for item in [data] + (data.get("results") if isinstance(data.get("results"), list) else []):
            if isinstance(item, dict) and isinstance(item.get(SPANS_KEY), dict):
                task = task or task_of(result, self.play)
                self.calls.append((task, item[SPANS_KEY]))

    def _add(self, data):
        """Count one result (a task's, or one item's of a loop)."""
        if not isinstance(data, dict):
            return
        entries = data.get(RESULT_KEY)
        if not isinstance(entries, dict):
            for item in data.get("results") if isinstance(data.get("results"), list) else ():
                self._add(item)
            return
        for key, entry in entries.items():
            total = self.totals.setdefault(str(key), {"tasks": 0, "state": None})
            total["tasks"] += 1
            merge(total, entry)
        facts = data.get("ansible_facts")
        breakers = facts.get(BREAKER_FACT) if isinstance(facts, dict) else None
        for key, fact in breakers.items() if isinstance(breakers, dict) else ():
            if isinstance(fact, dict) and str(key) in self.totals:
                self.totals[str(key)]["state"] = fact.get("state")

    def _add_coverage(self, result):
        """Keep the failover coverage of a ``failover_reservation`` task that reconciled."""
        task, data = result._task, result._result
        if getattr(task, "resolved_action", None) not in FAILOVER_ACTIONS or task.check_mode or \
                not isinstance(data, dict):
            return
        invocation = data.get("invocation")
        arguments = invocation.get("module_args") if isinstance(invocation, dict) else None
        creator = arguments.get("creator") if isinstance(arguments, dict) else None
        fields = coverage_of(data.get("summary"))
        if isinstance(creator, str) and fields is not None:
            self.coverage[creator] = fields

    def v2_playbook_on_start(self, playbook):
        self.playbook = playbook._file_name

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name()

    def v2_runner_on_ok(self, result):
        self._add(result._result)
        self._add_coverage(result)
        if self.traces:
            self._add_spans(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._add(result._result)
        if self.traces:
            self._add_spans(result)

    def v2_playbook_on_stats(self, stats):
        self._display.banner("RESILIENCE SUMMARY")
        if not self.totals:
            self._display.display("no resilient.virt task called a provider")
        for line in table(self.totals):
            self._display.display(line)
        path, gateway = self.get_option("metrics_file"), self.get_option("pushgateway_url")
        if path or gateway:
            self._publish(path, gateway)
        if self.traces and self.calls:
            self._send_traces()

    def _send_traces(self):
        try:
            export(sdk(), self.calls, traceparent=self.get_option("traceparent"),
                   playbook=self.playbook, service_name=os.environ.get("OTEL_SERVICE_NAME"))
        except MissingSdk as exc:
            self._warn("resilience_summary: no traces are sent: %s" % exc)
        except Exception as exc:  # noqa: BLE001 - a collector that fails never fails the play
            self._warn("resilience_summary: the traces could not be sent (%s: %s); check "
                       "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT"
                       % (type(exc).__name__, exc))

    def _from_store(self):
        """Add this playbook's calls to the store's totals; return what the metrics show, as
        the store has it: the breakers, the call totals and the state gauges."""
        store = open_store(self.get_option("state_store"))
        try:
            totals, coverage = add_run(store, self.totals, self.coverage)
            state = {"fleet_vms": _state_gauges.fleet_vms(store.items(FLEETS)),
                     "reserved_capacity": _state_gauges.reserved_capacity(store.items(FAILOVER)),
                     "coverage": coverage}
            backups = store.items(BACKUPS)
            state.update(backup_records=_state_gauges.backup_records(backups),
                         unfinished_backups=_state_gauges.unfinished_backups(backups))
            return list_breakers(store), totals, state
        finally:
            store.close()

    def _from_results(self):
        """What the results said: the breaker state each task published last, this playbook's
        counts."""
        breakers = [{"name": key, "state": total["state"], "failures_total": total["failures"],
                     "rejected_total": total["refused"],
                     "opened_total": sum(t["count"] for t in total["transitions"] if t["to"] == "open")}
                    for key, total in self.totals.items()]
        return breakers, self.totals, {"coverage": self.coverage}

    def _warn(self, message):
        self._display.warning(scrub(message, secret_values(
            [self.get_option("state_store"), self.get_option("pushgateway_url")])))

    def _publish(self, path, gateway):
        try:
            prometheus = client()
        except MissingClient as exc:
            self._warn("resilience_summary: no metrics were written or pushed: %s" % exc)
            return
        try:
            breakers, totals, state = self._from_store()
        except Exception as exc:  # noqa: BLE001 - a store that cannot be read never fails the play
            self._warn("resilience_summary: the metrics could not be read from the state store "
                       "(%s: %s); they have what this playbook's results said instead (the breaker "
                       "states the tasks published, counters of this playbook only). Set "
                       "state_store (RESILIENT_VIRT_STATE_STORE) to the store the plays use"
                       % (type(exc).__name__, exc))
            breakers, totals, state = self._from_results()
        metrics = families(prometheus[1], breakers, totals, state)
        if path:
            try:
                write_textfile(path, exposition(prometheus, metrics))
            except OSError as exc:
                self._warn("resilience_summary: the metrics file %s could not be written (%s); "
                           "check that its directory exists and is writable, or change "
                           "metrics_file (RESILIENT_VIRT_SUMMARY_METRICS_FILE)" % (path, exc))
        if gateway:
            try:
                push(prometheus, gateway, self.get_option("pushgateway_job"), metrics)
            except Exception as exc:  # noqa: BLE001 - a Pushgateway that fails never fails the play
                self._warn("resilience_summary: the metrics could not be pushed to %s (%s: %s); "
                           "check pushgateway_url (RESILIENT_VIRT_SUMMARY_PUSHGATEWAY_URL)"
                           % (gateway, type(exc).__name__, exc))
