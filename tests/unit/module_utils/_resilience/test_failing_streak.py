"""A closed breaker whose provider has begun to fail lets no more calls reach it than the failures
that open it, however many processes call at once (the processes share a real SQLite store).
Calls that are already under way when the first failure comes are not held back: a healthy
provider's calls cost one store read each."""
import json
import subprocess
import sys
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import CircuitBreaker
from ansible_collections.resilient.virt.plugins.module_utils.errors import BreakerOpen, Timeout, Unavailable
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

WORKERS = 6
THRESHOLD = 3

# Each worker makes CALLS calls to a provider that always fails (each call takes 20 ms), through
# the shared breaker, and prints how many reached the provider and how many were refused.
WORKER = """
import json, sys, time
from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import CircuitBreaker
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils.errors import BreakerOpen, Unavailable
url, threshold, calls, start_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
breaker = CircuitBreaker(open_store(url), "libvirt:dead", failure_threshold=threshold,
                         reset_timeout=3600, probe_lease=30)
time.sleep(max(0.0, start_at - time.time()))
reached = refused = 0
for _ in range(calls):
    try:
        permit = breaker.before_call()
    except BreakerOpen:
        refused += 1
        continue
    reached += 1
    time.sleep(0.02)
    breaker.on_failure(permit, Unavailable("connection refused"))
print(json.dumps({"reached": reached, "refused": refused}))
"""


@pytest.mark.parametrize("first_failures", [1, 2])
def test_processes_calling_a_dead_provider_at_once_reach_it_threshold_times(tmp_path, child_env, first_failures):
    url = "sqlite://%s" % (tmp_path / "state.db")
    breaker = CircuitBreaker(open_store(url), "libvirt:dead", failure_threshold=THRESHOLD)
    for _failure in range(first_failures):  # a streak already begun, as after an earlier task
        breaker.on_failure(breaker.before_call(), Unavailable("connection refused"))
    start_at = time.time() + 1.5
    env = dict(child_env, PYTHONDONTWRITEBYTECODE="1")
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, url, str(THRESHOLD), "4", str(start_at)],
                                stdout=subprocess.PIPE, env=env, text=True)
               for _worker in range(WORKERS)]
    results = [json.loads(worker.communicate(timeout=60)[0]) for worker in workers]
    reached = sum(r["reached"] for r in results)
    assert reached + first_failures == THRESHOLD, results  # without the slots: 7 to 12
    assert sum(r["refused"] for r in results) == WORKERS * 4 - reached
    record = open_store(url).get("breaker", "libvirt:dead")
    assert record["state"] == "open" and record["opened_total"] == 1
    assert record["failures_total"] == THRESHOLD and record["probes"] == {}


def test_a_success_clears_the_streak_and_frees_every_call(tmp_path):
    store = open_store("sqlite://%s" % (tmp_path / "state.db"))
    breaker = CircuitBreaker(store, "libvirt:flaky", failure_threshold=3)
    breaker.on_failure(breaker.before_call(), Unavailable("blip"))
    first, second = breaker.before_call(), breaker.before_call()  # 3 - 1 failure = 2 slots
    assert first.probe and second.probe
    breaker.on_success(first)
    assert store.get("breaker", "libvirt:flaky")["consecutive_failures"] == 0
    assert [breaker.before_call().probe for _call in range(10)] == [None] * 10  # no slot needed
    breaker.release(second)
    assert store.get("breaker", "libvirt:flaky")["probes"] == {}


def test_a_call_without_a_slot_waits_at_most_its_lease(tmp_path):
    store = open_store("sqlite://%s" % (tmp_path / "state.db"))
    breaker = CircuitBreaker(store, "libvirt:hung", failure_threshold=2)
    breaker.on_failure(breaker.before_call(), Unavailable("blip"))
    hung = breaker.before_call()  # the one slot left, held by a call that hangs
    started = time.monotonic()
    with pytest.raises(Timeout):
        breaker.before_call(lease=0.5)
    assert 0.3 < time.monotonic() - started < 1.5
    breaker.on_failure(hung, Unavailable("timed out"))  # the hung call fails: the breaker opens
    with pytest.raises(BreakerOpen):
        breaker.before_call(lease=0.5)
