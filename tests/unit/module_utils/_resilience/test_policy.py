"""Policy: the order of checks per attempt, retries, look-before-retry, timeouts and hooks."""
import threading
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    CircuitBreaker)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, Internal, NotFound, RateLimit, StoreUnavailable, Timeout, Unavailable, VirtError)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy
from ansible_collections.resilient.virt.plugins.module_utils._resilience.rate_limit import RateLimiter

FAST = {"base_delay": "1ms", "max_delay": "5ms"}


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


def test_success_passes_through_breaker_and_limiter(store):
    policy = _policy(store, rate_limit_qps=1000)
    assert policy.call(lambda: 42) == 42
    assert isinstance(policy.breaker, CircuitBreaker) and policy.breaker.name == "lab:1"
    assert isinstance(policy.limiter, RateLimiter) and policy.limiter.key == "lab:1"
    assert policy.breaker.snapshot()["successes_total"] == 1
    assert store.get("ratelimit", "lab:1") is not None


def test_retryable_failures_are_retried_and_counted(store):
    policy = _policy(store)
    fn = Flaky(Unavailable("down"), ConnectionResetError("reset"))
    assert policy.call(fn) == "ok"
    snap = policy.breaker.snapshot()
    assert fn.calls == 3
    assert (snap["failures_total"], snap["successes_total"], snap["consecutive_failures"]) == (
        2, 1, 0)


def test_non_retryable_error_fails_at_once(store):
    policy = _policy(store)
    fn = Flaky(NotFound("no vm web1"))
    with pytest.raises(NotFound) as info:
        policy.call(fn)
    assert fn.calls == 1 and info.value.details["attempts"] == 1
    assert policy.breaker.snapshot()["successes_total"] == 1


def test_attempts_exhausted_raise_the_last_classified_error(store):
    policy = _policy(store, max_attempts=3, failure_threshold=10)
    fn = Flaky(*[ConnectionRefusedError("refused")] * 5)
    with pytest.raises(Unavailable) as info:
        policy.call(fn)
    assert fn.calls == 3 and info.value.details["attempts"] == 3
    assert isinstance(info.value.cause, ConnectionRefusedError)
    assert policy.breaker.snapshot()["failures_total"] == 3


def test_open_breaker_fails_fast_without_calling(store):
    policy = _policy(store)
    policy.breaker.force_open()
    fn = Flaky()
    with pytest.raises(BreakerOpen) as info:
        policy.call(fn)
    assert fn.calls == 0 and info.value.details["attempts"] == 1
    assert policy.breaker.snapshot()["rejected_total"] == 1


def test_breaker_opening_mid_call_stops_the_retries(store):
    policy = _policy(store, failure_threshold=2, max_attempts=5)
    fn = Flaky(*[Unavailable("down")] * 5)
    with pytest.raises(BreakerOpen):
        policy.call(fn)
    assert fn.calls == 2


def test_look_prevents_doing_the_work_twice(store):
    """The work succeeds but its answer is lost; look sees it done and the work is not redone."""
    policy = _policy(store, max_attempts=5)
    created = []
    looks = []

    def create():
        created.append("web1")
        raise Unavailable("connection reset after the request was sent")

    def look():
        looks.append(len(created))
        return ("web1" in created, {"name": "web1"})

    assert policy.call(create, op_class="mutating", name="create", look=look) == {"name": "web1"}
    assert created == ["web1"]
    assert looks == [1]  # not before the first attempt, once before the second


def test_look_not_done_lets_the_attempt_run(store):
    policy = _policy(store)
    fn = Flaky(Unavailable("down"), result="created")
    looks = []
    result = policy.call(fn, op_class="mutating", look=lambda: looks.append(1) or (False, None))
    assert result == "created" and fn.calls == 2 and looks == [1]


def test_hung_call_times_out_and_counts_against_the_breaker(store):
    policy = _policy(store, timeout_describe="200ms", max_attempts=2)  # no overall deadline
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(Timeout, match="describe web1 did not answer within 0.2s"):
        policy.call(lambda: release.wait(30), name="describe web1")
    release.set()
    assert time.monotonic() - started < 0.4 + 2
    assert policy.breaker.snapshot()["failures_total"] == 2


# A deadline of 1.5 s cuts a call waiting 30 s and leaves the store's own reads time to answer
# on a loaded machine (a Redis Cluster's first round trips took over 0.3 s under a load of 12).
def test_local_deadline_cut_gives_no_verdict(store):
    # 3 s: the store's reads before the call (a Redis Cluster among them) fit in it on a
    # machine loaded by a whole suite, so that the call itself is what the deadline cuts
    policy = _policy(store, deadline="3s", timeout_describe="10s", half_open_max_calls=1)
    release = threading.Event()
    started = time.monotonic()
    with pytest.raises(Timeout):
        policy.call(lambda: release.wait(30))
    release.set()
    assert time.monotonic() - started < 3 + 3
    snap = policy.breaker.snapshot()
    assert (snap["failures_total"], snap["successes_total"]) == (0, 0)


def test_local_deadline_cut_frees_a_probe_slot(store):
    policy = _policy(store, deadline="1500ms", timeout_describe="10s", reset_timeout="100ms",
                     max_attempts=1)
    policy.breaker.force_open()
    time.sleep(0.15)
    release = threading.Event()
    with pytest.raises(Timeout):
        policy.call(lambda: release.wait(30))
    release.set()
    snap = policy.breaker.snapshot()
    assert (snap["state"], snap["probes_in_flight"]) == ("half_open", 0)
    assert policy.call(lambda: "probe ok") == "probe ok"
    assert policy.breaker.snapshot()["state"] == "closed"


def test_rate_limit_wait_beyond_the_deadline_raises_rate_limit(store):
    # a turn of 4 s and a deadline of 1 s: time enough for the store to answer on a loaded
    # machine, too little for the turn however long the first call took
    policy = _policy(store, rate_limit_qps=0.25, rate_limit_burst=1, deadline="1s",
                     retry_preset="none")
    assert policy.call(lambda: 1) == 1
    fn = Flaky()
    with pytest.raises(RateLimit) as info:
        policy.call(fn)
    assert fn.calls == 0 and info.value.retry_after > 2.0


def test_hooks_classify_observe_and_see_retries(store):
    class ProviderDown(Exception):
        pass

    events = []

    class Hooks:
        def classify(self, exc):
            return Unavailable("provider says: %s" % exc) if isinstance(exc, ProviderDown) else None

        def on_retry(self, attempt, error, delay):
            events.append(("retry", attempt.number, error.type))

        def after_attempt(self, attempt, outcome, error, duration):
            events.append((outcome, attempt.number, error and error.type))
            assert duration >= 0

    policy = _policy(store, hooks=Hooks(), timeout_describe="200ms")
    fn = Flaky(ProviderDown("busy"), result="fine")
    assert policy.call(fn) == "fine"
    assert events == [("error", 1, "Unavailable"), ("retry", 1, "Unavailable"), ("ok", 2, None)]
    del events[:]
    release = threading.Event()
    with pytest.raises(Timeout):
        _policy(store, key="lab:2", hooks=Hooks(), timeout_describe="100ms",
                max_attempts=1).call(lambda: release.wait(30))
    release.set()
    assert events == [("timeout", 1, "Timeout")]


def test_unknown_exception_is_internal_and_not_retried(store):
    policy = _policy(store)
    fn = Flaky(KeyError("bug"))
    with pytest.raises(Internal) as info:
        policy.call(fn)
    assert fn.calls == 1 and isinstance(info.value.cause, KeyError)
    assert isinstance(info.value, VirtError)


def test_without_deadline_every_attempt_gets_its_full_timeout(store):
    policy = _policy(store, timeout_describe="150ms", max_attempts=3, failure_threshold=10)
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.5)

    with pytest.raises(Timeout, match="within 0.15s"):
        policy.call(slow)
    assert len(calls) == 3
    assert policy.breaker.snapshot()["failures_total"] == 3


def test_unknown_operation_class(store):
    with pytest.raises(ValueError, match="operation class"):
        _policy(store).call(lambda: 1, op_class="bogus")


# --- the state store inside the call's bounds ----------------------------------------------

@pytest.mark.parametrize("option, bound", [
    ({"deadline": "1s"}, 1.0),                      # the call's deadline bounds the store
    ({"store_timeout": "500ms"}, 0.5),              # no deadline: the store's own limit
    ({"deadline": "10s", "store_timeout": "500ms"}, 0.5),
])
def test_a_locked_store_costs_the_call_no_more_than_its_bounds(tmp_path, write_lock, option,
                                                               bound):
    """Reading the breaker does not need the write lock (WAL): the provider answers, and only
    recording the outcome waits for the lock, within the call's bounds, then gives up."""
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    path = str(tmp_path / "state.db")
    settings = resolve_settings(dict(FAST, **option), environ={})
    store = open_store("sqlite://" + path, environ={}, timeout=settings.store_timeout)
    policy = Policy(store, "lab:1", settings)
    fn = Flaky()
    began = time.monotonic()
    with write_lock(path):
        assert policy.call(fn) == "ok"
    elapsed = time.monotonic() - began
    # one wait of the bound, with room for a loaded machine; the store's own 15 s wait, which
    # this guards against, is far beyond it
    assert bound * 0.8 <= elapsed < bound + 1.5, elapsed
    assert fn.calls == 1
    assert "not recorded in its circuit breaker" in policy.warnings[0], policy.warnings
    store.close()


def test_a_store_that_cannot_be_read_fails_the_call_before_the_provider(tmp_path):
    """A damaged store fails the call at once: the provider is never called, nothing is
    retried, and the error names the store."""
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    path = tmp_path / "state.db"
    store = open_store("sqlite://%s" % path, environ={})
    store.close()  # the next operation opens the file again, and finds it damaged
    path.write_bytes(b"\xff" * 8192)
    fn = Flaky()
    began = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        _policy(store, "lab:1").call(fn)
    assert time.monotonic() - began < 1.0
    assert fn.calls == 0
    assert info.value.details["attempts"] == 1
    assert "sqlite://%s" % path in str(info.value)


def test_a_store_failure_is_not_a_provider_failure(tmp_path):
    """It neither counts against the breaker nor goes through the provider's retries."""
    from ansible_collections.resilient.virt.plugins.module_utils.errors import (
        counts_against_breaker)

    err = StoreUnavailable("sqlite:///x", "is unavailable")
    assert not err.retryable and not counts_against_breaker(err)
    assert err.to_dict()["type"] == "Unavailable"


def test_an_outcome_the_store_cannot_record_leaves_the_result_and_a_warning(tmp_path,
                                                                            write_lock):
    import contextlib

    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    path = str(tmp_path / "state.db")
    store = open_store("sqlite://" + path, environ={}, timeout=0.3)
    policy = Policy(store, "lab:1", resolve_settings(dict(FAST, store_timeout="300ms"), environ={}))
    with contextlib.ExitStack() as stack:

        def provider_call():  # the store locks up while the provider works
            stack.enter_context(write_lock(path))
            return 42

        assert policy.call(provider_call) == 42
    assert len(policy.warnings) == 1
    assert "not recorded in its circuit breaker" in policy.warnings[0]
    assert "sqlite://%s" % path in policy.warnings[0]
    store.close()


def test_a_probe_holds_its_slot_only_for_its_own_operation(store):
    """A half-open probe's lease is its attempt's time limit plus the store's, not the largest
    operation timeout: a probe whose process died blocks a describe for about 35 s, not 250 s."""
    policy = _policy(store, failure_threshold=1, reset_timeout="1ms", retry_preset="none")
    with pytest.raises(Unavailable):
        policy.call(Flaky(Unavailable("down")), op_class="describe")
    time.sleep(0.01)
    seen = {}

    def probe():
        seen.update(store.get("breaker", "lab:1")["probes"])
        return "ok"

    before = store.now()
    policy.call(probe, op_class="describe")
    assert len(seen) == 1
    assert 34.0 <= list(seen.values())[0] - before <= 35.5  # timeout_describe 30 s + store_timeout 5 s
