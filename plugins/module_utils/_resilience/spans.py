# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each provider call of a task did, one record per call: the ``resilience_spans`` result.

The resilience_summary callback turns each record into an OpenTelemetry span
(``plugins/plugin_utils/_traces.py``); nothing here imports OpenTelemetry. A task records its
calls only when its environment sets :data:`RECORD_ENV` to true (the callback sets it when it
exports traces); otherwise :func:`span_log` gives None and the Policy records nothing.

A record is a dict: ``provider`` (the key ``<type>:<name>``), ``operation``, ``outcome``
(``ok`` or the error type), ``start`` and ``end`` (wall clock, nanoseconds since the epoch),
``timeout`` (one attempt's time limit), ``attempts``, ``retries``, ``backoff_seconds``,
``rate_limit_waits``, ``rate_limit_seconds``, ``refused`` (the breaker refused the call),
``breaker_state`` (the breaker's state as the call last saw it: after a change of state it
made, or the state that refused it; None when neither happened) and ``events``: ``[name,
time, attributes]`` for each :data:`EVENTS` in the order they happened. Attributes are numbers,
error types, breaker states: never a message, an argument or a URL.
"""
from __future__ import annotations

import threading
import time
from typing import Any

__all__ = ("SpanLog", "span_log", "RECORD_ENV", "MAX_SPANS", "MAX_EVENTS", "EVENTS")

RECORD_ENV = "RESILIENT_VIRT_RECORD_SPANS"
MAX_SPANS = 200  # calls of one task beyond it are counted in ``dropped``, not recorded
MAX_EVENTS = 32  # events of one call beyond it are left out
EVENTS = ("attempt", "rate_limit_wait", "retry", "breaker_refused", "breaker_transition")


def span_log(environ: Any) -> SpanLog | None:
    """A SpanLog when the task's environment asks for spans (:data:`RECORD_ENV`), else None."""
    value = environ.get(RECORD_ENV) if environ is not None else None
    return SpanLog() if str(value or "").strip().lower() in ("1", "true", "yes", "on") else None


class SpanLog:
    """The records of one task's provider calls, from every Policy that shares it.

    Each thread has at most one call in progress (its Policy reports every event from the
    thread that called it), so the events go to the calling thread's record."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.dropped = 0
        self._local = threading.local()

    def result(self) -> dict[str, Any]:
        """The ``resilience_spans`` result."""
        return {"spans": self.spans, "dropped": self.dropped}

    def _event(self, name: str, **attributes: Any) -> dict[str, Any] | None:
        record = getattr(self._local, "call", None)
        if record is not None and len(record["events"]) < MAX_EVENTS:
            record["events"].append([name, time.time_ns(), attributes])
        return record

    def on_call(self, key: str) -> None:
        self._local.call = {
            "provider": key, "operation": None, "outcome": None, "start": time.time_ns(),
            "end": None, "timeout": None, "attempts": 0, "retries": 0, "backoff_seconds": 0.0,
            "rate_limit_waits": 0, "rate_limit_seconds": 0.0, "refused": False,
            "breaker_state": None, "events": []}

    def on_rate_limit_wait(self, seconds: float) -> None:
        if seconds > 0:
            record = self._event("rate_limit_wait", seconds=round(seconds, 6))
            if record is not None:
                record["rate_limit_waits"] += 1
                record["rate_limit_seconds"] = round(record["rate_limit_seconds"] + seconds, 6)

    def on_refused(self, state: str | None) -> None:
        record = self._event("breaker_refused", state=state)
        if record is not None:
            record["refused"] = True
            record["breaker_state"] = state

    def on_transition(self, before: str, after: str) -> None:
        record = self._event("breaker_transition", **{"from": before, "to": after})
        if record is not None:
            record["breaker_state"] = after

    def on_attempt_end(self, number: int, outcome: str, error_type: str | None, seconds: float) -> None:
        """Attempt ``number`` ended: ``ok``, ``error`` or ``timeout`` (abandoned after its
        limit), with the error's type."""
        attributes: dict[str, Any] = {"number": number, "outcome": outcome,
                                      "duration_seconds": round(seconds, 6)}
        if error_type is not None:
            attributes["error_type"] = error_type
        record = self._event("attempt", **attributes)
        if record is not None:
            record["attempts"] += 1

    def on_retry(self, number: int, error_type: str, delay: float) -> None:
        """A wait of ``delay`` seconds after attempt ``number`` failed with ``error_type``."""
        record = self._event("retry", after_attempt=number, error_type=error_type,
                             delay_seconds=round(max(0.0, delay), 6))
        if record is not None:
            record["retries"] += 1
            record["backoff_seconds"] = round(record["backoff_seconds"] + max(0.0, delay), 6)

    def on_call_end(self, operation: str, outcome: str, timeout: float) -> None:
        record = getattr(self._local, "call", None)
        self._local.call = None
        if record is None:
            return
        record.update(operation=operation, outcome=outcome, end=time.time_ns(), timeout=timeout)
        if len(self.spans) < MAX_SPANS:
            self.spans.append(record)
        else:
            self.dropped += 1
