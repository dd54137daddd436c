"""The resilience policy around every provider call: deadline, rate limit, breaker, timeout, retry.

One :meth:`Policy.call` makes up to ``max_attempts`` attempts (retry.run_with_retry decides
which failures are retried and how long to wait). Each attempt, in this order:

1. gives up if the call's deadline has passed;
2. waits for its turn at the rate limiter ``key`` (RateLimit, without using a turn, if the
   turn would come too late; see below);
3. asks the circuit breaker ``key`` for a permit (BreakerOpen fails the call at once: it is
   never retried);
4. for attempt 2 and later of a mutating call, waits until the work of the earlier attempts
   has ended: an abandoned attempt's thread and the operations it recorded
   (``inflight.py``), within this attempt's time limit; when the limit comes first the attempt
   ends with Timeout and starts nothing;
5. for attempt 2 and later, runs ``look()`` first when given: ``(True, result)`` means an
   earlier attempt already did the work (a mutating call that failed after changing the
   provider, or that timed out and finished later), so ``result`` is returned and ``fn`` is not
   called again;
6. runs ``fn()`` bounded by the operation timeout, shortened to what is left of the deadline
   (steps 4 and 5 share that bound);
7. reports the outcome to the breaker. A call that the local deadline (not the provider's
   operation timeout) cut short gives no verdict: its permit is only released.

``settings.deadline``, when set, bounds the whole call: rate limit waits, attempts (each one
gets what is left, at most its operation timeout) and the waits between them. When it is unset
only ``max_attempts`` bounds the call: each attempt waits at most one operation timeout for its
rate limit turn, then runs at most one operation timeout.

The state store lives inside those bounds too: every read and write of the breaker and the rate
limit gets what is left of the deadline, at most ``store_timeout``. Under ``store_failure: open``
(a store that falls back to memory) the rate limit's and the breaker's reads before an attempt
get at most ``STORE_SHARE`` of what is left (``STORE_FLOOR`` all the same, half of what is left
at most): a store that does not answer costs that share, then the task's memory serves, and the
provider keeps the rest. Otherwise a store that fails before the provider is called
(StoreUnavailable) fails the call at once, neither retried nor counted against the provider's
breaker; one that fails while recording an outcome leaves the outcome unrecorded, with a message
in :attr:`Policy.warnings`, and the call's own result stands.
Recording gets at least ``RECORD_GRACE`` seconds, so a call that used its whole deadline can
still be recorded. A probe (half-open breaker) holds its slot for its attempt's time limit plus
``store_timeout``, so a probe whose process died blocks the provider no longer than that.

:attr:`Policy.stats` (a ``stats.CallStats``) counts what the policy did: calls, attempts that
reached the provider, retries and their waits, rate limit waits, failures the breaker counted,
refusals by the breaker, the breaker's state changes, and each call by operation with how it
ended and how long it took (see ``stats.py``). ``spans``, a ``spans.SpanLog`` or None, records
each call on its own (its attempts, waits, breaker refusal and state changes) for traces.

``hooks`` is an optional object; Policy uses whichever of these methods it has:

* ``classify(exc) -> VirtError | None``: extra classifier, tried before the standard one;
* ``on_retry(attempt, error, delay)``: before each wait between attempts;
* ``after_attempt(attempt, outcome, error, duration)``: after each attempt that called
  ``fn``/``look``; outcome ``"ok"``, ``"error"`` or ``"timeout"`` (abandoned after its limit);
* ``scrub(text) -> text``: removes secrets from an attempt's error message before the breaker
  records it and the call raises it;
* ``status(handle) -> state``: the state (running, success, error) of an operation an attempt
  recorded (``inflight.record_started``); without it, recorded operations are not followed.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    ALIVE_ERRORS, CircuitBreaker)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import OPERATION_CLASSES
from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import (
    Deadline, run_with_timeout)
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, StoreUnavailable, Timeout, VirtError, classify)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.inflight import InFlight
from ansible_collections.resilient.virt.plugins.module_utils._resilience.rate_limit import RateLimiter
from ansible_collections.resilient.virt.plugins.module_utils._resilience.retry import run_with_retry
from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import CallStats

if TYPE_CHECKING:
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import Permit
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.retry import Attempt
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import ResilienceSettings
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.spans import SpanLog
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import StateStore

__all__ = ("Policy", "RECORD_GRACE", "STORE_SHARE", "STORE_FLOOR")

RECORD_GRACE = 0.5
STORE_SHARE = 0.25  # of what is left of a deadline, the most a store read may take under store_failure: open
STORE_FLOOR = 0.5  # seconds a store read may take under STORE_SHARE all the same (half the time left at most)


class Policy:
    """Resilience policy for one provider ``key`` (e.g. ``libvirt:lab1``) on ``store``."""

    def __init__(self, store: StateStore, key: str, settings: ResilienceSettings, hooks: Any = None,
                 spans: SpanLog | None = None):
        self.store = store
        self.key = key
        self.settings = settings
        self.hooks = hooks
        self.warnings: list[str] = []
        self.stats = CallStats(key)
        self.spans = spans
        # the error of the last failed attempt of the call in progress, while it is being retried
        self.retrying: VirtError | None = None
        lease = max(settings.timeout_for(c) for c in OPERATION_CLASSES) + settings.store_timeout
        self._breaker = CircuitBreaker(
            store, key, failure_threshold=settings.failure_threshold,
            reset_timeout=settings.reset_timeout, half_open_max_calls=settings.half_open_max_calls,
            success_threshold=settings.success_threshold, probe_lease=lease,
            on_transition=self.stats.on_transition if spans is None else self._on_transition)
        self._limiter = RateLimiter(store, key, settings.rate_limit_qps,
                                    settings.rate_limit_burst)
        classify_hook = getattr(hooks, "classify", None)
        self._classifiers = (classify_hook,) if classify_hook is not None else ()

    def _on_transition(self, before: str, after: str) -> None:
        self.stats.on_transition(before, after)
        if self.spans is not None:
            self.spans.on_transition(before, after)

    @property
    def breaker(self) -> CircuitBreaker:
        return self._breaker

    @property
    def limiter(self) -> RateLimiter:
        return self._limiter

    def call(self, fn: Callable[[], Any], op_class: str = "describe", name: str = "operation",
             look: Callable[[], tuple[bool, Any]] | None = None, operation: str = "operation") -> Any:
        """Return ``fn()`` run under this policy; raise the classified VirtError otherwise.

        ``operation`` (the provider operation, such as ``describe``) names the call in
        :attr:`stats`, with how it ended and how long it took."""
        timeout = self.settings.timeout_for(op_class)
        explicit = self.settings.deadline
        deadline = Deadline.after(explicit) if explicit else Deadline()
        inflight = InFlight(getattr(self.hooks, "status", None)) if op_class == "mutating" else None

        def attempt(att: Attempt) -> Any:
            if explicit and deadline.expired() and not att.at_deadline:
                raise Timeout("%s: the deadline of the call (%g s) passed before attempt %d"
                              % (name, explicit, att.number))
            limit = deadline if explicit and not att.at_deadline else Deadline.after(timeout)
            waited = self._limiter.acquire(
                limit, store_time=None if att.at_deadline else self._store_time(limit))
            self.stats.on_rate_limit_wait(waited)
            if spans is not None:
                spans.on_rate_limit_wait(waited)
            store_time = None if att.at_deadline else self._store_time(deadline)
            try:
                permit = self._breaker.before_call(
                    timeout=store_time, lease=att.budget(timeout) + self.settings.store_timeout)
            except BreakerOpen as refusal:
                self.stats.on_refused()
                if spans is not None:
                    spans.on_refused((refusal.details or {}).get("state"))
                raise
            budget = att.budget(timeout)
            if budget <= 0:
                self._record(self._breaker.release, deadline, permit)
                raise Timeout("%s: no time left before the deadline of the call" % name)
            return self._attempt(att, fn, look if att.number > 1 else None, permit, budget,
                                 budget < timeout, name, deadline, inflight)

        def on_retry(att: Attempt, error: VirtError, delay: float) -> None:
            self.retrying = error
            self.stats.on_retry(delay)
            if spans is not None:
                spans.on_retry(att.number, error.type, delay)
            hook = getattr(self.hooks, "on_retry", None)
            if hook is not None:
                hook(att, error, delay)

        spans = self.spans
        self.stats.on_call()
        if spans is not None:
            spans.on_call(self.key)
        self.retrying = None
        outcome = "Internal"
        started = time.monotonic()
        try:
            result = run_with_retry(attempt, self.settings.retry, deadline=deadline,
                                    on_retry=on_retry, classifiers=self._classifiers)
            outcome = "ok"
            return result
        except VirtError as err:
            outcome = err.type
            if err.type not in ALIVE_ERRORS:  # an answer (NotFound, ...) is no failed call
                self.stats.on_failed_call()
            raise
        finally:
            self.retrying = None
            self.stats.on_call_end(operation, outcome, time.monotonic() - started, timeout)
            if spans is not None:
                spans.on_call_end(operation, outcome, timeout)

    def _store_time(self, deadline: Deadline) -> float | None:
        """What the rate limit's and the breaker's reads before a call may spend on the store:
        what is left of the deadline; when the store falls back to memory (``store_failure:
        open``) at most STORE_SHARE of it (but STORE_FLOOR, or half of it when less, for a slow
        healthy store) and ``store_timeout``, so that a store that does not answer leaves the
        provider the rest."""
        left = deadline.remaining()
        if left is None or not getattr(self.store, "falls_back", False):
            return left
        return min(self.settings.store_timeout, max(STORE_SHARE * left, min(STORE_FLOOR, left / 2)))

    def _record(self, method: Callable[..., Any], deadline: Deadline, *args: Any) -> Any:
        """Report an outcome to the breaker and return its answer; a store failure here only
        becomes a warning (and None)."""
        left = deadline.remaining()
        try:
            return method(*args, timeout=None if left is None else max(RECORD_GRACE, left))
        except StoreUnavailable as err:
            warning = "the outcome of a call to %s was not recorded in its circuit breaker: %s" % (
                self.key, err.message)
            if warning not in self.warnings:
                self.warnings.append(warning)

    def _attempt(self, att: Attempt, fn: Callable[[], Any], look: Callable[[], tuple[bool, Any]] | None,
                 permit: Permit, budget: float, cut_by_deadline: bool, name: str, deadline: Deadline,
                 inflight: InFlight | None = None) -> Any:
        finished: list[bool] = []
        mine = inflight.start(att.number) if inflight is not None else None

        def work() -> Any:
            if mine is not None:
                mine.begin()
            try:
                self.stats.on_attempt()
                if inflight is not None and mine is not None and att.number > 1:
                    inflight.settle(mine)
                if look is not None:
                    done, result = look()
                    if done:
                        return result
                if mine is not None and not mine.enter():
                    raise Timeout("%s: attempt %d was abandoned before it started" % (
                        name, att.number))
                return fn()
            finally:
                if mine is not None:
                    mine.end()
                finished.append(True)

        after = getattr(self.hooks, "after_attempt", None)
        started = time.monotonic()
        try:
            result = run_with_timeout(work, budget, name)
        except Exception as exc:
            err = classify(exc, self._classifiers)
            scrub = getattr(self.hooks, "scrub", None)
            if scrub is not None:
                err.message = scrub(err.message)
                err.args = (err.message,)
            abandoned = not finished and isinstance(err, Timeout)
            if abandoned and inflight is not None and mine is not None and not mine.abandon() and \
                    inflight.waiting_for:
                err = inflight.timeout_error(name, budget, err)
            if abandoned and cut_by_deadline:
                self._record(self._breaker.release, deadline, permit)
            elif self._record(self._breaker.on_failure, deadline, permit, err):
                self.stats.on_failure()
            if self.spans is not None:
                self.spans.on_attempt_end(att.number, "timeout" if abandoned else "error", err.type,
                                          time.monotonic() - started)
            if after is not None:
                after(att, "timeout" if abandoned else "error", err, time.monotonic() - started)
            if err is exc:
                raise
            raise err from exc
        self._record(self._breaker.on_success, deadline, permit)
        if self.spans is not None:
            self.spans.on_attempt_end(att.number, "ok", None, time.monotonic() - started)
        if after is not None:
            after(att, "ok", None, time.monotonic() - started)
        return result
