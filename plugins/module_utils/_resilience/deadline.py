"""Deadlines on the monotonic clock, and running a call that may never return.

A :class:`Deadline` bounds a whole operation (all attempts, all waits). :func:`run_with_timeout`
bounds one call: the call runs in a daemon thread that is abandoned when it does not answer in
time, which works even when a C library blocks forever without releasing control.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, overload

from ansible_collections.resilient.virt.plugins.module_utils.errors import Timeout

__all__ = ("Deadline", "run_with_timeout")


class Deadline:
    """A point in time on ``clock`` (monotonic by default); ``at`` None means unbounded."""

    __slots__ = ("at", "clock")

    def __init__(self, at: float | None = None, clock: Callable[[], float] = time.monotonic):
        self.at = at
        self.clock = clock

    @classmethod
    def after(cls, seconds: float | None, clock: Callable[[], float] = time.monotonic) -> Deadline:
        """Deadline ``seconds`` from now; None gives an unbounded deadline."""
        return cls(None if seconds is None else clock() + float(seconds), clock)

    def remaining(self) -> float | None:
        """Seconds left (never negative), or None when unbounded."""
        if self.at is None:
            return None
        return max(0.0, self.at - self.clock())

    def expired(self) -> bool:
        return self.at is not None and self.clock() >= self.at

    @overload
    def cap(self, seconds: float) -> float: ...

    @overload
    def cap(self, seconds: None) -> float | None: ...

    def cap(self, seconds: float | None) -> float | None:
        """``seconds`` shortened to the time left; None only when both are unbounded."""
        left = self.remaining()
        if seconds is None:
            return left
        return float(seconds) if left is None else min(float(seconds), left)

    def __repr__(self) -> str:
        return "Deadline(remaining=%r)" % (self.remaining(),)


def _fmt(seconds: float) -> str:
    return "%gs" % round(seconds, 3)


def run_with_timeout(fn: Callable[[], Any], seconds: float | None, what: str = "call") -> Any:
    """Return ``fn()``, or raise Timeout if it has not answered within ``seconds``.

    ``fn`` runs in a daemon thread; on timeout the thread is abandoned (it cannot be killed),
    so ``fn`` must not hold locks the caller needs afterwards. Exceptions from ``fn`` are
    re-raised unchanged. ``seconds`` None runs ``fn`` in the calling thread without a bound;
    ``seconds`` <= 0 raises Timeout without calling ``fn``.
    """
    if seconds is None:
        return fn()
    if seconds <= 0:
        raise Timeout("%s not started: no time left before the deadline" % what)
    done = threading.Event()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = fn()
        except BaseException as exc:  # handed to the caller, re-raised there unchanged
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=target, name="resilient-virt:%s" % what, daemon=True)
    worker.start()
    if not done.wait(seconds):
        raise Timeout("%s did not answer within %s" % (what, _fmt(seconds)),
                      details={"timeout": float(seconds)})
    if "error" in box:
        error = box.pop("error")
        try:
            raise error
        finally:
            del error
    return box["result"]
