"""Policy.stats: what one task's calls did, counted without Ansible, on SQLite and Redis.

Each oracle is the test's own: how often the test's function was called, the delays the
policy's ``on_retry`` hook was handed, the breaker record in the store, the clock.
"""
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import (
    DURATION_BUCKETS, MAX_OPERATIONS, MAX_PROVIDERS, OTHER, OTHERS, CallStats, merge, summary)
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, NotFound, Unavailable)

FAST = {"base_delay": "20ms", "max_delay": "50ms"}


def _policy(store, key="lab:1", hooks=None, **option):
    return Policy(store, key, resolve_settings(dict(FAST, **option), environ={}), hooks=hooks)


class Flaky:
    """Raises the given errors in turn, then returns ``result``; counts calls."""

    def __init__(self, *errors, result="ok"):
        self.errors = list(errors)
        self.result = result
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


class Delays:
    """A hooks object that keeps the delays the policy waits between attempts."""

    def __init__(self):
        self.delays = []

    def on_retry(self, attempt, error, delay):
        self.delays.append(delay)


def test_retries_count_attempts_waits_and_failures(store):
    hooks = Delays()
    policy = _policy(store, hooks=hooks)
    fn = Flaky(Unavailable("down"), ConnectionResetError("reset"))
    assert policy.call(fn) == "ok"
    entry = policy.stats.entry()
    record = store.get("breaker", "lab:1")
    assert fn.calls == 3 and len(hooks.delays) == 2
    assert (entry["calls"], entry["attempts"], entry["retries"]) == (1, 3, 2)
    assert entry["backoff_seconds"] == pytest.approx(sum(hooks.delays), abs=0.001)
    assert entry["failures"] == record["failures_total"] == 2
    assert (entry["refused"], entry["failed_calls"], entry["transitions"]) == (0, 0, [])


def test_an_answer_is_an_attempt_but_no_failure(store):
    policy = _policy(store)
    fn = Flaky(NotFound("no vm web1"))
    with pytest.raises(NotFound):
        policy.call(fn)
    entry = policy.stats.entry()
    assert fn.calls == 1
    assert (entry["attempts"], entry["failures"], entry["failed_calls"], entry["retries"]) == (1, 0, 0, 0)


def test_opening_refusing_and_closing_are_seen(store):
    policy = _policy(store, max_attempts=1, failure_threshold=2, reset_timeout=0.2)
    fn = Flaky(Unavailable("down"), Unavailable("down"))
    for _dummy in range(2):
        with pytest.raises(Unavailable):
            policy.call(fn)
    with pytest.raises(BreakerOpen):
        policy.call(fn)
    record = store.get("breaker", "lab:1")
    assert fn.calls == 2 and record["opened_total"] == 1 and record["rejected_total"] == 1
    entry = policy.stats.entry()
    assert (entry["calls"], entry["attempts"], entry["failures"], entry["refused"],
            entry["failed_calls"]) == (3, 2, 2, 1, 3)
    assert entry["transitions"] == [{"from": "closed", "to": "open", "count": 1}]
    time.sleep(0.25)
    assert policy.call(fn) == "ok"  # the probe closes it
    assert store.get("breaker", "lab:1")["state"] == "closed"
    assert policy.stats.entry()["transitions"] == [
        {"from": "closed", "to": "open", "count": 1}, {"from": "open", "to": "half_open", "count": 1},
        {"from": "half_open", "to": "closed", "count": 1}]


def test_another_processes_transition_is_not_this_tasks(store):
    other = _policy(store, max_attempts=1, failure_threshold=1)
    with pytest.raises(Unavailable):
        other.call(Flaky(Unavailable("down")))
    policy = _policy(store, max_attempts=1, failure_threshold=1)
    with pytest.raises(BreakerOpen):
        policy.call(Flaky())
    assert other.stats.entry()["transitions"] == [{"from": "closed", "to": "open", "count": 1}]
    entry = policy.stats.entry()
    assert (entry["transitions"], entry["refused"], entry["attempts"]) == ([], 1, 0)


def test_rate_limit_waits_are_counted_with_their_time(store):
    # one turn a second: a call slowed by a loaded machine or a Sentinel round trip does not
    # outlast the turn, so the 2nd and the 3rd call still wait
    policy = _policy(store, rate_limit_qps=1, rate_limit_burst=1)
    began = time.monotonic()
    for _dummy in range(3):
        policy.call(lambda: 1)
    took = time.monotonic() - began
    entry = policy.stats.entry()
    assert entry["rate_limit_waits"] == 2  # burst 1: the 2nd and the 3rd wait for their turn
    assert 1.0 <= entry["rate_limit_seconds"] <= took


def test_a_failed_look_before_retry_is_an_attempt(store):
    policy = _policy(store, max_attempts=2)

    def look():
        raise Unavailable("still down")

    fn = Flaky(Unavailable("down"))
    with pytest.raises(Unavailable):
        policy.call(fn, op_class="mutating", look=look)
    entry = policy.stats.entry()
    assert fn.calls == 1 and entry["attempts"] == 2 and entry["failures"] == 2


def test_summary_adds_up_one_key_and_bounds_the_keys():
    stats = []
    for index in range(MAX_PROVIDERS + 5):
        item = CallStats("libvirt:hv%03d" % index)
        item.on_call()
        item.on_attempt()
        item.on_transition("closed", "open")
        stats.append(item)
    again = CallStats("libvirt:hv000")
    again.on_call()
    again.on_retry(0.25)
    stats.append(again)
    out = summary(stats)
    assert len(out) == MAX_PROVIDERS + 1
    assert out["libvirt:hv000"]["calls"] == 2 and out["libvirt:hv000"]["backoff_seconds"] == 0.25
    assert out[OTHERS]["calls"] == 5
    assert out[OTHERS]["transitions"] == [{"from": "closed", "to": "open", "count": 5}]


def test_merge_ignores_what_is_not_a_count():
    total = merge({}, {"calls": 2, "attempts": True, "retries": -1, "refused": "3",
                       "transitions": [{"from": "closed"}, "x", {"from": "open", "to": "closed", "count": 2}]})
    assert (total["calls"], total["attempts"], total["retries"], total["refused"]) == (2, 0, 0, 0)
    assert total["transitions"] == [{"from": "open", "to": "closed", "count": 2}]


def test_each_call_is_counted_by_operation_outcome_and_duration(store):
    policy = _policy(store, max_attempts=2, failure_threshold=5, timeout_describe="7s")
    waited = []
    for fn, operation in ((Flaky(), "describe"), (Flaky(NotFound("no vm")), "describe"),
                          (Flaky(Unavailable("down"), Unavailable("down")), "describe"),
                          (Flaky(), "list_vms")):
        began = time.monotonic()
        try:
            policy.call(fn, operation=operation)
        except (NotFound, Unavailable):
            pass
        waited.append(time.monotonic() - began)
    operations = policy.stats.entry()["operations"]
    assert set(operations) == {"describe", "list_vms"}
    describe = operations["describe"]
    assert describe["outcomes"] == {"ok": 1, "NotFound": 1, "Unavailable": 1}
    assert operations["list_vms"]["outcomes"] == {"ok": 1}
    assert sum(describe["buckets"]) == 3 and len(describe["buckets"]) == len(DURATION_BUCKETS) + 1
    # each call's own time is inside the time the test measured around it (longer when the
    # process is paused outside the call on a loaded machine): the total, and each call's bin,
    # at most the test's
    assert 0 < describe["seconds"] <= sum(waited[:3]) + 0.002  # three sums rounded to 1 ms
    assert describe["timeout"] == 7.0
    recorded = sorted(index for index, count in enumerate(describe["buckets"]) for _n in range(count))
    measured = sorted(len([bound for bound in DURATION_BUCKETS if bound < seconds])
                      for seconds in waited[:3])
    assert all(inner <= outer for inner, outer in zip(recorded, measured)), (recorded, measured)


def test_a_refused_call_ends_with_breaker_open(store):
    policy = _policy(store, max_attempts=1, failure_threshold=1)
    for _dummy in range(2):
        with pytest.raises((Unavailable, BreakerOpen)):
            policy.call(Flaky(Unavailable("down")), operation="power")
    assert policy.stats.entry()["operations"]["power"]["outcomes"] == {"Unavailable": 1, "BreakerOpen": 1}


def test_durations_fall_in_the_bins_prometheus_means():
    stats = CallStats("lab:1")
    for seconds in (0.0, DURATION_BUCKETS[0], DURATION_BUCKETS[0] + 0.001, DURATION_BUCKETS[-1] + 1):
        stats.on_call_end("describe", "ok", seconds, 5.0)
    buckets = stats.entry()["operations"]["describe"]["buckets"]
    # a bin holds what is at most its bound ("le"), the last one what is longer than them all
    assert buckets[0] == 2 and buckets[1] == 1 and buckets[-1] == 1 and sum(buckets) == 4


def test_labels_only_come_from_the_code():
    """Operation names and outcomes from a result that something else changed never become a
    label value that could carry a secret: they fold into OTHER; operations are bounded."""
    secret = "https://admin:hunter2@vc.example"
    total = merge({}, {"operations": {
        secret: {"outcomes": {"ok": 1}},
        "describe": {"outcomes": {"ok": 2, secret: 1, "Unavailable": 1, "BreakerOpen": "x"},
                     "buckets": [1, 2], "seconds": -3},
    }})
    assert set(total["operations"]) == {OTHER, "describe"}
    assert total["operations"]["describe"]["outcomes"] == {"ok": 2, OTHER: 1, "Unavailable": 1, "BreakerOpen": 0}
    assert total["operations"]["describe"]["seconds"] == 0.0
    many = merge({}, {"operations": dict(("op%d" % i, {"outcomes": {"ok": 1}}) for i in range(MAX_OPERATIONS + 3))})
    assert len(many["operations"]) == MAX_OPERATIONS + 1
    assert many["operations"][OTHER]["outcomes"] == {"ok": 3}
