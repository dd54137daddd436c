"""SpanLog: what a Policy records of each call for traces, and when it records nothing."""
import threading

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience import spans as spans_module
from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils._resilience.spans import (
    RECORD_ENV, SpanLog, span_log)
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils.errors import BreakerOpen, NotFound, Unavailable

SETTINGS = {"base_delay": "1ms", "max_delay": "5ms", "max_attempts": 2, "failure_threshold": 2}


@pytest.fixture
def store():
    """What is recorded does not depend on the store: the memory store (the stores themselves
    are tested under every backend in test_policy.py and test_breaker.py)."""
    return MemoryStore("spans")


def _policy(store, spans, key="lab:1"):
    return Policy(store, key, resolve_settings(SETTINGS, environ={}), spans=spans)


def _fail(error):
    def fn():
        raise error
    return fn


def _names(record):
    return [event[0] for event in record["events"]]


@pytest.mark.parametrize("value, records", [("true", True), ("1", True), ("false", False),
                                            ("", False), (None, False)])
def test_a_task_records_only_when_its_environment_asks(value, records):
    environ = {} if value is None else {RECORD_ENV: value}
    assert isinstance(span_log(environ), SpanLog) is records


def test_retries_refusal_and_the_breaker_opening_are_recorded_call_by_call(store):
    spans = SpanLog()
    policy = _policy(store, spans)
    assert policy.call(lambda: 1, operation="describe") == 1
    with pytest.raises(Unavailable):
        policy.call(_fail(Unavailable("down")), operation="power", op_class="mutating")
    with pytest.raises(BreakerOpen):
        policy.call(lambda: 1, operation="describe")
    ok, down, refused = spans.result()["spans"]
    assert (ok["operation"], ok["outcome"], ok["attempts"], _names(ok)) == ("describe", "ok", 1, ["attempt"])
    assert ok["start"] <= ok["events"][0][1] <= ok["end"]
    assert (down["outcome"], down["attempts"], down["retries"], down["breaker_state"]) == (
        "Unavailable", 2, 1, "open")
    assert _names(down) == ["attempt", "retry", "breaker_transition", "attempt"]
    assert down["events"][1][2]["error_type"] == "Unavailable"
    assert down["events"][2][2] == {"from": "closed", "to": "open"}
    assert down["timeout"] == policy.settings.timeout_for("mutating")
    assert (refused["outcome"], refused["refused"], refused["attempts"], refused["breaker_state"]) == (
        "BreakerOpen", True, 0, "open")
    assert refused["events"][0][0] == "breaker_refused" and refused["events"][0][2] == {"state": "open"}
    # the counts agree with the task's resilience result
    entry = policy.stats.entry()
    assert sum(r["attempts"] for r in (ok, down, refused)) == entry["attempts"]
    assert sum(r["retries"] for r in (ok, down, refused)) == entry["retries"]


def test_an_answer_is_recorded_with_its_type(store):
    spans = SpanLog()
    with pytest.raises(NotFound):
        _policy(store, spans).call(_fail(NotFound("no vm")), operation="describe")
    [record] = spans.result()["spans"]
    assert (record["outcome"], record["attempts"], record["retries"]) == ("NotFound", 1, 0)


def test_calls_beyond_the_limit_are_counted_not_kept(store, monkeypatch):
    monkeypatch.setattr(spans_module, "MAX_SPANS", 2)
    spans = SpanLog()
    policy = _policy(store, spans)
    for _call in range(5):
        policy.call(lambda: 1)
    assert (len(spans.result()["spans"]), spans.result()["dropped"]) == (2, 3)


def test_calls_in_threads_keep_their_own_records(store):
    spans = SpanLog()
    policies = [_policy(store, spans, key="lab:%d" % n) for n in range(4)]
    barrier = threading.Barrier(len(policies))

    def call(policy):
        def fn():
            barrier.wait(timeout=10)
            return 1
        policy.call(fn, operation="describe")

    threads = [threading.Thread(target=call, args=(p,)) for p in policies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = spans.result()["spans"]
    assert sorted(r["provider"] for r in records) == ["lab:%d" % n for n in range(4)]
    assert all(_names(r) == ["attempt"] and r["attempts"] == 1 for r in records)


def test_without_a_span_log_nothing_is_recorded(store):
    policy = _policy(store, None)
    policy.call(lambda: 1)
    assert policy.spans is None and policy.stats.entry()["calls"] == 1
