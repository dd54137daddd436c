"""SQLite state store: one file shared by every process on this machine.

Each process keeps one connection per database file (a forked child opens its own: SQLite
connections must not cross ``fork``). The database runs in WAL mode with
``synchronous=NORMAL``: a killed process loses nothing it committed, a power cut may lose the
last commits, and neither leaves the file inconsistent. :meth:`SQLiteStore.update` runs inside
``BEGIN IMMEDIATE``, so concurrent writers queue instead of failing; each operation waits for
the lock at most its time limit (SQLite's busy timeout is set to it before every operation),
then fails as Unavailable. A file that is not a database or is damaged fails the same way, with
the fix in the message. The file and its ``-wal``/``-shm`` companions are created mode 0600,
missing directories 0700. Values are JSON text; the ``meta`` table holds ``schema_version`` so
the layout can evolve.
"""
from __future__ import annotations

import json
import os
import stat
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, StoreUnavailable
from ansible_collections.resilient.virt.plugins.module_utils._state.store import (
    DEFAULT_TIMEOUT, Change, Record, StateStore, check_namespace)

if TYPE_CHECKING:  # sqlite3 is imported on first use
    import sqlite3

__all__ = ("SQLiteStore", "SCHEMA_VERSION")

SCHEMA_VERSION = 1
_DAMAGED = ("malformed", "not a database", "encrypted", "corrupt")
_LOCKED = ("locked", "busy")
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS records (namespace TEXT NOT NULL, key TEXT NOT NULL, "
    "value TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (namespace, key)) WITHOUT ROWID",
)
_VERSION = "SELECT value FROM meta WHERE name = 'schema_version'"
_GET = "SELECT value FROM records WHERE namespace = ? AND key = ?"
_ITEMS = ("SELECT key, value FROM records WHERE namespace = ? AND substr(key, 1, ?) = ? "
          "ORDER BY key")
_PUT = "INSERT OR REPLACE INTO records (namespace, key, value, updated_at) VALUES (?, ?, ?, ?)"
_DELETE = "DELETE FROM records WHERE namespace = ? AND key = ?"

_CONNECTIONS: dict[str, _Connection] = {}  # path -> _Connection of this process
_INHERITED: list[_Connection] = []  # connections inherited through fork: kept alive, never touched again


def _dumps(record: Record) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _private_file(path: str) -> None:
    """Create ``path`` if missing with mode 0600, and tighten it to 0600 if it is ours."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        st = os.fstat(fd)
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _private_dir(path: str) -> None:
    """Create ``path`` and any missing parent with mode 0700 (existing ones are left alone)."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for name in reversed(missing):
        try:
            os.mkdir(name, 0o700)
        except FileExistsError:  # another process was faster
            continue
        os.chmod(name, 0o700)


def _open_directory(path: str) -> list[str]:
    """[a warning] when ``path``, the store's directory, is writable by other users without the
    sticky bit (mode 0777, 0775): they could replace the store and so its breakers and records.
    A directory that existed is left as it is (it may be shared); the warning says the fix."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return []
    if not mode & 0o022 or mode & stat.S_ISVTX:
        return []
    return ["the state store's directory %s has mode %04o: other users can replace the store "
            "file and so its circuit breakers and records; run chmod 700 %s (or go-w), or point "
            "state_store at a file in a private directory" % (path, stat.S_IMODE(mode), path)]


class _Connection:
    __slots__ = ("pid", "db", "lock")

    def __init__(self, db: sqlite3.Connection):
        self.pid = os.getpid()
        self.db = db
        self.lock = threading.Lock()


def _until_unlocked(statement: Callable[[], Any], timeout: float) -> Any:
    """``statement()``, tried again while SQLite says locked, for at most ``timeout`` seconds.

    Switching a new file to WAL needs the file to itself, and SQLite refuses at once (its busy
    timeout does not apply) while another process opens the same new file: several forks that
    meet a new store at the same time would fail without this wait.
    """
    import sqlite3

    end = time.monotonic() + timeout
    pause = 0.002
    while True:
        try:
            return statement()
        except sqlite3.OperationalError as exc:
            if not any(word in str(exc) for word in _LOCKED) or time.monotonic() + pause > end:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _connect(path: str, timeout: float) -> sqlite3.Connection:
    import sqlite3

    _private_dir(os.path.dirname(path))
    for name in (path, path + "-wal", path + "-shm"):
        _private_file(name)
    db = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            _until_unlocked(lambda: db.execute("PRAGMA journal_mode = WAL").fetchone(), timeout)
        db.execute("PRAGMA synchronous = NORMAL")
        try:
            row = db.execute(_VERSION).fetchone()
        except sqlite3.OperationalError as exc:  # no meta table yet
            if any(word in str(exc) for word in _LOCKED):
                raise
            row = None
        if row is None:
            db.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA:
                db.execute(statement)
            row = db.execute(_VERSION).fetchone()
            if row is None:
                row = (str(SCHEMA_VERSION),)
                db.execute("INSERT INTO meta (name, value) VALUES ('schema_version', ?)", row)
            db.execute("COMMIT")
        if int(row[0]) > SCHEMA_VERSION:
            raise InvalidSpec(
                "state_store sqlite://%s has schema version %s but this collection knows only "
                "up to %d: upgrade the collection or point state_store at another file"
                % (path, row[0], SCHEMA_VERSION))
    except BaseException:
        db.close()
        raise
    return db


class SQLiteStore(StateStore):
    """State store in the SQLite file ``path`` (absolute); ``timeout`` bounds each operation."""

    def __init__(self, path: str, timeout: float = DEFAULT_TIMEOUT):
        self.path = path
        self.url = "sqlite://" + path
        self.timeout = float(timeout)
        self._run(lambda db: None)  # fail now, with a clear message, if the file cannot be used
        self.warnings = _open_directory(os.path.dirname(path))

    def _conn(self, limit: float) -> _Connection:
        conn = _CONNECTIONS.get(self.path)
        if conn is not None and conn.pid == os.getpid():
            return conn
        if conn is not None:
            _INHERITED.append(conn)
        import sqlite3
        try:
            conn = _Connection(_connect(self.path, limit))
        except OSError as exc:
            raise InvalidSpec(
                "state_store %s: cannot use the SQLite database (%s: %s); point state_store or "
                "RESILIENT_VIRT_STATE_STORE at a writable file" % (self.url, type(exc).__name__, exc),
                cause=exc) from exc
        except sqlite3.Error as exc:
            raise self._failure(exc, limit) from exc
        _CONNECTIONS[self.path] = conn
        self.closed = False
        return conn

    def _failure(self, exc: BaseException, limit: float) -> StoreUnavailable:
        """The StoreUnavailable for a SQLite error, with what to do about it."""
        text = str(exc)
        if any(word in text for word in _LOCKED):
            message = ("stayed locked for %gs: another process holds it (%s); try again when it "
                       "is done, or raise resilience.store_timeout" % (limit, text))
        elif any(word in text for word in _DAMAGED):
            message = ("is damaged (%s): move the file aside (mv %s %s.damaged) so that a new one "
                       "is created, or point state_store at another file; the breakers and "
                       "reservations it held start afresh" % (text, self.path, self.path))
        else:
            message = ("cannot be used (%s: %s); point state_store or RESILIENT_VIRT_STATE_STORE "
                       "at a writable file" % (type(exc).__name__, text))
        return self.fail(message, exc)

    def _run(self, work: Callable[[sqlite3.Connection], Any], timeout: float | None = None) -> Any:
        """``work(db)`` on this process's connection, every wait bounded by the time limit."""
        import sqlite3

        self.check()
        limit = self.limit(timeout)
        started = time.monotonic()
        conn = self._conn(limit)
        left = max(0.0, limit - (time.monotonic() - started))
        if not conn.lock.acquire(timeout=left):
            raise self.fail("stayed busy for %gs inside this process" % limit)
        try:
            db = conn.db
            db.execute("PRAGMA busy_timeout = %d" % max(1, int(left * 1000)))
            return work(db)
        except sqlite3.Error as exc:
            raise self._failure(exc, limit) from exc
        finally:
            conn.lock.release()

    def get(self, namespace: str, key: str, timeout: float | None = None) -> Record | None:
        check_namespace(namespace)
        row = self._run(lambda db: db.execute(_GET, (namespace, key)).fetchone(), timeout)
        return json.loads(row[0]) if row else None

    def items(self, namespace: str, prefix: str = "", timeout: float | None = None) -> dict[str, Record]:
        check_namespace(namespace)
        rows = self._run(lambda db: db.execute(_ITEMS, (namespace, len(prefix), prefix)).fetchall(),
                         timeout)
        return {key: json.loads(value) for key, value in rows}

    def update(self, namespace: str, key: str, fn: Change, timeout: float | None = None) -> Any:
        check_namespace(namespace)

        def work(db: sqlite3.Connection) -> Any:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(_GET, (namespace, key)).fetchone()
                now = time.time()
                new, result = fn(json.loads(row[0]) if row else None, now)
                if new is None:
                    if row is not None:
                        db.execute(_DELETE, (namespace, key))
                else:
                    text = _dumps(new)
                    if row is None or text != row[0]:
                        db.execute(_PUT, (namespace, key, text, now))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            return result

        return self._run(work, timeout)

    def delete(self, namespace: str, key: str, timeout: float | None = None) -> None:
        check_namespace(namespace)
        self._run(lambda db: db.execute(_DELETE, (namespace, key)), timeout)

    def now(self) -> float:
        return time.time()

    def close(self) -> None:
        """Close this process's connection to the file; a later call reopens it."""
        conn = _CONNECTIONS.get(self.path)
        if conn is not None and conn.pid == os.getpid():
            del _CONNECTIONS[self.path]
            with conn.lock:
                conn.db.close()
        self.closed = True
