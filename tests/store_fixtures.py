"""State store fixtures, for the unit tests of the stores and the integration tests that run
processes against them: a SQLite file in tmp_path, a real, private redis-server, and real
Sentinel (primary, replica, three Sentinels) and Cluster (three primaries) setups.

A conftest.py takes the ones it needs by importing them."""
import os

import pytest
from redis_server import RedisServer, require_redis_server
from redis_topologies import ClusterSetup, SentinelSetup, require_redis_topologies

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


@pytest.fixture(scope="session")
def redis_sentinel():
    """A private primary, replica and three Sentinels for the session."""
    require_redis_server()
    require_redis_topologies()
    setup = SentinelSetup()
    yield setup
    setup.stop()


@pytest.fixture(scope="session")
def redis_cluster():
    """A private three-primary Redis Cluster for the session."""
    require_redis_server()
    require_redis_topologies()
    setup = ClusterSetup()
    yield setup
    setup.stop()


@pytest.fixture
def sentinel_url(redis_sentinel):
    """redis+sentinel:// URL of the emptied Sentinel setup (with both passwords)."""
    redis_sentinel.flush()
    return redis_sentinel.url()


@pytest.fixture
def cluster_url(redis_cluster):
    """redis+cluster:// URL of the emptied Cluster (with its password)."""
    redis_cluster.flush()
    return redis_cluster.url()


@pytest.fixture(params=["sqlite", "redis", "sentinel", "cluster"])
def store_url(request):
    """Each test using it runs on SQLite, Redis, Redis through Sentinel and a Redis Cluster."""
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
