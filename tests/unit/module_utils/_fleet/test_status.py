"""The per-VM status machine of vm_fleet: decisions, backoff, terminal errors, reset on success."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._fleet import status as st
from ansible_collections.resilient.virt.plugins.module_utils._fleet.desired import DesiredVM
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotSupported, QuotaExceeded, Timeout, Unauthorized, Unavailable)

NOW = 1_800_000_000.0
BACKOFF = st.Backoff(30, 3600, 5)


def vm(memory=64):
    return DesiredVM(0, "web1", "present", {"vcpus": 1, "memory_mb": memory},
                     {"type": "libvirt"}, "libvirt:h1", "h1")


def test_backoff_doubles_from_min_to_max():
    # worked by hand: 30, 60, 120, ... 1920, then capped at 3600
    assert [BACKOFF.delay(n) for n in range(1, 10)] == [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]
    assert st.Backoff(0.1, 60, 5).delay(1) == 0.1
    assert st.Backoff(10, 10, 5).delay(50) == 10  # no overflow, no growth past the cap


def test_new_and_changed_specs_are_reconciled_from_attempt_one():
    assert (st.decide(None, vm().spec_hash, NOW).kind, st.decide(None, "x", NOW).attempt) == \
        (st.RECONCILE, 1)
    failing = st.failed("o", vm(), Unavailable("down"), 3, NOW, BACKOFF)
    changed = st.decide(failing, vm(memory=128).spec_hash, NOW)
    assert (changed.kind, changed.attempt, changed.reason) == (st.RECONCILE, 1, "spec changed")


def test_done_is_untouched_incrementally_and_verified_in_full_runs():
    done = st.succeeded("o", vm(), {"state": "stopped"}, NOW)
    assert st.decide(done, vm().spec_hash, NOW + 1).kind == st.UNCHANGED
    assert st.decide(done, vm().spec_hash, NOW + 1, full=True).kind == st.VERIFY
    assert st.decide(done, vm().spec_hash, NOW + 1, retry_now=True).kind == st.UNCHANGED


def test_retryable_failure_waits_its_backoff_then_retries_with_the_next_attempt():
    record = st.failed("o", vm(), Unavailable("down"), 1, NOW, BACKOFF)
    assert (record["status"], record["attempts"], record["terminal"]) == ("error", 1, False)
    assert record["next_retry_at"] == NOW + 30
    assert record["error"] == {"type": "Unavailable", "message": "down"}
    assert st.decide(record, vm().spec_hash, NOW + 29.9, backoff=BACKOFF).kind == st.DEFERRED
    again = st.decide(record, vm().spec_hash, NOW + 30, backoff=BACKOFF)
    assert (again.kind, again.attempt) == (st.RECONCILE, 2)
    second = st.failed("o", vm(), Timeout("slow"), 2, NOW + 30, BACKOFF)
    assert second["next_retry_at"] == NOW + 30 + 60


def test_retry_now_skips_the_backoff():
    record = st.failed("o", vm(), Unavailable("down"), 1, NOW, BACKOFF)
    decision = st.decide(record, vm().spec_hash, NOW + 1, retry_now=True, backoff=BACKOFF)
    assert (decision.kind, decision.attempt) == (st.RECONCILE, 2)


@pytest.mark.parametrize("error", [InvalidSpec("bad"), Unauthorized("no"), NotSupported("no"),
                                   QuotaExceeded("full"), Conflict("owned")])
def test_terminal_errors_wait_for_a_spec_change_or_retry_now(error):
    record = st.failed("o", vm(), error, 1, NOW, BACKOFF)
    assert record["terminal"] is True and record["next_retry_at"] is None
    assert st.decide(record, vm().spec_hash, NOW + 10 ** 6, backoff=BACKOFF).kind == st.DEFERRED
    assert st.decide(record, vm().spec_hash, NOW, retry_now=True, backoff=BACKOFF).kind == st.RECONCILE
    assert st.decide(record, vm(memory=65).spec_hash, NOW, backoff=BACKOFF).kind == st.RECONCILE


def test_the_last_attempt_stops_automatic_retries():
    record = st.failed("o", vm(), Unavailable("down"), 5, NOW, BACKOFF)
    assert record["next_retry_at"] is None
    decision = st.decide(record, vm().spec_hash, NOW + 10 ** 6, backoff=BACKOFF)
    assert decision.kind == st.DEFERRED and "max_attempts" in decision.reason
    assert st.decide(record, vm().spec_hash, NOW, retry_now=True, backoff=BACKOFF).attempt == 6


def test_success_resets_the_attempts_and_the_error():
    done = st.succeeded("o", vm(), {"state": "running"}, NOW)
    assert (done["status"], done["attempts"], done["error"], done["next_retry_at"]) == \
        ("done", 0, None, None)
    assert done["observed"] == {"state": "running"} and done["spec_hash"] == vm().spec_hash


def test_spec_hash_ignores_key_order_and_sees_every_field():
    a = DesiredVM(0, "w", "present", {"vcpus": 1, "memory_mb": 64}, {}, "p", None)
    b = DesiredVM(5, "w", "present", {"memory_mb": 64, "vcpus": 1}, {"other": 1}, "p", "n")
    assert a.spec_hash == b.spec_hash  # index, provider settings and reference do not count
    for other in (DesiredVM(0, "w", "running", a.spec, {}, "p", None),
                  DesiredVM(0, "w", "present", dict(a.spec, tags=["x"]), {}, "p", None),
                  DesiredVM(0, "w", "present", a.spec, {}, "q", None)):
        assert other.spec_hash != a.spec_hash
