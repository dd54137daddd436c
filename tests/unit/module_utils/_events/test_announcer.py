"""The announcer: one event per change, by the lease holder only, nothing announced twice."""
import threading

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._events.announcer import (
    NAMESPACE, Announcer)
from ansible_collections.resilient.virt.plugins.module_utils._state.lease import Lease
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils.errors import StoreUnavailable

KEY = "libvirt:hv1"
PROVIDERS = {KEY: {"name": "hv1", "key": KEY}}


def vm(uuid, name, state, reason=None, unasked=False):
    return {"uuid": uuid, "name": name, "state": state, "reason": reason, "unasked": unasked}


class Instance:
    """One source instance on ``store``: its announcer and what it emitted."""

    def __init__(self, store, owner):
        self.emitted, self.logged = [], []
        self.lease = Lease(store, "group", owner, 60)
        self.announcer = Announcer(PROVIDERS, lambda: store, self.lease, "group", owner,
                                   self.emitted.append, self.logged.append)

    def take(self, *messages):
        """Renew the lease, then handle ``messages`` as the run loop does."""
        self.announcer._renew()
        for message in messages:
            self.announcer._observe(message)
            self.announcer._announce(message[1])
        return [(e["type"], e.get("vm")) for e in self.emitted]


@pytest.fixture
def store():
    return MemoryStore()


def up(at, *vms):
    return ("up", KEY, at, {v["uuid"]: v for v in vms})


def test_a_baseline_then_one_event_per_change(store):
    one = Instance(store, "a")
    assert one.take(up(1, vm("u1", "web", "running"))) == []
    events = one.take(("vm", KEY, 2, vm("u1", "web", "stopped", "failed", True)),
                      ("vm", KEY, 3, vm("u1", "web", "stopped", "failed", True)),
                      ("down", KEY, 4, "connection closed (eof)"),
                      ("down", KEY, 5, "connection closed (eof)"),
                      up(9, vm("u1", "web", "stopped", "failed", True)))
    assert events == [("vm_crashed", "web"), ("hypervisor_unreachable", None),
                      ("hypervisor_reachable", None)]
    back = one.emitted[-1]
    assert back["outage_seconds"] == 5 and back["unreachable_since"] == "1970-01-01T00:00:04Z"
    assert one.emitted[1]["observed"] == "connection closed (eof)"
    assert store.get(NAMESPACE, "group/" + KEY)["vms"] == {"u1": {"name": "web", "state": "stopped"}}


def test_stops_that_were_asked_for_are_recorded_silently(store):
    one = Instance(store, "a")
    one.take(up(1, vm("u1", "web", "running"), vm("u2", "db", "running")))
    assert one.take(("vm", KEY, 2, vm("u1", "web", "stopped", "destroyed")),
                    ("vm", KEY, 3, vm("u2", "db", "stopped", "guest shutdown", True)),
                    ("vm", KEY, 4, vm("u1", "web", "running")),
                    ("vm", KEY, 5, vm("u1", "web", "undefined"))) == [("vm_stopped", "db")]
    assert "u1" not in store.get(NAMESPACE, "group/" + KEY)["vms"]


def test_a_stop_missed_while_nobody_watched_is_announced_on_connect(store):
    first = Instance(store, "a")
    first.take(up(1, vm("u1", "web", "running")))
    first.lease.release()  # stopped
    later = Instance(store, "b")  # the same source started again: a new instance
    assert later.take(up(20, vm("u1", "web", "stopped", "crashed", True))) == [("vm_crashed", "web")]
    assert later.emitted[0]["observed"] == "state on connect"
    later.lease.release()
    again = Instance(store, "c")
    assert again.take(up(30, vm("u1", "web", "stopped", "crashed", True))) == []


def test_an_unreachable_provider_first_seen_is_announced(store):
    assert Instance(store, "a").take(("down", KEY, 1, "Connection refused")) == [
        ("hypervisor_unreachable", None)]


def test_only_the_lease_holder_announces_and_a_new_holder_announces_what_was_left(store):
    first, second = Instance(store, "a"), Instance(store, "b")
    baseline = up(1, vm("u1", "web", "running"), vm("u2", "db", "running"))
    first.take(baseline)
    second.take(baseline)
    crash = ("vm", KEY, 2, vm("u1", "web", "stopped", "failed", True))
    assert first.take(crash) == [("vm_crashed", "web")]
    assert second.take(crash) == []
    # the holder dies; the lease is given up (or runs out) and the other takes it over
    first.lease.release()
    assert second.take(("vm", KEY, 3, vm("u2", "db", "stopped", "failed", True))) == [
        ("vm_crashed", "db")]
    assert first.take(("down", KEY, 4, "eof")) == [("vm_crashed", "web")]  # not the holder


def test_a_store_failure_is_logged_and_announced_later(store):
    one = Instance(store, "a")
    one.take(up(1, vm("u1", "web", "running")))
    broken = threading.Event()
    real_update = store.update

    def update(namespace, *args, **kwargs):
        if broken.is_set() and namespace == NAMESPACE:
            raise RuntimeError("the store is gone")
        return real_update(namespace, *args, **kwargs)

    store.update = update
    broken.set()
    one.take(("vm", KEY, 2, vm("u1", "web", "stopped", "failed", True)))
    assert "the store is gone" in one.logged[-1]
    broken.clear()
    one.announcer._renew()  # the next renewal: no message needed
    # announced at least once: the event whose record was not written comes again
    assert [e["type"] for e in one.emitted] == ["vm_crashed", "vm_crashed"]


def test_the_lease_is_taken_again_on_the_store_opened_after_a_failure(store):
    class Failed(MemoryStore):
        def update(self, *args, **kwargs):
            raise StoreUnavailable("redis://x", "no answer")

    stores = [Failed(), store]
    one = Instance(store, "a")
    one.announcer.open_store = lambda: stores[0]
    one.announcer._renew()
    assert one.announcer.holding is False and "was not renewed" in one.logged[-1]
    stores.pop(0)
    assert one.take(up(1, vm("u1", "web", "running"))) == [] and one.announcer.holding is True


def test_a_new_lease_holder_announces_an_outage_that_lasts_again_once(store):
    """The instance that ran the reaction to an outage may have died with it: whoever takes the
    lease anew announces the outage again, repeated, with its first since; a renewal does not."""
    first = Instance(store, "a")
    first.take(up(1, vm("u1", "web", "running")), ("down", KEY, 2, "eof"))
    first.take(("down", KEY, 3, "eof"))  # renewed: the same term, nothing again
    assert first.emitted[0]["repeated"] is False and len(first.emitted) == 1
    first.lease.release()  # dies
    later = Instance(store, "b")
    assert later.take(("down", KEY, 9, "Connection refused")) == [("hypervisor_unreachable", None)]
    again = later.emitted[0]
    assert again["repeated"] is True and again["since"] == first.emitted[0]["since"]
    assert again["observed"] == "eof"
    assert later.take(("down", KEY, 10, "Connection refused")) == [("hypervisor_unreachable", None)]
    # a provider that answers again is not repeated to the next holder
    later.take(up(11, vm("u1", "web", "running")))
    later.lease.release()
    assert Instance(store, "c").take(up(12, vm("u1", "web", "running"))) == []
