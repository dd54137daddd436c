"""The store-outage policy: a task whose store fails keeps its breakers and rate limits in memory
(``open``), or fails with Unavailable (``closed``); the shared store is never written meanwhile."""
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, InvalidSpec, StoreUnavailable, Unavailable)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils._state.fallback import (
    FallbackStore, policy_store)
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store


def _refused_url():
    """A Redis URL on a loopback port where nothing listens (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return "redis://:a-secret-password@127.0.0.1:%d/0" % port


def _settings(**env):
    environ = dict(("RESILIENT_VIRT_" + k.upper(), str(v)) for k, v in env.items())
    return resolve_settings({"max_attempts": 1, "failure_threshold": 2}, environ=environ)


def _down():
    raise Unavailable("no answer")


def test_the_policy_is_open_by_default_and_takes_option_then_environment():
    assert resolve_settings(environ={}).store_failure == "open"
    assert resolve_settings(environ={"RESILIENT_VIRT_STORE_FAILURE": "closed"}).store_failure == "closed"
    assert resolve_settings(environ={"RESILIENT_VIRT_STORE_FAILURE": "closed"},
                            store_failure="open").store_failure == "open"
    with pytest.raises(InvalidSpec) as info:
        resolve_settings(environ={"RESILIENT_VIRT_STORE_FAILURE": "ajar"})
    assert "RESILIENT_VIRT_STORE_FAILURE='ajar'" in info.value.message
    assert "one of closed, open" in info.value.message


def test_memory_store_keeps_records_apart_from_their_callers():
    store = MemoryStore()
    record = {"n": [1]}
    store.update("t", "a", lambda current, now: (record, None))
    record["n"].append(2)  # the caller's object is not the stored one
    assert store.get("t", "a") == {"n": [1]}
    assert store.items("t") == {"a": {"n": [1]}} and store.items("t", "b") == {}
    store.delete("t", "a")
    assert store.get("t", "a") is None


def test_open_policy_falls_back_once_on_a_refusing_store_and_warns_without_the_password():
    url = _refused_url()
    warnings = []
    settings = _settings()
    store = policy_store(lambda: open_store(url, timeout=2), settings, warnings.append)
    policy = Policy(store, "libvirt:hv1", settings)
    started = time.monotonic()
    for _call in range(2):
        with pytest.raises(Unavailable):
            policy.call(_down)
    with pytest.raises(BreakerOpen):  # the breaker opened, in memory, after failure_threshold
        policy.call(_down)
    assert time.monotonic() - started < 1.0  # a refusing store costs nothing more
    assert store.fell_back and len(warnings) == 1
    assert "a-secret-password" not in warnings[0] and "redis://***@127.0.0.1" in warnings[0]
    assert "store_failure: closed" in warnings[0]


def test_closed_policy_fails_with_unavailable_naming_the_store():
    url = _refused_url()
    settings = _settings(store_failure="closed")
    store = policy_store(lambda: open_store(url, timeout=2), settings, pytest.fail)
    with pytest.raises(StoreUnavailable) as info:
        Policy(store, "libvirt:hv1", settings).call(lambda: "answered")
    assert info.value.details["state_store"].startswith("redis://***@127.0.0.1")


LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(60)
"""


def test_a_locked_store_is_waited_on_once_and_left_untouched(tmp_path):
    path = str(tmp_path / "state.db")
    open_store("sqlite://" + path, environ={}).close()
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, path], stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "locked"
        warnings = []
        settings = _settings(store_timeout="0.5s")
        store = FallbackStore(lambda: open_store("sqlite://" + path, timeout=0.5), warnings.append, 0.5)
        policy = Policy(store, "libvirt:hv1", settings)
        started = time.monotonic()
        for _call in range(5):
            assert policy.call(lambda: "answered") == "answered"
        took = time.monotonic() - started
        assert 0.5 <= took < 2.4, took  # one store_timeout, then memory (five would be 2.5 s)
        assert len(warnings) == 1 and "locked" in warnings[0].message
    finally:
        locker.kill()
        locker.wait()
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*) FROM records").fetchone()[0] == 0
    db.close()


class FrozenStore(MemoryStore):
    """A store that answers nothing: every operation waits its whole time limit, then fails."""

    def __init__(self, timeout):
        super().__init__("frozen")
        self.timeout = timeout
        self.waited = []

    def _frozen(self, timeout):
        limit = self.timeout if timeout is None else min(timeout, self.timeout)
        self.waited.append(limit)
        time.sleep(limit)
        raise StoreUnavailable("redis://***@frozen:6379/0", "did not answer within %gs" % limit)

    def get(self, namespace, key, timeout=None):
        return self._frozen(timeout)

    def items(self, namespace, prefix="", timeout=None):
        return self._frozen(timeout)

    def update(self, namespace, key, fn, timeout=None):
        return self._frozen(timeout)

    def delete(self, namespace, key, timeout=None):
        return self._frozen(timeout)


@pytest.mark.parametrize("rate_limit", [{}, {"rate_limit_qps": 100}])
def test_a_frozen_store_under_the_open_policy_costs_a_share_of_the_deadline(rate_limit):
    """deadline 2 s, store_timeout 5 s: the store gets at most a quarter of the deadline, then
    the task's memory serves, and the provider answers within the deadline (with a rate limit
    too, whose turn is also taken from the store)."""
    frozen = FrozenStore(5.0)
    warnings = []
    settings = resolve_settings(dict({"deadline": "2s", "max_attempts": 1}, **rate_limit),
                                environ={})
    store = FallbackStore(lambda: frozen, warnings.append, settings.store_timeout)
    started = time.monotonic()
    assert Policy(store, "libvirt:hv1", settings).call(lambda: "answered") == "answered"
    took = time.monotonic() - started
    assert frozen.waited and max(frozen.waited) <= 0.5 + 1e-6, frozen.waited
    # far less than the store_timeout of 5 s the store would have had, with room for a loaded
    # machine (the waits themselves are held to the share above)
    assert took < 5.0, took
    assert len(warnings) == 1
