# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Provider connections shared by the worker threads of a fleet run.

Each provider gets at most ``per_provider`` connections (GuardedProviders, each used by one
thread at a time), opened when first needed; a thread that wants a provider whose connections are
all busy waits for one. Every call still goes through the provider's policy (breaker, rate limit,
retries, timeouts), which the connections of one provider share through the state store.
"""
import threading
from contextlib import contextmanager

__all__ = ("ProviderPool",)


class ProviderPool:
    """``open_provider(config)`` opens a GuardedProvider; ``configs`` maps provider key to its
    dict (more may be added). Use ``with pool.provider(key) as provider:``."""

    def __init__(self, open_provider, configs, per_provider):
        self._open = open_provider
        self.configs = configs
        self._per_provider = per_provider
        self._lock = threading.Lock()
        self._slots = {}
        self._idle = {}

    @contextmanager
    def provider(self, key):
        """A connection to the provider ``key``, this thread's until the ``with`` block ends."""
        provider = self._acquire(key)
        try:
            yield provider
        finally:
            self._release(key, provider)

    def _acquire(self, key):
        with self._lock:
            if key not in self._slots:
                self._slots[key] = threading.BoundedSemaphore(self._per_provider)
                self._idle[key] = []
        self._slots[key].acquire()
        with self._lock:
            if self._idle[key]:
                return self._idle[key].pop()
        try:
            return self._open(self.configs[key])
        except BaseException:
            self._slots[key].release()
            raise

    def _release(self, key, provider):
        with self._lock:
            self._idle[key].append(provider)
        self._slots[key].release()
