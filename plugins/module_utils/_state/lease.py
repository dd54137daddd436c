"""A lease in the state store: which one of several processes may act, for a bounded time.

The record ``leases/<name>`` holds ``owner``, ``until`` (epoch on the store's clock), ``since``
(when this owner took it) and ``term`` (raised at each change of owner). :meth:`Lease.hold`
takes the lease when nobody holds it or its holder let it run out, and renews it when we hold
it: one ``store.update``, so two processes never both get it. A holder that dies stops renewing,
and another takes over once ``until`` has passed. :attr:`Lease.term` is the term of our last
hold: a holder tells a lease it took anew (it may have to redo what the one before it left) from
one it renewed.

:meth:`Lease.hold` also returns how long we may act on it, on this process's own clock: the
lease's duration counted from before the update was sent, less :data:`MARGIN` of it, so that a
slow store answer or clocks that drift apart never let two holders act at the same time.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from ansible_collections.resilient.virt.plugins.module_utils._state.store import Record, StateStore

__all__ = ("Lease", "NAMESPACE", "MARGIN")

NAMESPACE = "leases"
MARGIN = 0.2  # of the duration: acted on for 80 % of it at most


class Lease:
    """The lease ``name`` in ``store``, taken as ``owner`` for ``duration`` seconds at a time."""

    def __init__(self, store: StateStore, name: str, owner: str, duration: float,
                 clock: Callable[[], float] = time.monotonic):
        if duration <= 0:
            raise ValueError("a lease lasts more than 0 seconds, got %r" % (duration,))
        self.store = store
        self.name = name
        self.owner = owner
        self.duration = float(duration)
        self.clock = clock
        self._valid_until = 0.0  # on self.clock
        self.term = None  # the lease's term at our last hold, None before the first

    def hold(self) -> bool:
        """Take or renew the lease; True when we hold it now. A store failure raises."""
        sent = self.clock()

        def take(current: Record | None, now: float) -> tuple[Record | None, int | bool]:
            ours = current is not None and current.get("owner") == self.owner
            free = current is None or ours or float(current.get("until") or 0) <= now
            if not free:
                return current, False
            term = int((current or {}).get("term") or 0) + (0 if ours else 1)
            record = {"owner": self.owner, "until": now + self.duration,
                      "since": current["since"] if current is not None and ours else now,
                      "term": term}
            return record, term

        term = self.store.update(NAMESPACE, self.name, take)
        held = term is not False
        if held:
            self.term = term
        self._valid_until = sent + self.duration * (1 - MARGIN) if held else 0.0
        return held

    def valid(self) -> bool:
        """True while the last :meth:`hold` that took the lease lets us act."""
        return self.clock() < self._valid_until

    def release(self) -> None:
        """Give the lease up at once when we hold it, so that another takes it without waiting."""
        self._valid_until = 0.0

        def expire(current: Record | None, now: float) -> tuple[Record | None, None]:
            if current is not None and current.get("owner") == self.owner:
                return dict(current, until=now), None  # kept: the next holder's term follows
            return current, None

        self.store.update(NAMESPACE, self.name, expire)

    def holder(self) -> Record | None:
        """The lease's record when someone holds it now, else None."""
        current: Any = self.store.get(NAMESPACE, self.name)
        if current is None or float(current.get("until") or 0) <= self.store.now():
            return None
        return current
