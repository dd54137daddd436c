# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the resilience layer did during one task, per provider key: the ``resilience`` result.

A :class:`CallStats` belongs to one Policy and counts, for its provider key:

* ``calls``: calls made through the policy (each may make several attempts);
* ``attempts``: attempts that reached the provider (its operation, or the look before a retry);
* ``retries`` and ``backoff_seconds``: waits between two attempts and their total length;
* ``rate_limit_waits`` and ``rate_limit_seconds``: attempts that waited for their turn at the
  rate limit, and how long;
* ``failures``: attempts that the circuit breaker counted as failures (the provider unhealthy);
* ``refused``: calls refused at once by an open (or fully probed half-open) breaker;
* ``failed_calls``: calls that ended without an answer from the provider (unreachable or too
  slow after every attempt, refused by the breaker, the state store failing); an answer such as
  NotFound is no failed call;
* ``transitions``: the breaker's state changes this task's own store updates made, as
  ``{"from", "to", "count"}`` in the order first seen (at most the six possible pairs).

Every entry has a fixed size; :func:`merge` adds entries together (several connections to one
provider in a task, or many tasks in a play) and :func:`summary` bounds how many keys a result
carries. Nothing here holds a secret: provider keys are ``<type>:<name>`` with any URL redacted.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ("CallStats", "merge", "summary", "COUNTERS", "SECONDS", "MAX_PROVIDERS", "OTHERS")

COUNTERS = ("calls", "attempts", "retries", "rate_limit_waits", "failures", "refused",
            "failed_calls")
SECONDS = ("backoff_seconds", "rate_limit_seconds")
MAX_PROVIDERS = 100  # keys beyond it (sorted) are added up under OTHERS
OTHERS = "(others)"


def _empty() -> dict[str, Any]:
    entry: dict[str, Any] = dict((name, 0) for name in COUNTERS)
    entry.update((name, 0.0) for name in SECONDS)
    entry["transitions"] = []
    return entry


def _number(value: Any) -> float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0


def merge(total: dict[str, Any], entry: Any) -> dict[str, Any]:
    """Add the entry ``entry`` to ``total`` (both in the ``resilience`` form); return ``total``.

    Values that are not non-negative numbers, or transitions that are not well formed, count as
    nothing: ``entry`` may come from a result that something else changed.
    """
    if not isinstance(entry, dict):
        return total
    for name in COUNTERS + SECONDS:
        total[name] = total.get(name, 0) + _number(entry.get(name))
    for name in SECONDS:
        total[name] = round(total[name], 3)
    seen = total.setdefault("transitions", [])
    for change in entry.get("transitions") or ():
        if not isinstance(change, dict) or not all(isinstance(change.get(k), str) for k in ("from", "to")):
            continue
        count = _number(change.get("count"))
        for known in seen:
            if (known["from"], known["to"]) == (change["from"], change["to"]):
                known["count"] += count
                break
        else:
            seen.append({"from": change["from"], "to": change["to"], "count": count})
    return total


def summary(stats: Iterable[CallStats]) -> dict[str, dict[str, Any]]:
    """The ``resilience`` result of a task from its CallStats: {provider key: entry}, keys
    beyond :data:`MAX_PROVIDERS` (in sorted order) added up under :data:`OTHERS`."""
    by_key: dict[str, dict[str, Any]] = {}
    for item in stats:
        merge(by_key.setdefault(item.key, _empty()), item.entry())
    keys = sorted(by_key)
    out = dict((key, by_key[key]) for key in keys[:MAX_PROVIDERS])
    for key in keys[MAX_PROVIDERS:]:
        merge(out.setdefault(OTHERS, _empty()), by_key[key])
    return out


class CallStats:
    """The counts of one Policy (provider ``key``); the Policy calls the ``on_*`` methods."""

    def __init__(self, key: str):
        self.key = key
        self._entry = _empty()

    def entry(self) -> dict[str, Any]:
        """A copy of the counts in the ``resilience`` entry form."""
        return merge(_empty(), self._entry)

    def _add(self, name: str, amount: float = 1) -> None:
        self._entry[name] += amount

    def on_call(self) -> None:
        self._add("calls")

    def on_attempt(self) -> None:
        self._add("attempts")

    def on_retry(self, delay: float) -> None:
        self._add("retries")
        self._add("backoff_seconds", max(0.0, float(delay)))

    def on_rate_limit_wait(self, seconds: float) -> None:
        if seconds > 0:
            self._add("rate_limit_waits")
            self._add("rate_limit_seconds", float(seconds))

    def on_failure(self) -> None:
        self._add("failures")

    def on_refused(self) -> None:
        self._add("refused")

    def on_failed_call(self) -> None:
        self._add("failed_calls")

    def on_transition(self, before: str, after: str) -> None:
        merge(self._entry, {"transitions": [{"from": before, "to": after, "count": 1}]})
