"""Retry loop with exponential backoff and jitter, bounded by attempts and a deadline.

Built on tenacity (imported only when a loop runs): its ``stop_after_attempt``,
``wait_exponential`` and ``retry_if_exception``, with the deadline and jitter added. Rules:

* only errors that :func:`errors.classify` marks retryable are retried; BreakerOpen and every
  other non-retryable error are raised at once;
* the wait after failed attempt ``n`` is ``min(max_delay, base_delay * multiplier ** (n - 1))``
  plus up to 10 % of it at random, and at least the error's ``retry_after``;
* the loop never sleeps past the deadline: when time remains but less than the next wait, it
  sleeps until the deadline and makes one final attempt (``is_last`` and ``at_deadline`` set);
  when no time remains the last error is raised;
* the error raised is the classified VirtError (the original as ``.cause``), with
  ``details["attempts"]`` = the number of attempts made.
"""
from __future__ import annotations

import random
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import Deadline
from ansible_collections.resilient.virt.plugins.module_utils.errors import VirtError, classify

if TYPE_CHECKING:  # tenacity is imported when a loop runs
    import tenacity

    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import RetrySettings

Classifier = Callable[[BaseException], "VirtError | None"]

__all__ = ("Attempt", "run_with_retry", "backoff_delay")

JITTER = 0.1


class Attempt:
    """One attempt: ``number`` (1-based), ``is_last``, the whole call's ``deadline``.

    ``at_deadline`` is True for the final attempt made once the deadline is reached.
    """

    __slots__ = ("number", "is_last", "deadline", "at_deadline")

    def __init__(self, number: int, is_last: bool, deadline: Deadline, at_deadline: bool = False):
        self.number = number
        self.is_last = is_last
        self.deadline = deadline
        self.at_deadline = at_deadline

    def budget(self, seconds: float) -> float:
        """Time this attempt may take: ``seconds`` capped by the deadline.

        The final attempt made at the deadline gets ``seconds`` in full, so the call may end
        up to one attempt's timeout after the deadline.
        """
        return seconds if self.at_deadline else self.deadline.cap(seconds)

    def __repr__(self) -> str:
        return "Attempt(number=%d, is_last=%s, at_deadline=%s)" % (
            self.number, self.is_last, self.at_deadline)


def _exponential(settings: RetrySettings) -> tenacity.wait_exponential:
    import tenacity

    return tenacity.wait_exponential(multiplier=settings.base_delay, exp_base=settings.multiplier,
                                     max=settings.max_delay)


class _Number:
    """What tenacity's strategies read of a retry state: the attempt number."""

    def __init__(self, attempt_number: int):
        self.attempt_number = attempt_number


def backoff_delay(number: int, settings: RetrySettings) -> float:
    """Wait before attempt ``number + 1`` without jitter: capped exponential backoff."""
    return _exponential(settings)(_Number(number))  # type: ignore[arg-type]  # all it reads


class _Loop:
    """One run_with_retry call: the attempt in progress and the last failure, classified once."""

    def __init__(self, fn: Callable[[Attempt], Any], settings: RetrySettings, deadline: Deadline,
                 on_retry: Callable[[Attempt, VirtError, float], None] | None,
                 classifiers: tuple[Classifier, ...]):
        self.fn = fn
        self.max_attempts = max(1, int(settings.max_attempts))
        self.deadline = deadline
        self.on_retry = on_retry
        self.classifiers = classifiers
        self.current: Attempt | None = None
        self.next_at_deadline = False
        self.delay: float = 0.0
        self.failed: tuple[BaseException, VirtError] | None = None  # the last failed attempt's, classified

    def call(self) -> Any:
        number = 1 if self.current is None else self.current.number + 1
        at_deadline = self.next_at_deadline
        is_last = number >= self.max_attempts or at_deadline or self.deadline.expired()
        self.current = Attempt(number, is_last, self.deadline, at_deadline)
        return self.fn(self.current)

    def classified(self, exc: BaseException) -> VirtError:
        if self.failed is None or self.failed[0] is not exc:
            self.failed = (exc, classify(exc, self.classifiers))
        return self.failed[1]

    def retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, Exception) and self.classified(exc).retryable

    def before_sleep(self, state: tenacity.RetryCallState) -> None:
        if self.on_retry is not None and self.current is not None and self.failed is not None:
            self.on_retry(self.current, self.failed[1], self.delay)  # after a failed attempt


def _strategies(loop: _Loop, settings: RetrySettings) -> dict[str, Any]:
    """tenacity's stop, wait and retry for ``loop``: attempts or the deadline stop it; the wait
    is tenacity's capped exponential plus jitter, at least ``retry_after``, never past the
    deadline; only retryable errors are retried."""
    import tenacity

    class _AtDeadline(tenacity.stop.stop_base):
        def __call__(self, state: tenacity.RetryCallState) -> bool:
            at_deadline = loop.current is not None and loop.current.at_deadline
            return at_deadline or loop.deadline.expired()

    class _Backoff(tenacity.wait.wait_base):
        def __call__(self, state: tenacity.RetryCallState) -> float:
            backoff = backoff_delay(state.attempt_number, settings)
            delay = backoff + random.uniform(0.0, JITTER * backoff)
            retry_after = loop.failed[1].retry_after if loop.failed is not None else None
            if retry_after is not None:
                delay = max(delay, retry_after)
            remaining = loop.deadline.remaining()
            loop.next_at_deadline = remaining is not None and delay >= remaining
            loop.delay = remaining if remaining is not None and loop.next_at_deadline else delay
            return loop.delay

    return dict(stop=tenacity.stop_any(tenacity.stop_after_attempt(loop.max_attempts), _AtDeadline()),
                wait=_Backoff(), retry=tenacity.retry_if_exception(loop.retryable))


def run_with_retry(fn: Callable[[Attempt], Any], settings: RetrySettings, deadline: Deadline | None = None,
                   sleep: Callable[[float], None] = time.sleep,
                   on_retry: Callable[[Attempt, VirtError, float], None] | None = None,
                   classifiers: Iterable[Classifier] = ()) -> Any:
    """Return ``fn(attempt)``, retrying retryable failures as described in the module docstring.

    ``settings`` has ``max_attempts``, ``base_delay``, ``max_delay``, ``multiplier`` (e.g.
    ``ResilienceSettings.retry``); ``deadline`` is a :class:`Deadline` (None = unbounded);
    ``sleep(seconds)`` waits; ``on_retry(attempt, error, delay)`` runs before each wait with
    the failed Attempt and its VirtError; ``classifiers`` go to :func:`errors.classify`.
    """
    import tenacity

    loop = _Loop(fn, settings, deadline or Deadline(), on_retry, tuple(classifiers))
    retrying = tenacity.Retrying(sleep=sleep, before_sleep=loop.before_sleep, reraise=True,
                                 **_strategies(loop, settings))
    try:
        return retrying(loop.call)
    except Exception as exc:
        err = loop.classified(exc)
        err.details = dict(err.details or {}, attempts=loop.current.number if loop.current else 0)
        if err is exc:
            raise
        if err.cause is exc:
            raise err from exc
        raise err  # noqa: B904 - err is inside exc's own chain; linking them again would loop
