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
  - With O(metrics_file), it also writes the circuit breakers of the state store O(state_store)
    in the Prometheus text format, for node_exporter's textfile collector - the file is replaced
    atomically and made readable by all (mode 0644). When the store cannot be read, the file
    gets what the results said instead (the breaker states the tasks published, counters of
    this playbook only) and a warning says so; the play never fails because of it.
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

from ansible.plugins.callback import CallbackBase

from ansible_collections.resilient.virt.plugins.module_utils._masking import scrub, secret_values
from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import list_breakers
from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import merge
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.plugin_utils._breaker_metrics import exposition, write_textfile

RESULT_KEY = "resilience"
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

    def v2_runner_on_ok(self, result):
        self._add(result._result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._add(result._result)

    def v2_playbook_on_stats(self, stats):
        self._display.banner("RESILIENCE SUMMARY")
        if not self.totals:
            self._display.display("no resilient.virt task called a provider")
        for line in table(self.totals):
            self._display.display(line)
        path = self.get_option("metrics_file")
        if path:
            self._write_metrics(path)

    def _store_breakers(self):
        """Every breaker of the state store, as ``breaker.list_breakers`` gives them."""
        store = open_store(self.get_option("state_store"))
        try:
            return list_breakers(store)
        finally:
            store.close()

    def _result_breakers(self):
        """What the results said of each breaker: the state last published, this playbook's
        counts."""
        return [{"name": key, "state": total["state"], "failures_total": total["failures"],
                 "rejected_total": total["refused"],
                 "opened_total": sum(t["count"] for t in total["transitions"] if t["to"] == "open")}
                for key, total in self.totals.items()]

    def _warn(self, message):
        self._display.warning(scrub(message, secret_values(self.get_option("state_store"))))

    def _write_metrics(self, path):
        try:
            breakers = self._store_breakers()
        except Exception as exc:  # noqa: BLE001 - a store that cannot be read never fails the play
            self._warn("resilience_summary: the circuit breakers could not be read from the state "
                       "store (%s: %s); %s has what this playbook's results said instead (the "
                       "states the tasks published, counters of this playbook only). Set "
                       "state_store (RESILIENT_VIRT_STATE_STORE) to the store the plays use"
                       % (type(exc).__name__, exc, path))
            breakers = self._result_breakers()
        try:
            write_textfile(path, exposition(breakers))
        except OSError as exc:
            self._warn("resilience_summary: the metrics file %s could not be written (%s); check "
                       "that its directory exists and is writable, or change metrics_file "
                       "(RESILIENT_VIRT_SUMMARY_METRICS_FILE)" % (path, exc))
