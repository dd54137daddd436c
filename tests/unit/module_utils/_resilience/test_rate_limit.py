"""GCRA rate limiter on the real stores (each test runs on SQLite and Redis)."""
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import Deadline
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, RateLimit
from ansible_collections.resilient.virt.plugins.module_utils._resilience.rate_limit import (
    NAMESPACE, RateLimiter)


def test_unlimited_never_touches_the_store(store):
    limiter = RateLimiter(store, "p:free", qps=0, burst=None)
    assert [limiter.acquire() for dummy in range(100)] == [0.0] * 100
    assert store.get(NAMESPACE, "p:free") is None


def test_burst_goes_at_once_then_one_per_interval(store):
    limiter = RateLimiter(store, "p:burst", qps=20, burst=3)
    started = time.monotonic()
    assert [limiter.acquire() for dummy in range(3)] == [0.0] * 3
    waits = [limiter.acquire() for dummy in range(3)]
    elapsed = time.monotonic() - started
    # never more than one interval each (a process held up by a busy machine may find its turn
    # already come and wait 0), and the sixth call cannot pass before 3 intervals after the first
    assert all(0 <= w <= 0.05 + 0.01 for w in waits)
    assert elapsed >= 0.149
    assert store.get(NAMESPACE, "p:burst")["qps"] == 20


def test_wait_past_the_deadline_raises_and_keeps_the_turn(store):
    # a turn of 2 s and a deadline of 0.5 s: time enough for the store to answer (a Redis
    # Cluster on a loaded machine) and too little for the turn
    limiter = RateLimiter(store, "p:dl", qps=0.5, burst=1)
    limiter.acquire()
    tat = store.get(NAMESPACE, "p:dl")["tat"]
    with pytest.raises(RateLimit) as info:
        limiter.acquire(Deadline.after(0.5))
    assert 0.5 < info.value.retry_after <= 2.0
    assert info.value.retryable
    assert "'p:dl'" in str(info.value) and "past its deadline" in str(info.value)
    assert store.get(NAMESPACE, "p:dl")["tat"] == tat  # the refused call took no turn
    assert 0 < limiter.acquire(Deadline.after(5)) <= 2.0


def test_window_never_admits_more_than_rate_plus_burst(store):
    qps, burst = 50, 4
    limiter = RateLimiter(store, "p:win", qps=qps, burst=burst)
    stamps = []
    for _dummy in range(40):
        limiter.acquire()
        stamps.append(time.monotonic())
    window = 0.2
    for i, start in enumerate(stamps):
        inside = sum(1 for t in stamps[i:] if t < start + window)
        assert inside <= qps * window + burst


def test_default_burst_is_one_second_of_calls(sqlite_url):
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    store = open_store(sqlite_url)
    assert RateLimiter(store, "k", qps=7.5).burst == 7
    assert RateLimiter(store, "k", qps=0.2).burst == 1
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(InvalidSpec, match="burst"):
            RateLimiter(store, "k", qps=1, burst=bad)


@pytest.mark.parametrize("tat", [1e300, "soon", None, [1]])
def test_a_damaged_record_does_not_stall_the_limiter(store, tat):
    store.update("ratelimit", "lab:dmg", lambda cur, now: ({"tat": tat}, None))
    limiter = RateLimiter(store, "lab:dmg", qps=10, burst=1)
    assert limiter.acquire() == 0.0
