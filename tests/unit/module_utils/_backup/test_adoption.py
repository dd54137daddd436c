"""Adoption of a record whose owner is gone, in a real state store: a failed adoption gives the
record back (its owner and lease as they were), a successful one keeps it to its outcome."""
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._backup import records
from ansible_collections.resilient.virt.plugins.module_utils._backup.ledger import Ledger
from ansible_collections.resilient.virt.plugins.module_utils._backup.operations import Operations
from ansible_collections.resilient.virt.plugins.module_utils.errors import BreakerOpen, Timeout

KEY = "libvirt:hv1"


class Provider:
    """A backup provider that answers each poll with the next of ``polls`` (an exception is
    raised); ``calls`` lists the operations asked."""

    key = KEY

    def __init__(self, *polls):
        self.polls = list(polls)
        self.calls = []

    def backup(self, operation, **arguments):
        self.calls.append(operation)
        answer = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer


def _orphan(store, handle=True, lease=-5.0):
    """An InProgress record whose owner ``dead`` let its lease run out."""
    now = store.now()
    record = records.new_record("r1", "backup", "vm1", KEY, "hv1", "dead", lease, now,
                                phase="InProgress", handle={"job": 1} if handle else None,
                                progress=40, errors=["an earlier error"])
    store.update(records.NAMESPACE, "r1", lambda current, _now: (record, None))
    return record


def _ops(store, provider, lease=120.0):
    ledger = Ledger(lambda: store, "adopter", lease, resource_timeout=5.0, sleep=lambda s: None)
    return Operations(provider, ledger, sleep=lambda s: None)


def _same_but_version(before, after):
    kept = set(before) - {"version", "updated_at"}
    return dict((k, after[k]) for k in kept) == dict((k, before[k]) for k in kept)


def test_an_adoption_refused_by_the_breaker_gives_the_record_back(store):
    left = _orphan(store)
    ops = _ops(store, Provider(BreakerOpen(KEY, time.time() + 30)))
    with pytest.raises(BreakerOpen):
        ops.adopt(store.get(records.NAMESPACE, "r1"), timeout=10)
    after = store.get(records.NAMESPACE, "r1")
    assert _same_but_version(left, after), after
    assert after["version"] == left["version"] + 2  # taken, then given back
    assert records.lease_expired(after, store.now())
    # the next run takes it over at once, and follows it to its outcome
    adopted = _ops(store, Provider({"state": "completed", "artifact": {"path": "/b"}})).adopt(
        after, timeout=10)
    assert adopted["phase"] == "Completed" and adopted["owner"] == "adopter"
    assert adopted["lease_until"] is None


def test_an_adoption_whose_wait_times_out_gives_the_record_back(store):
    left = _orphan(store)
    ops = _ops(store, Provider({"state": "running", "progress": 50}))
    with pytest.raises(Timeout) as info:
        ops.adopt(store.get(records.NAMESPACE, "r1"), timeout=0)
    after = store.get(records.NAMESPACE, "r1")
    assert (after["phase"], after["owner"], after["lease_until"]) == (
        "InProgress", "dead", left["lease_until"])
    shown = info.value.result["record"]  # the error's record says who holds it now
    assert (shown["owner"], shown["lease_until"]) == ("dead", left["lease_until"])


def test_a_record_without_handle_whose_final_write_fails_is_given_back(store, monkeypatch):
    left = _orphan(store, handle=False)
    ops = _ops(store, Provider({"state": "running"}))

    def failing_move(record, phase=None, **fields):
        raise Timeout("the store stayed down")

    monkeypatch.setattr(ops.ledger, "move", failing_move)
    with pytest.raises(Timeout):
        ops.adopt(store.get(records.NAMESPACE, "r1"), timeout=10)
    assert _same_but_version(left, store.get(records.NAMESPACE, "r1"))


def test_give_back_leaves_a_final_record_and_one_another_owner_holds(store):
    _orphan(store)
    taken = store.update(records.NAMESPACE, "r1", records.change("r1", "other", lease=60.0))[0]
    back, changed = store.update(records.NAMESPACE, "r1",
                                 records.give_back("r1", "adopter", {"owner": "dead"}))
    assert changed is False and back == taken
    done = store.update(records.NAMESPACE, "r1", records.change("r1", "other", "Completed"))[0]
    back, changed = store.update(records.NAMESPACE, "r1",
                                 records.give_back("r1", "other", {"owner": "dead"}))
    assert changed is False and back == done


def test_give_back_never_restores_a_lease_that_still_runs(store):
    _orphan(store, lease=-5.0)
    store.update(records.NAMESPACE, "r1", records.change("r1", "adopter", lease=60.0))
    back = store.update(records.NAMESPACE, "r1", records.give_back(
        "r1", "adopter", {"owner": "dead", "lease_until": "2999-01-01T00:00:00Z"}))[0]
    assert back["owner"] == "dead" and records.lease_expired(back, store.now())
