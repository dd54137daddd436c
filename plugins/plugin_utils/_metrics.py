# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's Prometheus metrics: built with prometheus_client, written for node_exporter's
textfile collector, pushed to a Pushgateway.

:func:`families` turns what the summary callback gathered - the circuit breakers (dicts as
``breaker.list_breakers`` gives them), the provider call totals (``_metric_totals``), the state
gauges (``_state_gauges``) and the failover coverage - into metric families; :func:`exposition`
renders them in the Prometheus text format (0.0.4, the one node_exporter's textfile collector
types: it reads OpenMetrics counters as untyped); :func:`write_textfile` replaces a file
atomically (a temporary file in the same directory, renamed), mode 0644, so the collector never
reads half a file; :func:`push` replaces the job's metrics on a Pushgateway.

prometheus_client is imported by :func:`client` only, when metrics are asked for. The provider
key ``<type>:<name>`` gives the ``provider_type`` and ``provider`` labels; no label holds a
record name or a message.
"""
import os
import tempfile
from urllib.parse import unquote, urlsplit, urlunsplit

from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import DURATION_BUCKETS

__all__ = ("client", "families", "exposition", "write_textfile", "push", "STATES", "PREFIX",
           "MissingClient", "provider_labels")

PREFIX = "resilient_virt_"
STATES = ("closed", "open", "half_open")
PROVIDER = ["provider_type", "provider"]
_BREAKER_COUNTERS = (
    ("failures_total", "Provider failures the circuit breaker counted (unreachable, timed out)."),
    ("opened_total", "Times the circuit breaker opened."),
    ("rejected_total", "Calls the circuit breaker refused while open or half-open."),
)
_PROVIDER_COUNTERS = (  # (metric, entry field, help)
    ("provider_attempts", "attempts",
     "Attempts that reached the provider (its operation, or the look before a retry)."),
    ("provider_retries", "retries", "Waits between two attempts of a call to the provider."),
    ("provider_retry_backoff_seconds", "backoff_seconds", "Seconds spent waiting between attempts."),
    ("rate_limit_waits", "rate_limit_waits",
     "Attempts that waited for their turn at the provider's rate limit."),
    ("rate_limit_wait_seconds", "rate_limit_seconds", "Seconds spent waiting for the rate limit."),
)


class MissingClient(Exception):
    """prometheus_client cannot be imported."""


def client():
    """The prometheus_client modules used here, imported now; MissingClient when absent."""
    try:
        from prometheus_client import CollectorRegistry
        from prometheus_client import core
        from prometheus_client import exposition as text
    except ImportError as exc:
        raise MissingClient("the Python library prometheus_client is not installed for the "
                            "controller's Python (%s); install it (pip install prometheus-client)"
                            % exc) from exc
    return CollectorRegistry, core, text


def provider_labels(key):
    """The ``provider_type`` and ``provider`` labels of the provider key ``<type>:<name>``."""
    provider_type, sep, name = str(key).partition(":")
    return [provider_type, name] if sep else ["", provider_type]


def _number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _breakers(core, breakers):
    state = core.GaugeMetricFamily(
        PREFIX + "circuit_breaker_state",
        "Circuit breaker state of the provider: 1 for the current state, 0 for the others.",
        labels=PROVIDER + ["state"])
    counters = [(field, core.CounterMetricFamily(PREFIX + "circuit_breaker_" + field, text,
                                                 labels=PROVIDER))
                for field, text in _BREAKER_COUNTERS]
    for breaker in sorted(breakers, key=lambda b: str(b.get("name"))):
        labels = provider_labels(breaker.get("name"))
        if breaker.get("state") in STATES:
            for name in STATES:
                state.add_metric(labels + [name], int(name == breaker["state"]))
        for field, family in counters:
            count = breaker.get(field)
            if isinstance(count, int) and _number(count) is not None:
                family.add_metric(labels, count)
    return [state] + [family for _field, family in counters]


def _cumulative(buckets):
    bounds = [repr(float(bound)) for bound in DURATION_BUCKETS] + ["+Inf"]  # le="1.0", as client libraries write it
    running, out = 0, []
    for bound, count in zip(bounds, buckets):
        running += _number(count) or 0
        out.append((bound, running))
    return out


def _calls(core, totals):
    labels = PROVIDER + ["operation"]
    calls = core.CounterMetricFamily(
        PREFIX + "provider_calls", "Calls to the provider by operation and how they ended: ok, "
        "or the error type (after every attempt).", labels=labels + ["outcome"])
    duration = core.HistogramMetricFamily(
        PREFIX + "provider_call_duration_seconds", "How long calls to the provider took, from "
        "their first attempt to the end of the last (waits between attempts included).",
        labels=labels)
    timeout = core.GaugeMetricFamily(
        PREFIX + "provider_operation_timeout_seconds", "The time limit of one attempt of the "
        "operation, as the last call had it.", labels=labels)
    counters = [(field, core.CounterMetricFamily(PREFIX + name, text, labels=PROVIDER))
                for name, field, text in _PROVIDER_COUNTERS]
    for key in sorted(totals):
        entry = totals[key]
        if not isinstance(entry, dict):
            continue
        provider = provider_labels(key)
        for field, family in counters:
            if _number(entry.get(field)) is not None:
                family.add_metric(provider, entry[field])
        operations = entry.get("operations")
        for operation in sorted(operations) if isinstance(operations, dict) else ():
            counts = operations[operation]
            for outcome in sorted(counts["outcomes"]):
                calls.add_metric(provider + [operation, outcome], counts["outcomes"][outcome])
            duration.add_metric(provider + [operation], _cumulative(counts["buckets"]),
                                counts["seconds"])
            if _number(counts.get("timeout")):
                timeout.add_metric(provider + [operation], counts["timeout"])
    return [calls, duration, timeout] + [family for _field, family in counters]


def _state(core, state):
    fleet = core.GaugeMetricFamily(PREFIX + "fleet_vms", "VMs of each fleet (vm_fleet owner) by "
                                   "provider and recorded status: done, error.",
                                   labels=["fleet"] + PROVIDER + ["status"])
    for (owner, key, status), count in sorted(state.get("fleet_vms", {}).items()):
        fleet.add_metric([owner] + provider_labels(key) + [status], count)
    backups = core.GaugeMetricFamily(PREFIX + "backup_records", "Backup and restore records by "
                                     "provider, kind and phase.",
                                     labels=PROVIDER + ["kind", "phase"])
    for (key, kind, phase), count in sorted(state.get("backup_records", {}).items()):
        backups.add_metric(provider_labels(key) + [kind, phase], count)
    unfinished = core.GaugeMetricFamily(
        PREFIX + "backup_oldest_unfinished_created_timestamp_seconds", "When the oldest backup "
        "or restore record not in a final phase was created (Unix time).",
        labels=PROVIDER + ["kind"])
    for (key, kind), epoch in sorted(state.get("unfinished_backups", {}).items()):
        unfinished.add_metric(provider_labels(key) + [kind], epoch)
    out = [fleet, backups, unfinished]
    held = state.get("reserved_capacity", {})
    for index, (name, text) in enumerate((
            ("failover_reservations", "Failover reservations of each creator."),
            ("failover_reserved_cpus", "vCPUs the failover reservations of each creator hold."),
            ("failover_reserved_memory_bytes", "Memory the failover reservations of each "
                                               "creator hold, in bytes."))):
        family = core.GaugeMetricFamily(PREFIX + name, text, labels=["creator"])
        for creator in sorted(held):
            family.add_metric([creator], held[creator][index] * (1024 * 1024 if index == 2 else 1))
        out.append(family)
    coverage = state.get("coverage", {})
    for field, text in (("vms_requiring", "VMs that need failover slots, at the creator's last "
                                          "failover_reservation run."),
                        ("vms_covered", "Of those, the VMs whose slots are all reserved."),
                        ("coverage_ratio", "Covered VMs over VMs requiring slots (1 when none "
                                           "needs one).")):
        family = core.GaugeMetricFamily(PREFIX + "failover_" + field, text, labels=["creator"])
        for creator in sorted(coverage):
            family.add_metric([creator], coverage[creator][field])
        out.append(family)
    return out


def families(core, breakers=(), totals=None, state=None):
    """Every metric family: the breakers, the call totals and the state gauges (see
    ``_state_gauges``; ``state`` holds each of its counts under the function's name, and
    ``coverage``); ``core`` is prometheus_client's ``core`` (:func:`client`)."""
    return _breakers(core, breakers) + _calls(core, totals or {}) + _state(core, state or {})


class _Collected:
    def __init__(self, metrics):
        self.metrics = metrics

    def collect(self):
        return [family for family in self.metrics if family.samples]


def _registry(registry_class, metrics):
    registry = registry_class(auto_describe=False)
    registry.register(_Collected(metrics))
    return registry


def exposition(prometheus, metrics):
    """The Prometheus text format of the families ``metrics`` that have samples;
    ``prometheus`` is what :func:`client` returns."""
    registry_class, _core, text = prometheus
    return text.generate_latest(_registry(registry_class, metrics)).decode("utf-8")


def push(prometheus, url, job, metrics, timeout=10.0):
    """Replace the metrics of ``job`` on the Pushgateway at ``url`` with ``metrics``. A
    ``user:password@`` in the URL is sent as HTTP basic authentication, not in the URL."""
    registry_class, _core, text = prometheus
    parts = urlsplit(url)
    handler = text.default_handler
    if parts.username is not None or parts.password is not None:
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        url = urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query,
                          parts.fragment))

        def handler(url, method, timeout, headers, data):
            return text.basic_auth_handler(url, method, timeout, headers, data, user, password)
    text.push_to_gateway(url, job=job, registry=_registry(registry_class, metrics),
                         timeout=timeout, handler=handler)


def write_textfile(path, text):
    """Replace ``path`` with ``text`` atomically, mode 0644."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), 0o644)
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
