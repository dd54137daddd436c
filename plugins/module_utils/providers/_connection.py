# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one connection (or session) of a provider object, shared by its calls.

It is opened on first use. A call abandoned at its time limit drops it without closing it
(closing would wait on the endpoint that hangs, and the abandoned call goes on with it) and
moves ``generation`` on, so that a connection opened meanwhile by the abandoned call stays that
call's own. Closing never waits longer than its time limit.
"""
import threading

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import run_with_timeout

__all__ = ("SharedConnection", "SharedConnectionMixin")


class SharedConnection:
    """``open_fn()`` makes the connection; ``close_fn(conn)`` ends it politely; ``forget_fn(conn)``
    (optional) makes sure an abandoned one is never used or closed by its library either."""

    def __init__(self, open_fn, close_fn, close_timeout, what, forget_fn=None):
        self._open = open_fn
        self._close = close_fn
        self._forget = forget_fn
        self._close_timeout = close_timeout
        self._what = what
        self._conn = None
        self.generation = 0
        self._lock = threading.Lock()

    @property
    def current(self):
        """The shared connection, or None when none is open."""
        return self._conn

    def get(self):
        """The shared connection, opened on first use."""
        with self._lock:
            conn, generation = self._conn, self.generation
        if conn is not None:
            return conn
        conn = self._open()
        with self._lock:
            if generation == self.generation and self._conn is None:
                self._conn = conn
        return conn

    def abandon(self):
        """A call is stuck: forget the connection without closing it."""
        with self._lock:
            conn, self._conn = self._conn, None
            self.generation += 1
        if conn is not None and self._forget is not None:
            self._forget(conn)

    def close(self):
        """Close the connection, giving up after the time limit (best effort: the task ends)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            run_with_timeout(lambda: self._close(conn), self._close_timeout, self._what)
        except Exception:  # noqa: BLE001 - closing must never turn a result into a failure
            pass


class SharedConnectionMixin:
    """The Provider methods of a backend that keeps its :class:`SharedConnection` in ``_shared``."""

    _shared: SharedConnection

    def _connection(self):
        return self._shared.get()

    def abandon(self):
        self._shared.abandon()

    def close(self):
        self._shared.close()
