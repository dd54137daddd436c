"""Redis through Sentinel and as a Cluster, against real servers: URLs, key layout, secrets,
failover, time limits. (The StateStore interface itself runs on both in test_store.py, and the
breaker and rate limiter across processes in test_multiprocess.py.)"""
import os
import signal
import time

import pytest
from redis_server import REDIS_PASSWORD, make_tls_files
from redis_topologies import SENTINEL_PASSWORD, SERVICE, SentinelSetup, raw_client

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, StoreUnavailable, Unauthorized)
from ansible_collections.resilient.virt.plugins.module_utils._state.redis import RedisStore
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store


# --- URLs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("url, needle", [
    ("redis+sentinel://:Url-Pa55word@h1:26379,h2:26379", "master name"),
    ("redis+sentinel://:Url-Pa55word@h1:26379/svc/zero", "database 'zero' is not a number"),
    ("redis+sentinel://:Url-Pa55word@h1:26379/svc/0/extra", "master name"),
    ("redis+sentinel://:Url-Pa55word@/svc", "at least one host"),
    ("redis+sentinel://:Url-Pa55word@h1:port/svc", "port of 'h1:port'"),
    ("redis+sentinel://:Url-Pa55word@h1:70000/svc", "1 to 65535"),
    ("redis+sentinel://:Url-Pa55word@h1,,h2/svc", "has no host"),
    ("redis+sentinel://:Url-Pa55word@h1/svc?sentinel_pasword=Url-Pa55word", "unknown option"),
    ("redis+sentinel://h1/svc?sentinel_password=Url-Pa55word&db=3", "unknown option 'db'"),
    ("redis+sentinel://:Url-Pa55word@h1/svc?ssl_ca_certs=/ca.pem", "need the rediss+ scheme"),
    ("rediss+sentinel://:Url-Pa55word@h1/svc?ssl_cert_reqs=optional", "required or none"),
    ("redis+cluster://:Url-Pa55word@h1:7000/3", "no databases"),
    ("redis+cluster://:Url-Pa55word@h1:7000?sentinel_password=Url-Pa55word", "options here: none"),
    ("redis+clusters://:Url-Pa55word@h1:7000", "accepted forms"),
])
def test_malformed_urls_name_state_store_and_the_forms_without_passwords(url, needle):
    with pytest.raises(InvalidSpec) as info:
        open_store(url)
    message = str(info.value)
    assert message.startswith("state_store "), message
    assert needle in message, message
    assert "redis+sentinel://host:port[,host:port...]/service[/db]" in message
    assert "redis+cluster://" in message and "rediss+sentinel" in message
    # the forms survive the redaction every error goes through before it is shown
    from ansible_collections.resilient.virt.plugins.module_utils._masking import redact
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import ACCEPTED_FORMS

    assert ACCEPTED_FORMS in redact(message)
    assert "Url-Pa55word" not in message and "Url-Pa55word" not in repr(info.value)


def test_a_sentinel_url_names_every_part():
    from ansible_collections.resilient.virt.plugins.module_utils._state.redis_url import (
        parse_redis_url)

    spec = parse_redis_url("rediss+sentinel://app%40x:p%2Fw@10.0.0.1,[::1]:26380,s3:1/svc/2"
                           "?sentinel_username=watch&sentinel_password=sp&ssl_ca_certs=/ca.pem")
    assert (spec.kind, spec.tls, spec.verify) == ("sentinel", True, True)
    assert spec.nodes == [("10.0.0.1", 26379), ("::1", 26380), ("s3", 1)]
    assert (spec.service, spec.db, spec.username, spec.password) == ("svc", 2, "app@x", "p/w")
    assert (spec.sentinel_username, spec.sentinel_password) == ("watch", "sp")
    assert spec.ssl_ca_certs == "/ca.pem"
    cluster = parse_redis_url("redis+cluster://n1,n2:7001")
    assert (cluster.kind, cluster.tls, cluster.nodes) == ("cluster", False, [("n1", 6379), ("n2", 7001)])
    assert cluster.password is None


# --- secrets ------------------------------------------------------------------------------------

@pytest.fixture(params=["sentinel", "cluster"])
def topology_url(request):
    return request.getfixturevalue(request.param + "_url")


def test_passwords_never_shown(topology_url):
    store = open_store(topology_url)
    store.update("t", "k", lambda cur, now: ({"ok": True}, None))
    for text in (store.url, store.describe(), repr(store)):
        assert REDIS_PASSWORD not in text and SENTINEL_PASSWORD not in text, text
        assert text.split("://", 1)[1].startswith("***@127.0.0.1:"), text
    store.close()


def test_wrong_redis_password_is_unauthorized_without_the_password(topology_url):
    url = topology_url.replace(REDIS_PASSWORD, "Wrong-Secret")
    store = RedisStore(url)
    with pytest.raises(Unauthorized) as info:
        store.get("t", "k")
    message = str(info.value) + repr(info.value)
    assert "fix the password in state_store" in message
    for secret in ("Wrong-Secret", SENTINEL_PASSWORD):
        assert secret not in message
    store.close()


def test_wrong_sentinel_password_is_unauthorized_without_the_password(sentinel_url):
    store = RedisStore(sentinel_url.replace(SENTINEL_PASSWORD, "Wrong-Sentinel"))
    with pytest.raises(Unauthorized) as info:
        store.get("t", "k")
    message = str(info.value) + repr(info.value)
    assert "Sentinels" in message and "sentinel_password" in message, message
    for secret in ("Wrong-Sentinel", REDIS_PASSWORD):
        assert secret not in message
    store.close()


@pytest.fixture(scope="module")
def tls_sentinel(tmp_path_factory, redis_sentinel):
    """A primary, replica and three Sentinels speaking only TLS, certificates from a private CA.
    (``redis_sentinel`` first: the session checks the packages and starts it once anyway.)"""
    files = make_tls_files(tmp_path_factory.mktemp("tls"))
    setup = SentinelSetup(files)
    yield setup, files[2]
    setup.stop()


def test_rediss_sentinel_verifies_certificates_by_default(tls_sentinel):
    setup, ca = tls_sentinel
    url = setup.url(scheme="rediss+sentinel")
    store = RedisStore(url)
    with pytest.raises(Unauthorized, match="TLS certificate verification failed") as info:
        store.now()
    assert REDIS_PASSWORD not in str(info.value) and SENTINEL_PASSWORD not in str(info.value)
    store.close()
    trusted = RedisStore(url + "&ssl_ca_certs=" + ca)
    assert trusted.update("t", "k", lambda cur, now: ({"tls": True}, "ok")) == "ok"
    assert trusted.get("t", "k") == {"tls": True}
    trusted.close()
    plain = RedisStore(url.replace("rediss+", "redis+", 1), timeout=2.0)
    with pytest.raises(StoreUnavailable):  # no TLS: the Sentinels do not answer a plain client
        plain.now()
    plain.close()


# --- key layout -----------------------------------------------------------------------------

def test_cluster_keeps_a_record_and_its_index_in_one_slot(cluster_url):
    store = open_store(cluster_url)
    for namespace in ("breaker", "rate", "reservation"):
        for key in ("libvirt:hv1", "vsphere:vc1", "x"):
            store.update(namespace, key, lambda cur, now: ({"n": 1}, None))
    client = raw_client(cluster_url)
    names = sorted(name.decode() for name in client.scan_iter(match="resilient_virt:*"))
    assert "resilient_virt:{breaker}:libvirt:hv1" in names and "resilient_virt:{breaker}" in names
    assert len(names) == 12
    for namespace in ("breaker", "rate", "reservation"):  # the server's own slot computation
        slots = {client.cluster_keyslot(name) for name in names if "{%s}" % namespace in name}
        assert len(slots) == 1, (namespace, slots)
    client.close()
    store.close()


def test_sentinel_keeps_the_plain_key_names(sentinel_url):
    store = open_store(sentinel_url)
    store.update("breaker", "libvirt:lab1", lambda cur, now: ({"x": 1}, None))
    client = raw_client(sentinel_url)
    assert sorted(client.keys("*")) == [b"resilient_virt:breaker",
                                        b"resilient_virt:breaker:libvirt:lab1"]
    client.close()
    store.close()


def test_now_is_the_server_clock(topology_url):
    store = open_store(topology_url)
    assert abs(store.now() - time.time()) < 2
    store.close()


# --- failover and time limits ----------------------------------------------------------------

def test_after_a_failover_the_next_store_writes_to_the_new_primary(redis_sentinel, sentinel_url):
    store = open_store(sentinel_url)
    store.update("breaker", "libvirt:hv1", lambda cur, now: ({"state": "open"}, None))
    primary = raw_client(sentinel_url)
    assert primary.execute_command("WAIT", 1, 5000) == 1  # the replica has the record
    primary.close()
    old = redis_sentinel.kill_primary()
    try:
        with pytest.raises(StoreUnavailable) as info:  # the operation that meets the failover
            store.update("breaker", "libvirt:hv1", lambda cur, now: ({"state": "closed"}, None))
        assert REDIS_PASSWORD not in str(info.value) and SENTINEL_PASSWORD not in str(info.value)
        assert "state store redis+sentinel://***@127.0.0.1:" in str(info.value)
        new = redis_sentinel.wait_failover(old)
        assert new != old
        after = open_store(sentinel_url)  # the next task opens the store again
        assert after is not store
        assert after.get("breaker", "libvirt:hv1") == {"state": "open"}
        after.update("breaker", "libvirt:hv1", lambda cur, now: ({"state": "closed"}, None))
        client = raw_client(sentinel_url)
        assert client.connection_pool.connection_kwargs["port"] == new
        assert client.get("resilient_virt:breaker:libvirt:hv1") == b'{"state":"closed"}'
        client.close()
        after.close()
    finally:
        redis_sentinel.restart(old)


def test_a_frozen_primary_fails_within_the_store_timeout(redis_sentinel, sentinel_url):
    store = RedisStore(sentinel_url, timeout=1.0)
    store.get("t", "k")
    pid = redis_sentinel.server(redis_sentinel.primary_port()).proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.update("t", "k", lambda cur, now: ({"n": 1}, None))
        assert time.monotonic() - began < 2.0  # one socket timeout, no retries inside redis-py
        began = time.monotonic()
        with pytest.raises(StoreUnavailable, match="did not answer within 0.3s"):
            RedisStore(sentinel_url, timeout=5.0).get("t", "k", timeout=0.3)
        assert time.monotonic() - began < 1.5
    finally:
        os.kill(pid, signal.SIGCONT)
    store.close()


def test_a_frozen_cluster_node_fails_within_the_store_timeout(redis_cluster, cluster_url):
    store = RedisStore(cluster_url, timeout=1.0)
    store.get("t", "k")
    client = raw_client(cluster_url)
    port = client.get_node_from_key("resilient_virt:{t}").port
    client.close()
    pid = next(s.proc.pid for s in redis_cluster.servers if s.port == port)
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        with pytest.raises(StoreUnavailable) as info:
            store.update("t", "k", lambda cur, now: ({"n": 1}, None))
        assert time.monotonic() - began < 2.5
        assert REDIS_PASSWORD not in str(info.value)
    finally:
        os.kill(pid, signal.SIGCONT)
    store.close()


def test_the_first_operation_on_a_frozen_cluster_stays_within_the_limit(redis_cluster, cluster_url):
    """Discovering the Cluster asks its nodes in turn: the whole first operation is bounded."""
    pids = [server.proc.pid for server in redis_cluster.servers]
    store = RedisStore(cluster_url, timeout=0.5)
    for pid in pids:  # shorter than the nodes' own cluster-node-timeout (2 s)
        os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        with pytest.raises(StoreUnavailable, match="did not answer within 0.5s"):
            store.get("t", "k")
        assert time.monotonic() - began < 1.0  # not one socket timeout per node
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    store.close()


def test_a_hung_sentinel_leaves_time_to_ask_the_next_and_all_hung_stay_within_the_limit():
    setup = SentinelSetup()  # its own: frozen Sentinels must not disturb the session's setup
    pids = [proc.pid for proc in setup.sentinels]
    try:
        os.kill(pids[0], signal.SIGSTOP)  # the first Sentinel asked accepts and never answers
        store = RedisStore(setup.url(), timeout=2.0)
        began = time.monotonic()
        store.update("t", "k", lambda cur, now: ({"n": 1}, None))
        assert time.monotonic() - began < 1.5  # one Sentinel's share (0.5 s), then the next
        store.close()
        for pid in pids[1:]:
            os.kill(pid, signal.SIGSTOP)
        store = RedisStore(setup.url(), timeout=2.0)
        began = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.get("t", "k")
        assert time.monotonic() - began < 2.5  # three Sentinels asked in turn, within the limit
        store.close()
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        setup.stop()


def test_every_sentinel_refusing_fails_at_once(start_redis_server):
    dead = [start_redis_server() for dummy in range(2)]
    ports = [server.port for server in dead]
    for server in dead:
        server.stop()
    store = RedisStore("redis+sentinel://:%s@127.0.0.1:%d,127.0.0.1:%d/%s"
                       % (REDIS_PASSWORD, ports[0], ports[1], SERVICE), timeout=5.0)
    began = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"no Sentinel \(127.0.0.1:%d, 127.0.0.1:%d\) named a "
                       "primary for 'storemaster'" % tuple(ports)):
        store.now()
    assert time.monotonic() - began < 0.5
    store.close()
