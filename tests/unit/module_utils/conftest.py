"""State store fixtures: a SQLite file in tmp_path and a real, private redis-server."""
import os

import pytest
from redis_server import RedisServer, require_redis_server

from paths import COLLECTIONS


@pytest.fixture(scope="session")
def redis_server():
    """A private redis-server for the session; fails (never skips) when it is not installed."""
    require_redis_server()
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def start_redis_server():
    """``start_redis_server(tls_files=None)`` starts another private server, stopped at the end."""
    require_redis_server()
    started = []

    def start(tls_files=None):
        started.append(RedisServer(tls_files))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def redis_url(redis_server):
    """URL of an emptied database on the private server (with its password)."""
    import redis

    client = redis.Redis.from_url(redis_server.url())
    client.flushdb()
    client.close()
    return redis_server.url()


@pytest.fixture
def sqlite_url(tmp_path):
    return "sqlite://%s" % (tmp_path / "state" / "state.db")


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request):
    """Each test using it runs once on SQLite and once on Redis."""
    return request.getfixturevalue(request.param + "_url")


@pytest.fixture
def store(store_url):
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture
def child_env():
    """Environment for child Python processes that import the collection."""
    env = dict(os.environ)
    env["PYTHONPATH"] = COLLECTIONS + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.fixture
def write_lock():
    """``with write_lock(path):`` another connection holds the SQLite file's write lock."""
    import contextlib
    import sqlite3

    @contextlib.contextmanager
    def hold(path):
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        try:
            yield other
        finally:
            other.execute("ROLLBACK")
            other.close()

    return hold
