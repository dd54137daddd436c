"""SQLite state store: one file shared by every process on this machine.

Each process keeps one connection per database file (a forked child opens its own: SQLite
connections must not cross ``fork``). The database runs in WAL mode with
``synchronous=NORMAL``: a killed process loses nothing it committed, a power cut may lose the
last commits, and neither leaves the file inconsistent. :meth:`SQLiteStore.update` runs inside
``BEGIN IMMEDIATE``, so concurrent writers queue (up to ``BUSY_TIMEOUT`` seconds, then
Unavailable) instead of failing. The file and its ``-wal``/``-shm`` companions are created mode
0600, missing directories 0700. Values are JSON text; the ``meta`` table holds
``schema_version`` so the layout can evolve.
"""
import json
import os
import threading
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, Unavailable)
from ansible_collections.resilient.virt.plugins.module_utils.state_store import (
    StateStore, check_namespace)

__all__ = ("SQLiteStore", "SCHEMA_VERSION")

SCHEMA_VERSION = 1
BUSY_TIMEOUT = 15.0
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

_CONNECTIONS = {}  # path -> _Connection of this process
_INHERITED = []  # connections inherited through fork: kept alive, never touched again


def _dumps(record):
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _private_file(path):
    """Create ``path`` if missing with mode 0600, and tighten it to 0600 if it is ours."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        st = os.fstat(fd)
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def _private_dir(path):
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


class _Connection:
    __slots__ = ("pid", "db", "lock")

    def __init__(self, db):
        self.pid = os.getpid()
        self.db = db
        self.lock = threading.Lock()


def _connect(path):
    import sqlite3

    _private_dir(os.path.dirname(path))
    for name in (path, path + "-wal", path + "-shm"):
        _private_file(name)
    db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None,
                         check_same_thread=False)
    try:
        db.execute("PRAGMA busy_timeout = %d" % int(BUSY_TIMEOUT * 1000))
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        try:
            row = db.execute(_VERSION).fetchone()
        except sqlite3.OperationalError:  # no meta table yet
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
    """State store in the SQLite file ``path`` (absolute)."""

    def __init__(self, path):
        self.path = path
        self.url = "sqlite://" + path
        self._conn()  # fail now, with a clear message, if the file cannot be used

    def _conn(self):
        conn = _CONNECTIONS.get(self.path)
        if conn is not None and conn.pid == os.getpid():
            return conn
        if conn is not None:
            _INHERITED.append(conn)
        import sqlite3
        try:
            conn = _Connection(_connect(self.path))
        except (OSError, sqlite3.Error) as exc:
            raise InvalidSpec(
                "state_store %s: cannot use the SQLite database (%s: %s); point state_store or "
                "RESILIENT_VIRT_STATE_STORE at a writable file" % (self.url, type(exc).__name__, exc),
                cause=exc)
        _CONNECTIONS[self.path] = conn
        self.closed = False
        return conn

    def get(self, namespace, key):
        check_namespace(namespace)
        conn = self._conn()
        with conn.lock:
            row = conn.db.execute(_GET, (namespace, key)).fetchone()
        return json.loads(row[0]) if row else None

    def items(self, namespace, prefix=""):
        check_namespace(namespace)
        conn = self._conn()
        with conn.lock:
            rows = conn.db.execute(_ITEMS, (namespace, len(prefix), prefix)).fetchall()
        return {key: json.loads(value) for key, value in rows}

    def update(self, namespace, key, fn):
        import sqlite3

        check_namespace(namespace)
        conn = self._conn()
        db = conn.db
        with conn.lock:
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:  # still locked after the busy timeout
                raise Unavailable("state store %s stayed busy for %g s (%s); another process "
                                  "holds it" % (self.url, BUSY_TIMEOUT, exc), cause=exc)
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

    def delete(self, namespace, key):
        check_namespace(namespace)
        conn = self._conn()
        with conn.lock:
            conn.db.execute(_DELETE, (namespace, key))

    def now(self):
        return time.time()

    def close(self):
        """Close this process's connection to the file; a later call reopens it."""
        conn = _CONNECTIONS.get(self.path)
        if conn is not None and conn.pid == os.getpid():
            del _CONNECTIONS[self.path]
            with conn.lock:
                conn.db.close()
        self.closed = True
