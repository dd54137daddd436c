"""Circuit breaker whose state lives in the state store, shared by every process.

States: ``closed`` (calls pass), ``open`` (calls are refused with BreakerOpen), ``half_open``
(up to ``half_open_max_calls`` probe calls at once; the rest are refused). ``failure_threshold``
consecutive unhealthy failures (errors.counts_against_breaker: Unavailable, Timeout, other
Retryable) open it. Answers that prove the provider alive (NotFound, InvalidSpec, Conflict,
Unauthorized, NotSupported, QuotaExceeded, RateLimit) count as successes. Other errors (Internal,
BreakerOpen) give no verdict. An open breaker half-opens ``reset_timeout`` seconds after it
opened; refused calls do not push that time back. A failed probe opens it again (new
``opened_at``); ``success_threshold`` successful probes close it. A probe holds a lease of
``probe_lease`` seconds so that a probe whose process died frees its slot when the lease ends.

``force_open()`` opens the breaker now, exactly as failures would: it half-opens after
``reset_timeout`` unless ``reset()`` closes it first.

Every change is one ``store.update`` so counters stay exact with many processes; a change of
state that one of this object's updates made is reported to ``on_transition(before, after)``. A call through
a closed breaker costs one store read before it and one update after it; while its provider
fails (``consecutive_failures`` > 0) calls take slots, so that no more than ``failure_threshold``
failing calls are ever under way across processes (see :meth:`CircuitBreaker.before_call`). Each of them takes an
optional ``timeout`` for the store operation (see ``state_store.StateStore``). A stored time that
is not a usable epoch (written by a bug or by hand) counts as "now", so a damaged record can
never keep a breaker open.
"""
from __future__ import annotations

import math
import os
import random
import time
from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, InvalidSpec, Timeout, classify, counts_against_breaker, redact)

if TYPE_CHECKING:
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import Record, StateStore

__all__ = ("CircuitBreaker", "Permit", "list_breakers", "shown", "fact", "NAMESPACE", "FACT_FIELDS",
           "BREAKER_FACT")

NAMESPACE = "breaker"
BREAKER_FACT = "resilient_virt_breakers"  # the fact that holds every breaker, each as fact() gives it
DEFAULT_PROBE_LEASE = 240.0
ALIVE_ERRORS = frozenset(("NotFound", "InvalidSpec", "Conflict", "Unauthorized", "NotSupported",
                          "QuotaExceeded", "RateLimit"))
_EMPTY: Record = {
    "state": "closed", "consecutive_failures": 0, "failures_total": 0, "opened_total": 0,
    "rejected_total": 0, "successes_total": 0, "opened_at": None, "half_open_at": None,
    "probes": {}, "probe_successes": 0, "last_error": None}
_STATES = ("closed", "open", "half_open")
_COUNTERS = ("consecutive_failures", "failures_total", "opened_total", "rejected_total",
             "successes_total", "probe_successes")
_CONFIG = ("failure_threshold", "reset_timeout", "half_open_max_calls", "success_threshold",
           "probe_lease")


class Permit:
    """Admission to one call; hand it back to on_success, on_failure or release."""

    __slots__ = ("breaker", "probe")

    def __init__(self, breaker: str, probe: str | None = None):
        self.breaker = breaker
        self.probe = probe

    def __repr__(self) -> str:
        return "Permit(%r, probe=%r)" % (self.breaker, self.probe)


_LATEST = 4102444800.0  # 2100-01-01: later epochs in a record are damage, not plans


def _epoch(value: Any, now: float) -> float:
    """``value`` as an epoch, or ``now`` when it is not a finite time before 2100."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value) and 0 <= value <= _LATEST:
        return float(value)
    return now


def _utc(epoch: Any) -> str:
    return format_time(_epoch(epoch, time.time()))


def _advance(current: Record | None, now: float) -> Record:
    """A copy of the stored record brought to ``now``: open -> half_open, stale probes dropped."""
    rec = dict(_EMPTY)
    if isinstance(current, dict):
        rec.update(current)
    for counter in _COUNTERS:
        if isinstance(rec[counter], bool) or not isinstance(rec[counter], int):
            rec[counter] = 0
    probes = rec["probes"] if isinstance(rec["probes"], dict) else {}
    rec["probes"] = {pid: exp for pid, exp in probes.items() if _epoch(exp, now) > now}
    if rec["state"] == "open":
        rec["half_open_at"] = _epoch(rec["half_open_at"], now)
        if now >= rec["half_open_at"]:
            rec.update(state="half_open", probes={}, probe_successes=0)
    elif rec["state"] not in ("closed", "half_open"):
        rec["state"] = "closed"
    return rec


def _unhindered(current: Record | None) -> bool:
    """True when the stored record lets a call through without a slot: closed, no failure
    lately (a damaged counter counts as a failure, so the careful path decides)."""
    if not isinstance(current, dict):
        return True
    return current.get("state") == "closed" and current.get("consecutive_failures", 0) == 0


def _view(name: str, current: Record | None, now: float, config: dict[str, Any]) -> Record:
    rec = _advance(current, now)
    out: Record = {"name": name}
    for field in ("state", "consecutive_failures", "failures_total", "opened_total",
                  "rejected_total", "successes_total", "opened_at", "half_open_at", "last_error"):
        out[field] = rec[field]
    out["probes_in_flight"] = len(rec["probes"])
    for field in _CONFIG:
        out[field] = config.get(field, (current or {}).get(field))
    return out


def _positive(name: str, value: Any, kind: type) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = 0
    if number <= 0 or (kind is int and number != value):
        raise InvalidSpec("circuit breaker %s must be %s > 0, got %r"
                          % (name, "an integer" if kind is int else "a number", value))
    return number


class CircuitBreaker:
    """The breaker ``name`` (e.g. ``libvirt:lab1``) stored in ``store``."""

    def __init__(self, store: StateStore, name: str, failure_threshold: int = 5, reset_timeout: float = 30.0,
                 half_open_max_calls: int = 1, success_threshold: int = 1, probe_lease: float | None = None,
                 on_transition: Callable[[str, str], None] | None = None):
        self.store = store
        self.name = name
        self.on_transition = on_transition
        self.failure_threshold = _positive("failure_threshold", failure_threshold, int)
        self.reset_timeout = _positive("reset_timeout", reset_timeout, float)
        self.half_open_max_calls = _positive("half_open_max_calls", half_open_max_calls, int)
        self.success_threshold = _positive("success_threshold", success_threshold, int)
        self.probe_lease = _positive("probe_lease", DEFAULT_PROBE_LEASE if probe_lease is None
                                     else probe_lease, float)
        self._config = {field: getattr(self, field) for field in _CONFIG}

    def _change(self, fn: Callable[[Record, float], Any], timeout: float | None = None) -> Any:
        """store.update with ``fn(rec, now) -> result`` on an advanced copy; config recorded.
        A change of state that the update made goes to ``on_transition(before, after)``."""
        def apply(current: Record | None, now: float) -> tuple[Record, tuple[Any, str, str]]:
            rec = _advance(current, now)
            result = fn(rec, now)
            rec.update(self._config)
            before = current.get("state") if isinstance(current, dict) else None
            return rec, (result, before if before in _STATES else "closed", rec["state"])
        result, before, after = self.store.update(NAMESPACE, self.name, apply, timeout=timeout)
        if before != after and self.on_transition is not None:
            self.on_transition(before, after)
        return result

    def _open(self, rec: Record, now: float) -> None:
        rec.update(state="open", opened_at=now, half_open_at=now + self.reset_timeout,
                   opened_total=rec["opened_total"] + 1, probes={}, probe_successes=0)

    @staticmethod
    def _close(rec: Record, now: float) -> None:
        rec.update(state="closed", consecutive_failures=0, opened_at=None, half_open_at=None,
                   probes={}, probe_successes=0)

    def before_call(self, timeout: float | None = None, lease: float | None = None) -> Permit:
        """A Permit for one call, or BreakerOpen (counted in rejected_total).

        A probe (half-open) holds its slot for ``lease`` seconds (default ``probe_lease``): the
        longest the call it admits can take, so a probe whose process died frees it then.

        A closed breaker whose provider has failed lately (``consecutive_failures`` > 0) lets
        at most ``failure_threshold - consecutive_failures`` calls be under way at once, each
        holding a slot as a probe does: however many processes call at the same time, no more
        calls reach a failing provider than the failures that open the breaker. A call that
        finds no free slot waits (at most ``lease`` seconds) for one to free, for the breaker to
        open (BreakerOpen) or for a success to clear the streak.
        """
        current = self.store.get(NAMESPACE, self.name, timeout=timeout)
        if _unhindered(current):
            return Permit(self.name)
        probe = os.urandom(8).hex()
        lease = self.probe_lease if lease is None else min(self.probe_lease, lease)

        def admit(rec: Record, now: float) -> tuple[Permit | None, BreakerOpen | None]:
            if rec["state"] == "closed":
                if not rec["consecutive_failures"]:
                    return Permit(self.name), None
                if rec["consecutive_failures"] + len(rec["probes"]) >= self.failure_threshold:
                    return None, None  # every slot is taken: wait
                rec["probes"][probe] = now + lease
                return Permit(self.name, probe), None
            if rec["state"] == "half_open" and len(rec["probes"]) < self.half_open_max_calls:
                rec["probes"][probe] = now + lease
                return Permit(self.name, probe), None
            rec["rejected_total"] += 1
            return None, self._refusal(rec, now)

        give_up = time.monotonic() + lease
        pause = 0.01
        while True:
            permit, refusal = self._change(admit, timeout)
            if refusal is not None:
                raise refusal
            if permit is not None:
                return permit
            if time.monotonic() + pause > give_up:
                raise Timeout("circuit breaker %r: the calls under way to a failing provider did not "
                              "end within %gs" % (self.name, lease))
            time.sleep(pause * random.uniform(0.5, 1.0))
            pause = min(pause * 2, 0.2)
            if _unhindered(self.store.get(NAMESPACE, self.name, timeout=timeout)):
                return Permit(self.name)

    def _refusal(self, rec: Record, now: float) -> BreakerOpen:
        if rec["state"] == "open":
            at = rec["half_open_at"]
            last = rec["last_error"]
            why = "after %d consecutive failures" % rec["consecutive_failures"]
            if last:
                why += ", last %s: %s" % (last["type"], last["message"])
            message = ("circuit breaker %r is open (%s): calls are refused until it half-opens "
                       "at %s (in %.1f s)" % (self.name, why, _utc(at), max(0.0, at - now)))
        else:
            at = min(rec["probes"].values())
            message = ("circuit breaker %r is half-open and its %d probe slot(s) are taken: calls "
                       "are refused until a probe ends, at the latest at %s (in %.1f s)"
                       % (self.name, self.half_open_max_calls, _utc(at), max(0.0, at - now)))
        return BreakerOpen(self.name, at, message=message, details={"state": rec["state"]})

    def on_success(self, permit: Permit, timeout: float | None = None) -> None:
        """The provider answered: count it; enough successful probes close the breaker."""
        def success(rec: Record, now: float) -> None:
            rec["successes_total"] += 1
            if rec["state"] == "closed":  # a slot of a failing streak, or none
                rec["probes"].pop(permit.probe, None)
                rec["consecutive_failures"] = 0
            elif permit.probe is not None and rec["probes"].pop(permit.probe, None) is not None:
                rec["probe_successes"] += 1
                if rec["probe_successes"] >= self.success_threshold:
                    rec.update(state="closed", consecutive_failures=0, opened_at=None,
                               half_open_at=None, probes={}, probe_successes=0)
        self._change(success, timeout)

    def on_failure(self, permit: Permit, err: BaseException, timeout: float | None = None) -> bool | None:
        """The call failed with ``err``: unhealthy errors count (True is returned), alive-proving
        ones succeed."""
        err = classify(err)
        if err.type in ALIVE_ERRORS:
            self.on_success(permit, timeout)
            return None
        if not counts_against_breaker(err):
            self.release(permit, timeout)
            return None
        last = {"type": err.type, "message": redact(err.message)[:500]}

        def failure(rec: Record, now: float) -> None:
            rec["failures_total"] += 1
            rec["consecutive_failures"] += 1
            rec["last_error"] = last
            held = permit.probe is not None and rec["probes"].pop(permit.probe, None) is not None
            failed_probe = held and rec["state"] == "half_open"
            too_many = rec["state"] == "closed" and \
                rec["consecutive_failures"] >= self.failure_threshold
            if failed_probe or too_many:
                self._open(rec, now)
        self._change(failure, timeout)
        return True

    def release(self, permit: Permit, timeout: float | None = None) -> None:
        """The call ended without a verdict from the provider: only free its probe slot."""
        if permit.probe is None:
            return

        def free(rec: Record, now: float) -> None:
            rec["probes"].pop(permit.probe, None)
        self._change(free, timeout)

    def reset(self) -> None:
        """Close now; the failure streak is cleared, the totals are kept."""
        self._change(self._close)

    def force_open(self) -> None:
        """Open now (opened_at = now); it half-opens after reset_timeout like any open breaker."""
        self._change(self._open)

    def set_state(self, wanted: str, check_mode: bool = False) -> tuple[bool, Record, Record]:
        """Close (``closed``: :meth:`reset`) or open (``open``: :meth:`force_open`) the breaker
        as an operator asks; returns (changed, before, after) snapshots.

        Closing changes a breaker that is not closed or has failures in a row; opening one that
        is not open. In check mode ``after`` is predicted by the same change, nothing is written.
        """
        change = {"closed": self._close, "open": self._open}[wanted]
        current, now = self.store.get(NAMESPACE, self.name), self.store.now()
        before = _view(self.name, current, now, self._config)
        changed = before["state"] != wanted or (
            wanted == "closed" and before["consecutive_failures"] > 0)
        if not changed:
            return False, before, before
        if not check_mode:
            self._change(change)
            return True, before, self.snapshot()
        rec = _advance(current, now)
        change(rec, now)
        return True, before, _view(self.name, rec, now, self._config)

    def snapshot(self) -> Record:
        return _view(self.name, self.store.get(NAMESPACE, self.name), self.store.now(),
                     self._config)


FACT_FIELDS = ("state", "consecutive_failures", "half_open_at", "last_error")


def shown(snapshot: Record) -> Record:
    """A snapshot as results show it: its times in RFC 3339 UTC, ``half_open_at`` rounded up to
    the second (no probe is let through before it)."""
    out = dict(snapshot)
    if out.get("opened_at") is not None:
        out["opened_at"] = format_time(out["opened_at"])
    if out.get("half_open_at") is not None:
        out["half_open_at"] = format_time(out["half_open_at"], round_up=True)
    return out


def fact(snapshot: Record) -> Record:
    """The short form of a snapshot in the ``resilient_virt_breakers`` fact."""
    full = shown(snapshot)
    return dict((field, full[field]) for field in FACT_FIELDS)


def list_breakers(store: StateStore) -> list[Record]:
    """Snapshots of every breaker in ``store``, sorted by name."""
    now = store.now()
    return [_view(name, rec, now, {}) for name, rec in sorted(store.items(NAMESPACE).items())]
