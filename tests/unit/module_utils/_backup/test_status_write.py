"""Critical status writes: retried through store failures until resource_timeout, with a last
attempt at the deadline; other writes make one attempt; refusals are never retried."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._backup import status_write
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, StoreUnavailable, Timeout)


class Clock:
    """A clock that moves only when the code sleeps: the test's own timeline."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


class DeadStore:
    """A store whose every update fails like an unreachable one, noting when it was tried."""

    timeout = 5.0

    def __init__(self, clock, heal_at=None):
        self.clock = clock
        self.tried = []
        self.heal_at = heal_at

    def update(self, namespace, key, fn, timeout=None):
        self.tried.append(self.clock())
        if self.heal_at is not None and self.clock() >= self.heal_at:
            return fn(None, 0)[1]
        raise StoreUnavailable("sqlite:///x", "is locked")


def test_the_last_attempt_is_made_at_the_deadline_and_never_later():
    clock = Clock()
    store = DeadStore(clock)
    with pytest.raises(Timeout, match="not written within resource_timeout") as caught:
        status_write.write(lambda: store, "backups", "r1", lambda c, n: (c, None), True,
                           resource_timeout=600, sleep=clock.sleep, clock=clock)
    assert store.tried[-1] == pytest.approx(600.0)  # the last attempt, at the deadline
    assert max(store.tried) <= 600.0 + 1e-9
    # capped exponential backoff with up to 10 % jitter: 0.5, 1, 2, 4, 8, then 10 s at the cap
    gaps = [b - a for a, b in zip(store.tried, store.tried[1:])][:-1]
    for n, gap in enumerate(gaps):
        base = min(10.0, 0.5 * 2 ** n)
        assert base <= gap <= base * 1.1 + 1e-9
    assert 55 <= len(store.tried) <= 66  # keeps trying at the cap all the way
    assert caught.value.details["attempts"] == len(store.tried)


def test_a_store_that_heals_before_the_deadline_gets_the_write():
    clock = Clock()
    store = DeadStore(clock, heal_at=20.0)
    written = status_write.write(lambda: store, "backups", "r1", lambda c, n: ("new", "done"),
                                 True, resource_timeout=60, sleep=clock.sleep, clock=clock)
    assert written == "done" and 20.0 <= store.tried[-1] <= 31.0


def test_a_write_that_is_not_critical_makes_one_attempt():
    clock = Clock()
    store = DeadStore(clock)
    with pytest.raises(StoreUnavailable):
        status_write.write(lambda: store, "backups", "r1", lambda c, n: (c, None), False,
                           sleep=clock.sleep, clock=clock)
    assert len(store.tried) == 1 and clock.sleeps == []


def test_a_refusal_is_not_retried(sqlite_url):
    def refuse(current, now):
        raise Conflict("cannot move from phase Failed to Completed")

    clock = Clock()
    with pytest.raises(Conflict, match="Failed to Completed"):
        status_write.write(lambda: open_store(sqlite_url), "backups", "r1", refuse, True,
                           sleep=clock.sleep, clock=clock)
    assert clock.sleeps == []


def test_a_real_store_locked_by_another_connection_gets_the_write_when_it_is_released(
        tmp_path, write_lock):
    import threading
    import time

    path = tmp_path / "state.db"
    url = "sqlite://%s" % path
    open_store(url).update("backups", "r1", lambda c, n: ({"phase": "InProgress"}, None))
    released = []

    def hold():
        with write_lock(str(path)):
            time.sleep(2.0)
        released.append(time.monotonic())

    holder = threading.Thread(target=hold)
    holder.start()
    time.sleep(0.2)
    started = time.monotonic()
    status_write.write(lambda: open_store(url, timeout=0.3), "backups", "r1",
                       lambda c, n: (dict(c, phase="Completed"), None), True, resource_timeout=30)
    holder.join()
    assert time.monotonic() - started >= 1.5  # it waited for the lock holder
    assert open_store(url).get("backups", "r1") == {"phase": "Completed"}


def test_a_critical_write_that_runs_out_of_time_names_the_record_once():
    from ansible_collections.resilient.virt.plugins.module_utils._backup.ledger import Ledger

    clock = Clock()
    store = DeadStore(clock)
    ledger = Ledger(lambda: store, "owner-1", 60.0, resource_timeout=3.0, sleep=clock.sleep,
                    clock=clock)
    record = {"name": "bc-lock2", "phase": "InProgress", "kind": "backup"}
    with pytest.raises(Timeout) as caught:
        ledger.move(record, "Completed")
    message = caught.value.message
    assert message.count("bc-lock2") == 1, message
    assert message.startswith("the move to Completed of backup record bc-lock2 was not written"), message
