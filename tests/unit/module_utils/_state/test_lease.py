"""The lease of _state/lease.py: one holder at a time, taken over once it runs out."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._state.lease import (
    MARGIN, NAMESPACE, Lease)
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils._state.sqlite import SQLiteStore


class ClockedStore(MemoryStore):
    """A memory store whose clock the test sets (``at``)."""

    at = 1000.0

    def now(self):
        return self.at


@pytest.fixture
def store():
    return ClockedStore()


def test_one_holder_at_a_time_and_renewal_keeps_it(store):
    first, second = Lease(store, "group", "a", 10), Lease(store, "group", "b", 10)
    assert first.hold() is True
    assert second.hold() is False
    store.at += 9
    assert first.hold() is True  # renewed: until moves on
    store.at += 9
    assert second.hold() is False
    record = store.get(NAMESPACE, "group")
    assert record["owner"] == "a" and record["until"] == store.at - 9 + 10
    assert record["term"] == 1 and record["since"] == 1000.0


def test_a_holder_that_stops_renewing_is_taken_over_with_a_new_term(store):
    first, second = Lease(store, "group", "a", 10), Lease(store, "group", "b", 10)
    first.hold()
    store.at += 10
    assert second.hold() is True
    assert first.hold() is False
    record = store.get(NAMESPACE, "group")
    assert (record["owner"], record["term"], record["since"]) == ("b", 2, store.at)
    assert (first.term, second.term) == (1, 2)  # each the term of its own last hold
    second.hold()
    assert second.term == 2  # renewed: the same term
    assert Lease(store, "group", "c", 10).holder()["owner"] == "b"


def test_release_lets_another_take_it_at_once(store):
    first, second = Lease(store, "group", "a", 10), Lease(store, "group", "b", 10)
    first.hold()
    second.release()  # not ours: nothing changes
    assert second.hold() is False
    first.release()
    assert first.valid() is False
    assert second.hold() is True
    assert Lease(store, "other", "a", 10).holder() is None


def test_valid_counts_from_before_the_update_less_the_margin(store):
    ticks = iter([50.0])
    lease = Lease(store, "group", "a", 10, clock=lambda: next(ticks))
    lease.hold()
    lease.clock = lambda: 50.0 + 10 * (1 - MARGIN) - 0.01
    assert lease.valid() is True
    lease.clock = lambda: 50.0 + 10 * (1 - MARGIN)
    assert lease.valid() is False
    Lease(store, "group", "b", 10).hold()  # refused: a still holds it in the store
    assert Lease(store, "group", "b", 10, clock=lambda: 0.0).valid() is False


def test_every_shared_store_keeps_one_holder(store_url):
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    shared = open_store(store_url)
    first, second = Lease(shared, "group", "a", 60), Lease(shared, "group", "b", 60)
    assert [first.hold(), second.hold()] == [True, False]
    assert second.holder()["owner"] == "a"
    first.release()
    assert [second.hold(), first.hold()] == [True, False]
    assert shared.get(NAMESPACE, "group")["term"] == 2


def test_two_processes_on_one_sqlite_file_agree(tmp_path):
    path = str(tmp_path / "state.db")
    first = Lease(SQLiteStore(path), "group", "a", 60)
    second = Lease(SQLiteStore(path), "group", "b", 60)
    assert [first.hold(), second.hold(), first.hold()] == [True, False, True]


def test_a_duration_of_zero_is_refused(store):
    with pytest.raises(ValueError):
        Lease(store, "group", "a", 0)
