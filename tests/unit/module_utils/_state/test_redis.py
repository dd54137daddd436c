"""Redis store specifics against a real redis-server: optimistic retry, secrets, TLS, errors."""
import os
import time

import pytest
import redis
from redis_server import make_tls_files

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, StoreUnavailable, Unauthorized, Unavailable)
from ansible_collections.resilient.virt.plugins.module_utils._state.redis import RedisStore
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store


@pytest.fixture
def rstore(redis_url):
    store = RedisStore(redis_url)
    yield store
    store.close()


def test_update_runs_fn_again_when_the_record_changed_meanwhile(rstore, redis_url):
    other = RedisStore(redis_url)
    calls = []

    def fn(current, now):
        calls.append(current)
        if len(calls) == 1:  # another client writes between our read and our EXEC
            other.update("t", "k", lambda cur, now: ({"n": 10}, None))
        return {"n": (current or {}).get("n", 0) + 1}, len(calls)

    assert rstore.update("t", "k", fn) == 2
    assert calls == [None, {"n": 10}]
    assert rstore.get("t", "k") == {"n": 11}
    other.close()


def test_records_live_under_the_collection_prefix(rstore, redis_url):
    rstore.update("breaker", "libvirt:lab1", lambda cur, now: ({"x": 1}, None))
    client = redis.Redis.from_url(redis_url)
    assert sorted(client.keys("*")) == [b"resilient_virt:breaker",
                                        b"resilient_virt:breaker:libvirt:lab1"]
    assert client.get("resilient_virt:breaker:libvirt:lab1") == b'{"x":1}'
    client.close()


def test_now_is_the_server_clock(rstore):
    assert abs(rstore.now() - time.time()) < 2


def test_password_never_shown(rstore, redis_server):
    for text in (rstore.url, rstore.describe(), repr(rstore)):
        assert redis_server.password not in text
        assert "***@127.0.0.1:%d" % redis_server.port in text


def test_wrong_password_is_unauthorized_without_the_password(redis_server):
    store = open_store("redis://:Wrong-Secret@127.0.0.1:%d/0" % redis_server.port)
    with pytest.raises(Unauthorized) as info:
        store.get("t", "k")
    assert "Wrong-Secret" not in str(info.value) and "Wrong-Secret" not in repr(info.value)
    assert "fix the password in state_store" in str(info.value)
    store.close()


def test_unreachable_server_is_unavailable_and_names_the_store(start_redis_server):
    server = start_redis_server()
    url = server.url()
    server.stop()
    store = RedisStore(url)
    with pytest.raises(Unavailable) as info:
        store.update("t", "k", lambda cur, now: ({}, None))
    assert "state store redis://***@127.0.0.1:%d/0" % server.port in str(info.value)
    assert server.password not in str(info.value)
    store.close()


def test_invalid_url_is_invalid_spec():
    with pytest.raises(InvalidSpec, match="not a valid Redis URL"):
        RedisStore("redis://:pw@127.0.0.1:notaport/0")


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory, start_redis_server):
    """A redis-server speaking only TLS, with a certificate for 127.0.0.1 from a private CA."""
    files = make_tls_files(tmp_path_factory.mktemp("tls"))
    server = start_redis_server(files)
    return server, files[2]


def test_rediss_verifies_the_certificate_by_default(tls_server):
    server, ca = tls_server
    url = "rediss://:%s@127.0.0.1:%d/0" % (server.password, server.port)
    store = RedisStore(url)
    with pytest.raises(Unauthorized, match="TLS certificate verification failed") as info:
        store.now()
    assert server.password not in str(info.value)
    store.close()
    trusted = RedisStore(url + "?ssl_ca_certs=" + ca)
    assert trusted.update("t", "k", lambda cur, now: ({"tls": True}, "ok")) == "ok"
    assert trusted.get("t", "k") == {"tls": True}
    trusted.close()


def test_rediss_checks_the_host_name(tls_server):
    server, ca = tls_server
    store = RedisStore("rediss://:%s@localhost:%d/0?ssl_ca_certs=%s"
                       % (server.password, server.port, ca))
    with pytest.raises(Unauthorized, match="Hostname mismatch"):
        store.now()
    store.close()


def test_fork_gets_fresh_connections(rstore):
    rstore.update("t", "n", lambda cur, now: ({"n": 0}, None))
    children = []
    for _dummy in range(3):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for _dummy in range(100):
                    rstore.update("t", "n", lambda cur, now: ({"n": cur["n"] + 1}, None))
                code = 0
            finally:
                os._exit(code)
        children.append(pid)
    for _dummy in range(100):
        rstore.update("t", "n", lambda cur, now: ({"n": cur["n"] + 1}, None))
    for pid in children:
        assert os.waitpid(pid, 0)[1] == 0
    assert rstore.get("t", "n") == {"n": 400}


# --- time limits: a frozen or refusing server never holds a task for long ------------------

@pytest.fixture
def frozen_server(start_redis_server):
    """A private redis-server that is stopped with SIGSTOP (accepts TCP, never answers)."""
    import signal

    server = start_redis_server()
    client = redis.Redis.from_url(server.url())
    client.set("resilient_virt:t:k", '{"n": 1}')
    client.close()
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield server
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


def test_a_frozen_server_fails_within_the_store_timeout(frozen_server):
    store = RedisStore(frozen_server.url(), timeout=1.0)
    began = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        store.update("t", "k", lambda cur, now: ({"n": 2}, None))
    elapsed = time.monotonic() - began
    assert 0.9 < elapsed < 2.9, elapsed  # one socket timeout, not redis-py's retries (3 s and more)
    assert info.value.type == "Unavailable" and not info.value.retryable
    assert frozen_server.password not in str(info.value)
    began = time.monotonic()
    with pytest.raises(StoreUnavailable):  # known failing: no second wait
        store.get("t", "k")
    assert time.monotonic() - began < 0.5


def test_a_shorter_timeout_bounds_one_operation_on_a_frozen_server(frozen_server):
    store = RedisStore(frozen_server.url(), timeout=5.0)
    began = time.monotonic()
    with pytest.raises(StoreUnavailable, match="did not answer within 0.3s"):
        store.get("t", "k", timeout=0.3)
    assert time.monotonic() - began < 1.5


def test_a_refusing_server_fails_at_once(start_redis_server):
    server = start_redis_server()
    url = server.url()
    server.stop()
    store = RedisStore(url, timeout=5.0)
    began = time.monotonic()
    with pytest.raises(StoreUnavailable):
        store.get("t", "k")
    assert time.monotonic() - began < 0.5  # redis-py would retry three times with backoff
