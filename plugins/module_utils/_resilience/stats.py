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
  ``{"from", "to", "count"}`` in the order first seen (at most the six possible pairs);
* ``operations``: per provider operation (``describe``, ``create``...), ``outcomes`` (calls by
  how they ended: ``ok`` or the error type), ``buckets`` (calls by how long they took, from the
  first attempt to the end of the last, counted in the bins of :data:`DURATION_BUCKETS` and a
  last one for longer calls), ``seconds`` (their total) and ``timeout`` (the time limit of one
  attempt of the last call).

Every entry has a bounded size: at most :data:`MAX_OPERATIONS` operations, each with outcomes
from the error taxonomy (:data:`OUTCOMES`; anything else counts as ``other``). :func:`merge`
adds entries together (several connections to one provider in a task, many tasks in a play, or
runs in the state store) and :func:`summary` bounds how many keys a result carries. Nothing here
holds a secret: provider keys are ``<type>:<name>`` with any URL redacted, operation names and
outcomes come from the code.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils import errors

__all__ = ("CallStats", "merge", "summary", "COUNTERS", "SECONDS", "MAX_PROVIDERS", "OTHERS",
           "DURATION_BUCKETS", "OUTCOMES", "MAX_OPERATIONS", "OTHER", "operation_label")

COUNTERS = ("calls", "attempts", "retries", "rate_limit_waits", "failures", "refused",
            "failed_calls")
SECONDS = ("backoff_seconds", "rate_limit_seconds")
MAX_PROVIDERS = 100  # keys beyond it (sorted) are added up under OTHERS
OTHERS = "(others)"
# upper bounds (seconds) of the duration bins of a call; a last bin holds the longer ones
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
OUTCOMES = frozenset(["ok"] + [cls.type for cls in vars(errors).values()
                               if isinstance(cls, type) and issubclass(cls, errors.VirtError)])
MAX_OPERATIONS = 40  # operations beyond it are added up under OTHER
OTHER = "other"  # an outcome outside OUTCOMES, an operation name that is not one, or one too many
_OPERATION = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def operation_label(operation: Any) -> str:
    """``operation`` when it is an operation name of the code's form, else :data:`OTHER`."""
    return operation if isinstance(operation, str) and _OPERATION.match(operation) else OTHER


def _empty() -> dict[str, Any]:
    entry: dict[str, Any] = dict((name, 0) for name in COUNTERS)
    entry.update((name, 0.0) for name in SECONDS)
    entry["transitions"] = []
    entry["operations"] = {}
    return entry


def _empty_operation() -> dict[str, Any]:
    return {"outcomes": {}, "buckets": [0] * (len(DURATION_BUCKETS) + 1), "seconds": 0.0,
            "timeout": None}


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
    operations = entry.get("operations")
    for operation, counts in operations.items() if isinstance(operations, dict) else ():
        _merge_operation(total.setdefault("operations", {}), operation, counts)
    return total


def _merge_operation(total: dict[str, Any], operation: Any, counts: Any) -> None:
    """Add the counts of one operation to ``total`` (``operations`` of an entry)."""
    if not isinstance(counts, dict):
        return
    if not isinstance(operation, str) or not _OPERATION.match(operation) or \
            operation not in total and len(total) >= MAX_OPERATIONS:
        operation = OTHER
    into = total.setdefault(operation, _empty_operation())
    outcomes = counts.get("outcomes")
    for outcome, count in outcomes.items() if isinstance(outcomes, dict) else ():
        label = outcome if outcome in OUTCOMES else OTHER
        into["outcomes"][label] = into["outcomes"].get(label, 0) + _number(count)
    buckets = counts.get("buckets")
    if isinstance(buckets, list) and len(buckets) == len(into["buckets"]):
        into["buckets"] = [have + _number(more) for have, more in zip(into["buckets"], buckets)]
    into["seconds"] = round(into["seconds"] + _number(counts.get("seconds")), 3)
    if _number(counts.get("timeout")):
        into["timeout"] = counts["timeout"]


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

    def on_call_end(self, operation: str, outcome: str, seconds: float, timeout: float) -> None:
        """A call of ``operation`` ended with ``outcome`` (``ok`` or the error type) after
        ``seconds``; ``timeout`` is the time limit of one of its attempts."""
        buckets = [0] * (len(DURATION_BUCKETS) + 1)
        buckets[sum(1 for bound in DURATION_BUCKETS if bound < seconds)] = 1
        _merge_operation(self._entry["operations"], operation, {
            "outcomes": {outcome: 1}, "buckets": buckets, "seconds": max(0.0, seconds),
            "timeout": timeout})
