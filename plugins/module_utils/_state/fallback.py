"""The store-outage policy: what a task's circuit breakers and rate limits use when the state
store is unreachable.

``store_failure: open`` (the default) wraps the store given to the resilience policy in a
:class:`FallbackStore`: while the shared store answers, every operation goes to it; the first
operation that fails with StoreUnavailable (unreachable, frozen past ``store_timeout``, locked,
damaged) switches the task to a ``memory.MemoryStore`` of its own for the rest of the task, and
``on_fallback(error)`` is called once (the module turns it into a warning). Other tasks and
controllers do not see what the task records there. ``store_failure: closed`` uses the shared
store as it is: its failure fails the call with Unavailable naming the store.

Only breakers and rate limits fall back: records whose whole point is to be shared and kept
(failover reservations, backup records, fleet status, breakers set by the circuit_breaker
module) are read and written through the shared store alone.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.resilient.virt.plugins.module_utils.errors import StoreUnavailable
from ansible_collections.resilient.virt.plugins.module_utils._state.store import Change, Record, StateStore

if TYPE_CHECKING:  # memory.py is imported only when a store fails
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import ResilienceSettings
    from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore

__all__ = ("FallbackStore", "policy_store")


class FallbackStore(StateStore):
    """The shared store that ``open_shared()`` opens, until it fails with StoreUnavailable (when
    opened or used); then a MemoryStore for good."""

    falls_back = True  # the resilience policy gives it a share of a call's deadline only

    def __init__(self, open_shared: Callable[[], StateStore], on_fallback: Callable[[StoreUnavailable], None],
                 timeout: float):
        self._open_shared = open_shared
        self._shared: StateStore | None = None
        self.timeout = timeout
        self._on_fallback = on_fallback
        self._memory: MemoryStore | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:  # type: ignore[override]  # the shared store's; never set here
        return self._shared.describe() if self._shared is not None else "(not opened yet)"

    @property
    def fell_back(self) -> bool:
        """True once the task's breakers and rate limits live in its memory."""
        return self._memory is not None

    def _run(self, operation: Callable[[StateStore], Any]) -> Any:
        memory = self._memory
        if memory is None:
            try:
                if self._shared is None:
                    self._shared = self._open_shared()
                return operation(self._shared)
            except StoreUnavailable as err:
                memory = self._fall_back(err)
        return operation(memory)

    def _fall_back(self, err: StoreUnavailable) -> MemoryStore:
        # imported here: only a failed store needs it (3.3 ms in a module process, by
        # python3 -X importtime; tests/unit/modules/test_describe_imports.py)
        from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore

        with self._lock:
            memory = self._memory
            first = memory is None
            if memory is None:
                memory = self._memory = MemoryStore("memory of this task")
        if first:
            self._on_fallback(err)
        return memory

    def get(self, namespace: str, key: str, timeout: float | None = None) -> Record | None:
        return self._run(lambda store: store.get(namespace, key, timeout=timeout))

    def items(self, namespace: str, prefix: str = "", timeout: float | None = None) -> dict[str, Record]:
        return self._run(lambda store: store.items(namespace, prefix, timeout=timeout))

    def update(self, namespace: str, key: str, fn: Change, timeout: float | None = None) -> Any:
        return self._run(lambda store: store.update(namespace, key, fn, timeout=timeout))

    def delete(self, namespace: str, key: str, timeout: float | None = None) -> None:
        return self._run(lambda store: store.delete(namespace, key, timeout=timeout))

    def now(self) -> float:
        return self._run(lambda store: store.now())

    def close(self) -> None:
        self.closed = True  # the shared store belongs to whoever opened it


def policy_store(open_shared: Callable[[], StateStore], settings: ResilienceSettings,
                 warn: Callable[[str], None]) -> StateStore:
    """The store the resilience policy of a task uses under ``settings.store_failure``:
    ``open_shared()`` opens the shared store; ``warn(message)`` is told once when an open policy
    falls back to memory."""
    if settings.store_failure != "open":
        return open_shared()

    def on_fallback(err: StoreUnavailable) -> None:
        warn("%s; this task keeps its circuit breakers and rate limits in its own memory "
             "(store_failure=open), unseen by other tasks and controllers. Fix the store, or set "
             "store_failure: closed (RESILIENT_VIRT_STORE_FAILURE=closed) to fail instead"
             % err.message)

    return FallbackStore(open_shared, on_fallback, settings.store_timeout)
