"""Rate limit shared by every process through the state store (GCRA).

The generic cell rate algorithm keeps one number per key, the theoretical arrival time ``tat``.
A call at ``now`` is admitted when ``now >= tat - (burst - 1) / qps``, and ``tat`` moves on by
``1 / qps``. So ``burst`` calls may go at once after a quiet period, then one every ``1 / qps``
seconds; any window of ``T`` seconds admits at most ``qps * T + burst`` calls, whichever
processes make them. A caller that must wait reserves its turn in the same store update, then
sleeps until it comes.
"""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, RateLimit

if TYPE_CHECKING:
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import Deadline
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import Record, StateStore

__all__ = ("RateLimiter", "NAMESPACE")

NAMESPACE = "ratelimit"


def _stored_tat(current: Record | None, now: float) -> float:
    """The stored arrival time, or ``now`` when there is none or it is damaged (not a finite
    time, or more than a day ahead: no queue of callers reaches that far)."""
    tat = current.get("tat") if isinstance(current, dict) else None
    if isinstance(tat, bool) or not isinstance(tat, (int, float)) or not math.isfinite(tat) or \
            tat > now + 86400:
        return now
    return max(float(tat), now)


class RateLimiter:
    """At most ``qps`` calls per second for ``key``, ``burst`` at once; ``qps`` <= 0: unlimited.

    ``burst`` None means ``max(1, int(qps))``, i.e. one second worth of calls.
    """

    def __init__(self, store: StateStore, key: str, qps: float | None, burst: int | None = None):
        self.store = store
        self.key = key
        self.qps = float(qps or 0)
        if burst is None:
            burst = max(1, int(self.qps))
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise InvalidSpec("rate limit burst must be an integer >= 1, got %r" % (burst,))
        self.burst = burst

    def acquire(self, deadline: Deadline | None = None, store_time: float | None = None) -> float:
        """Wait for this process's turn; return the seconds waited.

        Raises RateLimit (``retry_after`` = the wait) without using a turn when the wait would
        end after ``deadline`` (a deadline.Deadline, or None for no limit); the store update
        itself gets at most what is left of ``deadline``, or ``store_time`` seconds when given.
        """
        if self.qps <= 0:
            return 0.0
        interval = 1.0 / self.qps
        tolerance = (self.burst - 1) * interval
        config = {"qps": self.qps, "burst": self.burst}

        def take(current: Record | None, now: float) -> tuple[Record | None, tuple[bool, float, float | None]]:
            tat = _stored_tat(current, now)
            wait = max(0.0, tat - tolerance - now)
            left = None if deadline is None else deadline.remaining()
            if left is not None and wait > left:
                return current, (False, wait, left)
            new = {"tat": tat + interval}
            new.update(config)
            return new, (True, wait, left)

        admitted, wait, left = self.store.update(
            NAMESPACE, self.key, take, timeout=store_time if store_time is not None else
            None if deadline is None else deadline.remaining())
        if not admitted:
            raise RateLimit("rate limit %r (%g calls/s, burst %d) would delay this call %.2f s, "
                            "past its deadline (%.2f s left)"
                            % (self.key, self.qps, self.burst, wait, left), retry_after=wait)
        if wait > 0:
            time.sleep(wait)
        return wait
