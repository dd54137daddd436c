"""Backup records in a real state store: leases, owners, versions and re-applied writes."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._backup import records
from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, InvalidSpec, NotFound


def _put(store, owner="me", lease=60.0, name="r1"):
    record = records.new_record(name, "backup", "vm1", "libvirt:hv1", "hv1", owner, lease,
                                store.now())
    store.update(records.NAMESPACE, name, lambda current, now: (record, None))
    return record


def _apply(store, fn, name="r1"):
    return store.update(records.NAMESPACE, name, fn)


def test_a_move_by_the_owner_raises_the_version_and_stamps_times(store):
    _put(store)
    new, changed = _apply(store, records.change("r1", "me", "InProgress", lease=60.0,
                                                handle={"job": 1}))
    assert changed and new["phase"] == "InProgress" and new["version"] == 2
    assert new["handle"] == {"job": 1} and new["started_at"] is not None
    done = _apply(store, records.change("r1", "me", "Completed", artifact={"path": "/b"}))[0]
    assert done["version"] == 3 and done["completed_at"] and done["lease_until"] is None
    assert store.get(records.NAMESPACE, "r1") == done


def test_re_applying_the_same_final_write_is_a_no_op(store):
    _put(store)
    _apply(store, records.change("r1", "me", "InProgress", lease=60.0))
    first = _apply(store, records.change("r1", "me", "Completed", progress=100))[0]
    again, changed = _apply(store, records.change("r1", "me", "Completed", progress=100))
    assert changed is False and again == first


def test_another_owner_is_refused_while_the_lease_runs(store):
    _put(store, owner="a", lease=60.0)
    with pytest.raises(Conflict, match="held by a until"):
        _apply(store, records.change("r1", "b", "InProgress", lease=60.0))
    assert store.get(records.NAMESPACE, "r1")["owner"] == "a"


def test_an_expired_lease_can_be_taken_over_and_then_the_old_owner_is_refused(store):
    _put(store, owner="a", lease=-1.0)  # expired already
    taken = _apply(store, records.change("r1", "b", lease=60.0))[0]
    assert taken["owner"] == "b" and parse_time(taken["lease_until"]) > store.now() + 50
    with pytest.raises(Conflict, match="held by b"):
        _apply(store, records.change("r1", "a", "InProgress", lease=60.0))


def test_an_operator_override_passes_a_held_lease_but_not_the_phase_rules(store):
    _put(store, owner="a", lease=60.0)
    new = _apply(store, records.change("r1", "operator", "Failed", override=True,
                                       reason="OperatorAborted"))[0]
    assert new["phase"] == "Failed" and new["reason"] == "OperatorAborted"
    with pytest.raises(Conflict, match="from phase Failed to Completed"):
        _apply(store, records.change("r1", "operator", "Completed", override=True))


def test_a_stale_version_is_refused(store):
    _put(store)
    _apply(store, records.change("r1", "me", "InProgress", lease=60.0))
    with pytest.raises(Conflict, match="version 2, expected 1"):
        _apply(store, records.change("r1", "me", lease=60.0, version=1))


def test_a_missing_record_is_not_found(store):
    with pytest.raises(NotFound):
        _apply(store, records.change("nope", "me", "Failed"), name="nope")


@pytest.mark.parametrize("name", ["", "-x", "a/b", "a b", "x" * 129, None, 5])
def test_bad_names_are_refused(name):
    with pytest.raises(InvalidSpec, match="name"):
        records.check_name(name)


def test_generated_names_are_valid_and_distinct():
    names = {records.new_name("backup", "web 1/é", 1795000000) for dummy in range(50)}
    assert len(names) == 50
    for name in names:
        assert records.check_name(name) and name.startswith("web_1_")
