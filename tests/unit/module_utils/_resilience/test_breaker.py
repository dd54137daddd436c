"""Circuit breaker state machine on the real stores (each test runs on SQLite and Redis)."""
import re
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    CircuitBreaker, fact, list_breakers, shown)
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, Conflict, Internal, InvalidSpec, NotFound, NotSupported, QuotaExceeded,
    RateLimit, Timeout, Unauthorized, Unavailable)

DOWN = Unavailable("connection refused")


def _fail(breaker, err=DOWN, times=1):
    for _dummy in range(times):
        breaker.on_failure(breaker.before_call(), err)


def _succeed(breaker, times=1):
    for _dummy in range(times):
        breaker.on_success(breaker.before_call())


def _wait_half_open(breaker):
    time.sleep(max(0.0, breaker.snapshot()["half_open_at"] - breaker.store.now()) + 0.02)


def test_consecutive_failures_open_it(store):
    breaker = CircuitBreaker(store, "p:1", failure_threshold=3)
    _fail(breaker, times=2)
    _succeed(breaker)
    _fail(breaker, err=Timeout("slow"), times=2)
    assert breaker.snapshot()["state"] == "closed"
    before = store.now()
    _fail(breaker)
    snap = breaker.snapshot()
    assert snap["state"] == "open"
    assert snap["consecutive_failures"] == 3
    assert snap["failures_total"] == 5
    assert snap["successes_total"] == 1
    assert snap["opened_total"] == 1
    assert before <= snap["opened_at"] <= store.now()
    assert snap["half_open_at"] == snap["opened_at"] + 30.0
    assert snap["last_error"] == {"type": "Unavailable", "message": "connection refused"}


@pytest.mark.parametrize("err", [NotFound("x"), InvalidSpec("x"), Conflict("x"),
                                 Unauthorized("x"), NotSupported("x"), QuotaExceeded("x"),
                                 RateLimit("x")])
def test_answers_that_prove_the_provider_alive_count_as_success(store, err):
    breaker = CircuitBreaker(store, "p:alive", failure_threshold=2)
    _fail(breaker)
    _fail(breaker, err=err)
    _fail(breaker)
    snap = breaker.snapshot()
    assert snap["state"] == "closed"
    assert (snap["consecutive_failures"], snap["failures_total"], snap["successes_total"]) == (
        1, 2, 1)


def test_internal_errors_give_no_verdict(store):
    breaker = CircuitBreaker(store, "p:int", failure_threshold=2)
    _fail(breaker)
    _fail(breaker, err=Internal("bug"))
    _fail(breaker, err=ValueError("bug in our code"))
    snap = breaker.snapshot()
    assert (snap["consecutive_failures"], snap["failures_total"], snap["successes_total"]) == (
        1, 1, 0)


def test_plain_exceptions_are_classified(store):
    breaker = CircuitBreaker(store, "p:raw", failure_threshold=2)
    _fail(breaker, err=ConnectionRefusedError("refused"), times=2)
    assert breaker.snapshot()["state"] == "open"


def test_open_breaker_refuses_with_the_half_open_time(store):
    breaker = CircuitBreaker(store, "p:open", failure_threshold=1, reset_timeout=60)
    _fail(breaker)
    half_open_at = breaker.snapshot()["half_open_at"]
    with pytest.raises(BreakerOpen) as info:
        breaker.before_call()
    err = info.value
    assert err.breaker == "p:open"
    assert err.half_open_at == half_open_at
    assert not err.retryable
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(half_open_at))
    assert when in str(err)
    seconds = float(re.search(r"in ([0-9.]+) s\)", str(err)).group(1))
    assert 58 <= seconds <= 60
    assert "connection refused" in str(err)


def test_rejections_do_not_push_back_half_open(store):
    # 5 rejections a few ms apart, well inside the 2 s before half-open even on a loaded machine
    breaker = CircuitBreaker(store, "p:rej", failure_threshold=1, reset_timeout=2.0)
    _fail(breaker)
    first = breaker.snapshot()
    for _dummy in range(5):
        with pytest.raises(BreakerOpen):
            breaker.before_call()
        time.sleep(0.005)
    snap = breaker.snapshot()
    assert snap["rejected_total"] == 5
    assert (snap["opened_at"], snap["half_open_at"]) == (first["opened_at"], first["half_open_at"])
    _wait_half_open(breaker)
    assert breaker.snapshot()["state"] == "half_open"
    assert breaker.before_call().probe is not None


def test_successful_probes_close_it(store):
    breaker = CircuitBreaker(store, "p:close", failure_threshold=1, reset_timeout=0.2,
                             success_threshold=2)
    _fail(breaker)
    _wait_half_open(breaker)
    _succeed(breaker)
    assert breaker.snapshot()["state"] == "half_open"
    _succeed(breaker)
    snap = breaker.snapshot()
    assert snap["state"] == "closed"
    assert snap["consecutive_failures"] == 0 and snap["opened_at"] is None
    assert breaker.before_call().probe is None


def test_failed_probe_reopens_with_a_new_opened_at(store):
    breaker = CircuitBreaker(store, "p:reopen", failure_threshold=1, reset_timeout=0.2)
    _fail(breaker)
    first = breaker.snapshot()
    _wait_half_open(breaker)
    _fail(breaker, err=Timeout("slow"))
    snap = breaker.snapshot()
    assert snap["state"] == "open"
    assert snap["opened_at"] > first["opened_at"]
    assert snap["opened_total"] == 2
    with pytest.raises(BreakerOpen):
        breaker.before_call()


def test_half_open_admits_at_most_max_probes(store):
    breaker = CircuitBreaker(store, "p:probes", failure_threshold=2, reset_timeout=0.2,
                             half_open_max_calls=2)
    _fail(breaker, times=2)
    _wait_half_open(breaker)
    first, second = breaker.before_call(), breaker.before_call()
    assert first.probe and second.probe and first.probe != second.probe
    with pytest.raises(BreakerOpen, match="half-open and its 2 probe slot"):
        breaker.before_call()
    assert breaker.snapshot()["probes_in_flight"] == 2
    breaker.release(first)
    snap = breaker.snapshot()
    assert (snap["state"], snap["probes_in_flight"], snap["rejected_total"]) == (
        "half_open", 1, 1)
    third = breaker.before_call()
    breaker.on_success(third)
    assert breaker.snapshot()["state"] == "closed"
    breaker.on_failure(second, DOWN)  # a stale probe's failure does not reopen it
    snap = breaker.snapshot()
    assert (snap["state"], snap["consecutive_failures"]) == ("closed", 1)


def test_probe_lease_expiry_frees_the_slot(store):
    lease = 4.0  # room to see the slot held on a loaded machine
    breaker = CircuitBreaker(store, "p:lease", failure_threshold=1, reset_timeout=0.1,
                             probe_lease=lease)
    _fail(breaker)
    _wait_half_open(breaker)
    # the lease starts at the store's time of the update inside before_call(): between these two
    leased_at = breaker.store.now()
    breaker.before_call()  # this probe's process "dies": no outcome ever comes
    leased_by = breaker.store.now()
    with pytest.raises(BreakerOpen):
        breaker.before_call()
    assert breaker.store.now() < leased_at + lease, "too slow to see the slot held: rerun"
    time.sleep(max(0.0, leased_by + lease - breaker.store.now()) + 0.05)
    assert breaker.snapshot()["probes_in_flight"] == 0
    breaker.on_success(breaker.before_call())
    assert breaker.snapshot()["state"] == "closed"


def test_reset_closes_and_keeps_totals(store):
    breaker = CircuitBreaker(store, "p:reset", failure_threshold=2)
    _fail(breaker, times=2)
    with pytest.raises(BreakerOpen):
        breaker.before_call()
    breaker.reset()
    snap = breaker.snapshot()
    assert snap["state"] == "closed"
    assert snap["consecutive_failures"] == 0
    assert (snap["failures_total"], snap["opened_total"], snap["rejected_total"]) == (2, 1, 1)


def test_force_open_opens_now_and_half_opens_after_reset_timeout(store):
    breaker = CircuitBreaker(store, "p:force", reset_timeout=1.0)
    before = store.now()
    breaker.force_open()
    snap = breaker.snapshot()
    assert snap["state"] == "open" and snap["opened_total"] == 1
    assert before <= snap["opened_at"] and snap["half_open_at"] == snap["opened_at"] + 1.0
    with pytest.raises(BreakerOpen):
        breaker.before_call()
    _wait_half_open(breaker)
    breaker.on_success(breaker.before_call())
    assert breaker.snapshot()["state"] == "closed"


def test_list_snapshots(store):
    for name in ("b:2", "b:1"):
        _fail(CircuitBreaker(store, name, failure_threshold=1, reset_timeout=120))
    listed = list_breakers(store)
    assert [s["name"] for s in listed] == ["b:1", "b:2"]
    assert all(s["state"] == "open" and s["reset_timeout"] == 120 for s in listed)
    assert CircuitBreaker(store, "b:1").snapshot()["opened_total"] == listed[0]["opened_total"]


@pytest.mark.parametrize("field, value", [("failure_threshold", 0), ("reset_timeout", -1),
                                          ("half_open_max_calls", 1.5),
                                          ("success_threshold", "x")])
def test_invalid_settings_name_the_field(sqlite_url, field, value):
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    with pytest.raises(InvalidSpec, match=field):
        CircuitBreaker(open_store(sqlite_url), "x", **{field: value})


@pytest.mark.parametrize("damage", [
    {"state": "open", "half_open_at": 1e300, "opened_at": 1e300},   # stored by an older version
    {"state": "open", "half_open_at": "soon"},
    {"state": "open", "half_open_at": None, "consecutive_failures": "x"},
    {"state": "melted", "probes": [1, 2], "rejected_total": None},
])
def test_a_damaged_record_never_keeps_the_breaker_open(store, damage):
    """A record written by a bug, by hand, or with a reset_timeout of 1e300 by an older
    version: the next call goes through (as a probe when the record said open)."""
    store.update("breaker", "lab:dmg", lambda cur, now: (dict(damage), None))
    breaker = CircuitBreaker(store, "lab:dmg", failure_threshold=2, reset_timeout=30)
    permit = breaker.before_call()
    breaker.on_success(permit)
    snap = breaker.snapshot()
    assert snap["state"] == "closed", snap
    assert list_breakers(store)[0]["name"] == "lab:dmg"


@pytest.mark.parametrize("start, wanted", [("closed", "open"), ("open", "closed"),
                                           ("failing", "closed"), ("open", "open"),
                                           ("closed", "closed")])
def test_an_operator_change_is_predicted_exactly_in_check_mode(store, start, wanted):
    """provider state=reset and circuit_breaker state=reset/open share set_state: the check-mode
    prediction is the same change applied in memory, so it matches what a real run writes."""
    def prepared(name):
        breaker = CircuitBreaker(store, name, failure_threshold=2, reset_timeout=60)
        if start == "open":
            _fail(breaker, times=2)
        elif start == "failing":
            _fail(breaker)
        else:
            _succeed(breaker)
        return breaker

    checked = prepared("b:check")
    predicted_changed, before, predicted = checked.set_state(wanted, check_mode=True)
    assert checked.snapshot() == before  # nothing written
    changed, _before, after = prepared("b:real").set_state(wanted)
    assert predicted_changed is changed is (start != wanted)
    timeless = ("name", "opened_at", "half_open_at")
    assert {k: v for k, v in predicted.items() if k not in timeless} == \
        {k: v for k, v in after.items() if k not in timeless}
    assert after["state"] == wanted


def test_results_show_times_in_rfc3339_and_the_fact_in_short_form(store):
    breaker = CircuitBreaker(store, "libvirt:shown", failure_threshold=1, reset_timeout=30.5)
    _fail(breaker)
    snap = breaker.snapshot()
    view = shown(snap)
    # oracle: the epochs, formatted here; half_open_at rounds up (no probe passes before it)
    assert view["opened_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(snap["opened_at"])))
    up = int(snap["half_open_at"]) + (snap["half_open_at"] % 1 > 0)
    assert view["half_open_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(up))
    assert fact(snap) == {"state": "open", "consecutive_failures": 1,
                          "half_open_at": view["half_open_at"],
                          "last_error": {"type": "Unavailable", "message": "connection refused"}}
    assert shown(CircuitBreaker(store, "libvirt:new").snapshot())["half_open_at"] is None
