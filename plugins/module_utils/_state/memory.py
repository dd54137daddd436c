"""A state store in this process's memory: where a task keeps its breakers and rate limits once
the shared store fails under ``store_failure: open`` (``fallback.py`` imports it only then)."""
from __future__ import annotations

import json
import threading
import time
from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils._state.store import (
    Change, Record, StateStore, check_namespace)

__all__ = ("MemoryStore",)


def _copy(record: Any) -> Any:
    return None if record is None else json.loads(json.dumps(record))


class MemoryStore(StateStore):
    """Records in this process's memory, with the same semantics as a shared store."""

    def __init__(self, describe: str = "memory of this task"):
        self.url = describe
        self._records: dict[tuple[str, str], Record] = {}
        self._lock = threading.Lock()

    def get(self, namespace: str, key: str, timeout: float | None = None) -> Record | None:
        check_namespace(namespace)
        with self._lock:
            return _copy(self._records.get((namespace, key)))

    def items(self, namespace: str, prefix: str = "", timeout: float | None = None) -> dict[str, Record]:
        check_namespace(namespace)
        with self._lock:
            return dict((key, _copy(value)) for (space, key), value in sorted(self._records.items())
                        if space == namespace and key.startswith(prefix))

    def update(self, namespace: str, key: str, fn: Change, timeout: float | None = None) -> Any:
        check_namespace(namespace)
        with self._lock:
            new, result = fn(_copy(self._records.get((namespace, key))), self.now())
            if new is None:
                self._records.pop((namespace, key), None)
            else:
                self._records[(namespace, key)] = _copy(new)
            return result

    def delete(self, namespace: str, key: str, timeout: float | None = None) -> None:
        check_namespace(namespace)
        with self._lock:
            self._records.pop((namespace, key), None)

    def now(self) -> float:
        return time.time()

    def close(self) -> None:
        self.closed = True
