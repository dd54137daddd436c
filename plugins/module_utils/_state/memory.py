"""A state store in this process's memory: where a task keeps its breakers and rate limits once
the shared store fails under ``store_failure: open`` (``fallback.py`` imports it only then)."""
import json
import threading
import time

from ansible_collections.resilient.virt.plugins.module_utils._state.store import (
    StateStore, check_namespace)

__all__ = ("MemoryStore",)


def _copy(record):
    return None if record is None else json.loads(json.dumps(record))


class MemoryStore(StateStore):
    """Records in this process's memory, with the same semantics as a shared store."""

    def __init__(self, describe="memory of this task"):
        self.url = describe
        self._records = {}
        self._lock = threading.Lock()

    def get(self, namespace, key, timeout=None):
        check_namespace(namespace)
        with self._lock:
            return _copy(self._records.get((namespace, key)))

    def items(self, namespace, prefix="", timeout=None):
        check_namespace(namespace)
        with self._lock:
            return dict((key, _copy(value)) for (space, key), value in sorted(self._records.items())
                        if space == namespace and key.startswith(prefix))

    def update(self, namespace, key, fn, timeout=None):
        check_namespace(namespace)
        with self._lock:
            new, result = fn(_copy(self._records.get((namespace, key))), self.now())
            if new is None:
                self._records.pop((namespace, key), None)
            else:
                self._records[(namespace, key)] = _copy(new)
            return result

    def delete(self, namespace, key, timeout=None):
        check_namespace(namespace)
        with self._lock:
            self._records.pop((namespace, key), None)

    def now(self):
        return time.time()

    def close(self):
        self.closed = True
