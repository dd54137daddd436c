"""StateStore behaviour on every store (SQLite, Redis, Sentinel, Cluster), open_store URLs, and
SQLite files, modes and crashes. Writers killed mid-write: tests/integration/stores/."""
import json
import os
import sqlite3
import stat
import subprocess
import sys
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, StoreUnavailable, Unavailable)
from ansible_collections.resilient.virt.plugins.module_utils._state.sqlite import (
    SCHEMA_VERSION, SQLiteStore)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import (
    ENV_VAR, open_store)


def _incr(field="n"):
    def fn(current, now):
        value = (current or {}).get(field, 0) + 1
        return dict(current or {}, **{field: value}), value
    return fn


# --- interface, on every store -----------------------------------------------------------

def test_update_creates_returns_result_and_get_reads(store):
    assert store.get("t", "a") is None
    assert store.update("t", "a", _incr()) == 1
    assert store.update("t", "a", _incr()) == 2
    assert store.get("t", "a") == {"n": 2}


def test_update_gets_current_and_store_clock(store):
    seen = []

    def fn(current, now):
        seen.append((current, now))
        return {"at": now}, "r"

    before = time.time()
    assert store.update("t", "k", fn) == "r"
    store.update("t", "k", fn)
    assert seen[0][0] is None
    assert seen[1][0] == {"at": seen[0][1]}
    assert abs(seen[0][1] - before) < 5
    assert abs(store.now() - time.time()) < 5


def test_update_returning_none_deletes(store):
    store.update("t", "a", _incr())
    assert store.update("t", "a", lambda cur, now: (None, cur)) == {"n": 1}
    assert store.get("t", "a") is None
    assert store.items("t") == {}
    assert store.update("t", "a", lambda cur, now: (None, "nothing")) == "nothing"


def test_failing_fn_leaves_record_unchanged(store):
    store.update("t", "a", _incr())

    def boom(current, now):
        current["n"] = 99
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        store.update("t", "a", boom)
    assert store.get("t", "a") == {"n": 1}
    with pytest.raises(ValueError):
        store.update("t", "a", lambda cur, now: ({"n": float("nan")}, None))
    assert store.get("t", "a") == {"n": 1}


def test_items_by_namespace_and_prefix_and_delete(store):
    for ns, key in (("t", "lab:1"), ("t", "lab:2"), ("t", "other"), ("u", "lab:3")):
        store.update(ns, key, lambda cur, now, key=key: ({"key": key}, None))
    assert sorted(store.items("t")) == ["lab:1", "lab:2", "other"]
    assert store.items("t", prefix="lab:") == {"lab:1": {"key": "lab:1"}, "lab:2": {"key": "lab:2"}}
    assert store.items("t", prefix="nope") == {}
    store.delete("t", "lab:1")
    store.delete("t", "missing")
    assert sorted(store.items("t")) == ["lab:2", "other"]
    assert store.items("u") == {"lab:3": {"key": "lab:3"}}


def test_values_round_trip_as_json(store):
    value = {"s": "é ünïcode ✓", "l": [1, 2.5, None, True], "d": {"x": {"y": []}},
             "i": 2 ** 40}
    store.update("t", "ключ", lambda cur, now: (value, None))
    assert store.get("t", "ключ") == value
    assert store.items("t") == {"ключ": value}


def test_namespace_must_be_an_identifier(store):
    for bad in ("", "a:b", "a b", None):
        with pytest.raises(ValueError, match="namespace"):
            store.get(bad, "k")


# --- open_store -------------------------------------------------------------------------------

def test_open_store_caches_per_url_and_reopens_after_close(sqlite_url):
    first = open_store(sqlite_url)
    assert open_store(sqlite_url) is first
    first.close()
    second = open_store(sqlite_url)
    assert second is not first
    assert second.update("t", "a", _incr()) == 1
    second.close()


def test_open_store_uses_environment_then_default(tmp_path, monkeypatch):
    url = "sqlite://%s" % (tmp_path / "env.db")
    store = open_store(environ={ENV_VAR: url})
    assert store.url == url
    store.close()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = open_store(environ={})
    path = tmp_path / "home" / ".ansible" / "resilient_virt" / "state.db"
    assert store.url == "sqlite://%s" % path
    assert path.exists()
    for directory in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    store.close()


def test_tilde_path_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    store = open_store("sqlite://~/s/x.db")
    assert store.url == "sqlite://%s" % (tmp_path / "s" / "x.db")
    store.close()


@pytest.mark.parametrize("url, needle", [
    ("mysql://user:pw@host/db", "accepted forms"),
    ("/var/lib/state.db", "accepted forms"),
    ("sqlite://relative/state.db", "must be absolute"),
    ("sqlite://", "must be absolute"),
])
def test_bad_urls_name_state_store_and_the_fix(url, needle):
    with pytest.raises(InvalidSpec) as info:
        open_store(url)
    assert "state_store" in str(info.value)
    assert needle in str(info.value)
    assert "pw" not in str(info.value)


def test_unusable_sqlite_path_is_a_clear_error(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InvalidSpec, match="state_store .*writable file"):
        open_store("sqlite://%s" % (tmp_path / "afile" / "state.db"))


def test_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(Unavailable, match=r"is damaged .*move the file aside \(mv %s" % path):
        SQLiteStore(str(path))


# --- SQLite specifics ---------------------------------------------------------------------

def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_sqlite_files_are_private_whatever_the_umask(tmp_path):
    path = str(tmp_path / "a" / "b" / "state.db")
    old = os.umask(0)
    try:
        store = SQLiteStore(path)
        store.update("t", "a", _incr())
        assert os.path.exists(path + "-wal") and os.path.exists(path + "-shm")
        for name in (path, path + "-wal", path + "-shm"):
            assert _mode(name) == 0o600, name
        assert _mode(tmp_path / "a") == 0o700
        assert _mode(tmp_path / "a" / "b") == 0o700
    finally:
        os.umask(old)
        store.close()


def test_existing_loose_sqlite_file_is_tightened(tmp_path):
    path = tmp_path / "state.db"
    sqlite3.connect(str(path)).close()
    os.chmod(path, 0o644)
    store = SQLiteStore(str(path))
    store.update("t", "a", _incr())
    assert _mode(path) == 0o600
    assert _mode(str(path) + "-wal") == 0o600
    store.close()


def test_sqlite_runs_in_wal_with_versioned_schema(tmp_path):
    path = str(tmp_path / "state.db")
    store = SQLiteStore(path)
    store.update("t", "a", _incr())
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone() == (
        str(SCHEMA_VERSION),)
    assert json.loads(db.execute("SELECT value FROM records").fetchone()[0]) == {"n": 1}
    db.close()
    store.close()


def test_newer_schema_is_refused(tmp_path):
    path = str(tmp_path / "state.db")
    SQLiteStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (SCHEMA_VERSION + 1,))
    db.commit()
    db.close()
    with pytest.raises(InvalidSpec, match="schema version %d" % (SCHEMA_VERSION + 1)):
        SQLiteStore(path)


def test_store_locked_beyond_its_time_limit_is_unavailable(tmp_path, write_lock):
    path = str(tmp_path / "state.db")
    store = SQLiteStore(path, timeout=1.0)
    with write_lock(path):
        with pytest.raises(StoreUnavailable, match="stayed locked for 1s"):
            store.update("t", "a", _incr())
        # the store is now known to be failing: the next operation fails without a second wait
        began = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.get("t", "a")
        assert time.monotonic() - began < 0.5
    reopened = open_store("sqlite://" + path, timeout=1.0)
    assert reopened is not store
    assert reopened.update("t", "a", _incr()) == 1
    reopened.close()


def test_a_shorter_timeout_bounds_one_operation(tmp_path, write_lock):
    path = str(tmp_path / "state.db")
    store = SQLiteStore(path, timeout=5.0)
    with write_lock(path):
        began = time.monotonic()
        with pytest.raises(StoreUnavailable, match="stayed locked for 0.3s"):
            store.update("t", "a", _incr(), timeout=0.3)
        assert time.monotonic() - began < 2.0
    store.close()


def _corrupt_record_pages(path):
    """Overwrite every page of the records table (not the schema) with garbage."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'records'").fetchone()[0]
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.close()
    with open(path, "r+b") as f:
        for page in range(root, pages + 1):
            f.seek((page - 1) * page_size)
            f.write(b"\xff" * page_size)


def test_damaged_records_are_a_clear_error_naming_the_fix(tmp_path):
    path = str(tmp_path / "state.db")
    store = SQLiteStore(path)
    for index in range(200):
        store.update("t", "k%03d" % index, _incr())
    store.close()
    _corrupt_record_pages(path)
    damaged = open_store("sqlite://" + path)
    with pytest.raises(StoreUnavailable) as info:
        damaged.items("t")
    message = str(info.value)
    assert "state store sqlite://%s is damaged" % path in message, message
    assert "mv %s %s.damaged" % (path, path) in message
    assert info.value.to_dict()["type"] == "Unavailable"
    assert info.value.details["state_store"] == "sqlite://" + path


def test_forked_children_get_their_own_connection(tmp_path):
    store = SQLiteStore(str(tmp_path / "state.db"))
    store.update("t", "n", _incr())
    children = []
    for _dummy in range(3):
        pid = os.fork()
        if pid == 0:  # child: use the store object inherited from the parent
            code = 1
            try:
                for _dummy in range(200):
                    store.update("t", "n", _incr())
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    for _dummy in range(200):
        store.update("t", "n", _incr())
    for pid in children:
        assert os.waitpid(pid, 0)[1] == 0
    assert store.get("t", "n") == {"n": 801}
    store.close()


_OPEN_RACE = r"""
import json, sys, time
from ansible_collections.resilient.virt.plugins.module_utils._state.sqlite import SQLiteStore

failures = []
for path, start_at in json.loads(sys.argv[1]):
    time.sleep(max(0.0, start_at - time.time()))
    try:
        SQLiteStore(path, timeout=5).update("t", "n", lambda cur, now: ({"n": (cur or {}).get("n", 0) + 1}, None))
    except Exception as exc:
        failures.append("%s: %s" % (type(exc).__name__, exc))
print(json.dumps(failures))
"""


def test_forks_meeting_a_new_store_at_once_all_open_it(tmp_path, child_env):
    """8 processes open the same new file at the same instant, 20 times over: none fails (the
    switch to WAL waits while another process holds the new file) and every update lands."""
    start = time.time() + 2.0
    rounds = [(str(tmp_path / ("round%d" % i) / "state.db"), start + i * 0.2) for i in range(20)]
    procs = [subprocess.Popen([sys.executable, "-c", _OPEN_RACE, json.dumps(rounds)],
                              env=child_env, stdout=subprocess.PIPE) for dummy in range(8)]
    failures = [json.loads(proc.communicate(timeout=120)[0]) for proc in procs]
    assert [f for f in failures if f] == []
    for path, _start in rounds:
        db = sqlite3.connect(path)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        value = db.execute("SELECT value FROM records WHERE namespace = 't' AND key = 'n'").fetchone()
        db.close()
        assert json.loads(value[0]) == {"n": 8}
