"""Following the work of an abandoned attempt, so that a retry never does it a second time.

An attempt abandoned at its time limit is not stopped: its thread goes on, and so does whatever
it asked the provider to do (a create still being processed, a vSphere task still running). A
retry that started the work again would do it twice. So before attempt 2 and later of a call,
:meth:`InFlight.settle` waits until every earlier attempt's thread has ended and every
operation a backend recorded with :func:`record_started` (a vSphere task id, answered by
``Provider.task_status``) has finished, polling, within the retry's own time limit; only then
does the look before the retry decide whether the work is done. When the time limit comes
first, the retry ends with Timeout and starts nothing: the next attempt follows the same work.

An abandoned attempt that has not yet called the provider never calls it: :meth:`Attempt.enter`
refuses once the attempt was abandoned.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound, NotSupported, Timeout, VirtError

__all__ = ("InFlight", "record_started")

FIRST_POLL = 0.05
MAX_POLL = 1.0
FINISHED = ("success", "error")

_current = threading.local()


def record_started(handle: Any) -> None:
    """Record ``handle`` (a task id ``task_status`` answers) as the operation the attempt
    running in this thread has just started; outside an attempt, nothing happens."""
    attempt = getattr(_current, "attempt", None)
    if attempt is not None and handle:
        attempt.handles.append(str(handle))


class Attempt:
    """One attempt's thread: whether it ended, was abandoned, or called the provider, and the
    handles of the operations it started."""

    def __init__(self, number: int):
        self.number = number
        self.handles: list[str] = []
        self.ended = threading.Event()
        self.abandoned = False
        self.entered = False
        self._lock = threading.Lock()

    def begin(self) -> None:
        """Run in the attempt's thread, before anything else: handles recorded there are its."""
        _current.attempt = self

    def end(self) -> None:
        _current.attempt = None
        self.ended.set()

    def enter(self) -> bool:
        """Called just before the provider is asked to do the work; False once abandoned."""
        with self._lock:
            if not self.abandoned:
                self.entered = True
            return self.entered

    def abandon(self) -> bool:
        """The caller gave up on this attempt; True when it had called the provider."""
        with self._lock:
            self.abandoned = True
            return self.entered


class InFlight:
    """The attempts of one call. ``status(handle)`` returns the state (running, success,
    error) of a recorded operation; None when the provider cannot say."""

    def __init__(self, status: Callable[[str], str | None] | None = None):
        self.status = status
        self.attempts: list[Attempt] = []
        self.waiting_for: str | None = None  # what settle() is waiting for, while it waits

    def start(self, number: int) -> Attempt:
        attempt = Attempt(number)
        self.attempts.append(attempt)
        return attempt

    def settle(self, current: Attempt, sleep: Callable[[float], None] = time.sleep) -> None:
        """Wait, in ``current``'s thread, until the work of every earlier attempt that called
        the provider has ended: its thread (abandoned ones go on), and the operations it
        recorded (one that failed, such as a backend's own wait running out, may have left its
        task running). Returns early only when ``current`` is abandoned itself."""
        pending = [a for a in self.attempts if a is not current and a.entered]
        finished: set[str] = set()
        delay = FIRST_POLL
        while not current.abandoned:
            running = [a for a in pending if not a.ended.is_set()]
            open_handles = [h for a in pending for h in a.handles if h not in finished]
            for handle in open_handles:
                if self._finished(handle):
                    finished.add(handle)
            open_handles = [h for h in open_handles if h not in finished]
            if not running and not open_handles:
                self.waiting_for = None
                return
            self.waiting_for = self._describe(running, open_handles)
            sleep(delay)
            delay = min(MAX_POLL, delay * 2)

    def _finished(self, handle: str) -> bool:
        if self.status is None:
            return True
        try:
            state = self.status(handle)
        except (NotFound, NotSupported):  # forgotten by the provider, or it cannot say
            return True
        return state is None or state in FINISHED

    @staticmethod
    def _describe(running: list[Attempt], handles: list[str]) -> str:
        parts = []
        if running:
            parts.append("attempt %s still waiting for the provider's answer" % " and ".join(
                str(a.number) for a in running))
        if handles:
            parts.append("operation %s still running on the provider" % ", ".join(handles))
        return "; ".join(parts)

    def timeout_error(self, name: str, seconds: float, cause: VirtError) -> Timeout:
        """The Timeout of a retry whose time ran out while earlier work was still going on."""
        return Timeout("%s: the work of an abandoned attempt is still going on (%s), so it was "
                       "not started again; it did not end within this attempt's %gs"
                       % (name, self.waiting_for, seconds), cause=cause,
                       details=dict(cause.details or {}, in_progress=True))
