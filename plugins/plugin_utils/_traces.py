# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""OpenTelemetry spans of the provider calls, built with the OpenTelemetry SDK, sent over OTLP.

The tasks record their calls (``resilience_spans``, ``module_utils/_resilience/spans.py``); the
resilience_summary callback gathers them with the task each came from and, at the end of the
playbook, :func:`export` turns them into spans: one span for the run, ``resilient.virt
provider calls``, whose parent is the W3C ``traceparent`` when one is given (the TRACEPARENT
that community.general.opentelemetry honours too, so that both land in the same trace), and
under it one span per provider call, with its events. They are sent over OTLP/HTTP (protobuf),
:data:`BATCH` spans a request, configured by the SDK's own ``OTEL_EXPORTER_OTLP_*`` variables.

:func:`check` finds the SDK without importing it; :func:`sdk` imports it, only when traces are
sent. Every value put on a span is
checked here: numbers, the code's operation names, error types and breaker states, the provider
key, the task's name with its secrets masked; anything else in a record is left out.
"""
import importlib.util
import os

from ansible_collections.resilient.virt.plugins.module_utils._masking import scrub, secret_values
from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import ALIVE_ERRORS
from ansible_collections.resilient.virt.plugins.module_utils._resilience.spans import EVENTS
from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import (
    OTHER, OUTCOMES, operation_label)
from ansible_collections.resilient.virt.plugins.plugin_utils._metrics import provider_labels

__all__ = ("check", "sdk", "MissingSdk", "export", "task_of", "RUN_SPAN", "PROTOCOLS")

RUN_SPAN = "resilient.virt provider calls"
PROTOCOLS = ("http/protobuf",)
SCOPE = "resilient.virt"
BATCH = 1000  # spans per OTLP request, far below the exporter's size limit (64 MiB)
_MODULES = ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter")
_STATES = ("closed", "open", "half_open")
_ATTEMPT_OUTCOMES = ("ok", "error", "timeout")
_COUNTS = (  # (record field, span attribute)
    ("attempts", "resilient_virt.attempts"), ("retries", "resilient_virt.retries"),
    ("backoff_seconds", "resilient_virt.retry_wait_seconds"),
    ("rate_limit_waits", "resilient_virt.rate_limit_waits"),
    ("rate_limit_seconds", "resilient_virt.rate_limit_wait_seconds"),
    ("timeout", "resilient_virt.attempt_timeout_seconds"),
)


class MissingSdk(Exception):
    """The OpenTelemetry SDK or its OTLP/HTTP exporter cannot be used."""


def _missing(reason):
    return MissingSdk("the Python libraries opentelemetry-sdk and "
                      "opentelemetry-exporter-otlp-proto-http are not installed for the "
                      "controller's Python (%s); install them (pip install opentelemetry-sdk "
                      "opentelemetry-exporter-otlp-proto-http)" % reason)


def check(environ=None):
    """Raise the MissingSdk that :func:`sdk` would raise, without importing the SDK: the
    callback checks at the start of a playbook and imports at its end, so that the workers
    Ansible forks for the tasks in between are not forked from a process that holds it."""
    environ = os.environ if environ is None else environ
    _check_protocol(environ)
    for name in _MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError) as exc:
            raise _missing(exc) from exc
        if not found:
            raise _missing("no module named %r" % name)


def _check_protocol(environ):
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = environ.get(variable)
        if protocol:
            if protocol not in PROTOCOLS:
                raise MissingSdk("%s=%s: the spans are sent over OTLP/HTTP only; set it to "
                                 "http/protobuf and point the endpoint at the collector's OTLP/HTTP "
                                 "port (4318)" % (variable, protocol))
            break


def sdk(environ=None):
    """The OpenTelemetry pieces used here, imported now; MissingSdk when a library is absent or
    the OTLP protocol asked for is not OTLP/HTTP with protobuf."""
    _check_protocol(os.environ if environ is None else environ)
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError as exc:
        raise _missing(exc) from exc
    return dict(trace=trace, OTLPSpanExporter=OTLPSpanExporter, Resource=Resource,
                TracerProvider=TracerProvider, SimpleSpanProcessor=SimpleSpanProcessor,
                SpanExportResult=SpanExportResult, InMemorySpanExporter=InMemorySpanExporter,
                TraceContextTextMapPropagator=TraceContextTextMapPropagator)


def task_of(result, play):
    """The attributes naming the task of a result (``ansible.task.*``): its uuid, its host, its
    action, and its name written as community.general.opentelemetry names its task spans
    (``[host] play: task``), every secret of the task's arguments masked."""
    task, host = result._task, getattr(result, "_host", None)
    host_name = host.name if host is not None else ""
    name = scrub("[%s] %s: %s" % (host_name, play, task.get_name().strip()), secret_values(task.args))
    return {"ansible.task.uuid": str(task._uuid), "ansible.task.name": name,
            "ansible.task.host.name": str(host_name), "ansible.task.module": str(task.action)}


def _time(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _number(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _event_attributes(name, attributes):
    """The attributes of one event, those of the code's own kinds only."""
    out = {}
    for field, value in (attributes.items() if isinstance(attributes, dict) else ()):
        if field in ("number", "after_attempt", "seconds", "duration_seconds", "delay_seconds"):
            value = _number(value)
        elif field == "outcome":
            value = value if value in _ATTEMPT_OUTCOMES else None
        elif field == "error_type":
            value = value if value in OUTCOMES else OTHER
        elif field in ("state", "from", "to"):
            value = value if value in _STATES else None
        else:
            value = None
        if value is not None:
            out["resilient_virt.%s" % field] = value
    return out


def _call_span(tracer, context, record, task, kinds):
    """Start, fill and end the span of one call ``record``; False when the record is unusable."""
    start, end = _time(record.get("start")), _time(record.get("end"))
    if start is None or end is None or end < start:
        return False
    operation = operation_label(record.get("operation"))
    outcome = record.get("outcome") if record.get("outcome") in OUTCOMES else OTHER
    provider_type, provider = provider_labels(record.get("provider"))
    attributes = dict(task)
    attributes.update({"resilient_virt.provider.type": provider_type,
                       "resilient_virt.provider.name": provider,
                       "resilient_virt.operation": operation, "resilient_virt.outcome": outcome,
                       "resilient_virt.breaker.refused": record.get("refused") is True})
    for field, attribute in _COUNTS:
        if _number(record.get(field)) is not None:
            attributes[attribute] = record[field]
    if record.get("breaker_state") in _STATES:
        attributes["resilient_virt.breaker.state"] = record["breaker_state"]
    if outcome != "ok":
        attributes["error.type"] = outcome
    span = tracer.start_span("%s %s:%s" % (operation, provider_type, provider), context=context,
                             kind=kinds["CLIENT"], attributes=attributes, start_time=start)
    for event in record.get("events") if isinstance(record.get("events"), list) else ():
        if isinstance(event, list) and len(event) == 3 and event[0] in EVENTS and _time(event[1]):
            span.add_event(event[0], attributes=_event_attributes(event[0], event[2]),
                           timestamp=event[1])
    if outcome == "ok":
        span.set_status(kinds["OK"])
    elif outcome not in ALIVE_ERRORS:  # an answer (NotFound...) is the provider working
        span.set_status(kinds["ERROR"], outcome)
    span.end(end_time=end)
    return True


def export(otel, calls, traceparent=None, playbook=None, service_name=None):
    """Send the spans of ``calls`` - (task attributes, ``resilience_spans`` result) pairs - in
    one OTLP export; return how many call spans were sent. ``otel`` is what :func:`sdk` gave.
    An export that fails raises RuntimeError."""
    trace = otel["trace"]
    records = []
    dropped = 0
    for task, result in calls:
        if not isinstance(result, dict):
            continue
        spans = result.get("spans")
        for record in spans if isinstance(spans, list) else ():
            if isinstance(record, dict):
                records.append((task, record))
        dropped += _number(result.get("dropped")) or 0
    times = [(_time(r.get("start")), _time(r.get("end"))) for _task, r in records]
    times = [(start, end) for start, end in times if start and end and end >= start]
    if not times:
        return 0
    memory = otel["InMemorySpanExporter"]()
    provider = otel["TracerProvider"](resource=otel["Resource"].create(
        {"service.name": service_name or "ansible"}))
    provider.add_span_processor(otel["SimpleSpanProcessor"](memory))
    tracer = provider.get_tracer(SCOPE)
    parent = otel["TraceContextTextMapPropagator"]().extract(
        {"traceparent": traceparent}) if traceparent else None
    run_attributes = {"resilient_virt.spans_dropped": dropped}
    if playbook:
        run_attributes["ansible.playbook"] = os.path.basename(str(playbook))
    run = tracer.start_span(RUN_SPAN, context=parent, attributes=run_attributes,
                            start_time=min(start for start, _end in times))
    context = trace.set_span_in_context(run)
    kinds = {"CLIENT": trace.SpanKind.CLIENT, "OK": trace.StatusCode.OK,
             "ERROR": trace.StatusCode.ERROR}
    sent = sum(1 for task, record in records if _call_span(tracer, context, record, task, kinds))
    run.end(end_time=max(end for _start, end in times))
    finished = memory.get_finished_spans()
    exporter = otel["OTLPSpanExporter"]()
    try:
        for first in range(0, len(finished), BATCH):
            if exporter.export(finished[first:first + BATCH]) != otel["SpanExportResult"].SUCCESS:
                raise RuntimeError("the OTLP exporter could not send them (see its log line above)")
    finally:
        exporter.shutdown()
        provider.shutdown()
    return sent
