"""vSphere hosts as hypervisors: their verdicts, one event per host change, and a vCenter that
does not answer, which says nothing about its hosts."""
import threading
from types import SimpleNamespace

from ansible_collections.resilient.virt.plugins.module_utils._events.announcer import (
    NAMESPACE, Announcer)
from ansible_collections.resilient.virt.plugins.module_utils._events.watcher import ProviderWatcher
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils._state.lease import Lease
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import open_provider
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.events import (
    HostWatch, host_verdict)

VC = "vsphere:vc1"
PROVIDERS = {VC: {"name": "vc1", "key": VC}}
ESX = VC + "/esx1"


class Instance:
    def __init__(self, store, owner):
        self.emitted, self.logged = [], []
        self.lease = Lease(store, "group", owner, 60)
        self.announcer = Announcer(PROVIDERS, lambda: store, self.lease, "group", owner,
                                   self.emitted.append, self.logged.append)

    def take(self, *messages):
        """Renew the lease, then handle ``messages`` as the run loop does."""
        self.announcer._renew()
        for message in messages:
            self.announcer._handle(message)
        return [(e["type"], e["hypervisor"]) for e in self.emitted]


def test_verdicts_a_host_is_down_only_when_not_responding_unasked():
    assert host_verdict("connected", "poweredOn") == "up"
    assert host_verdict("notResponding", "poweredOn") == "down"
    assert host_verdict("notResponding", "unknown") == "down"
    assert host_verdict("notResponding", "standBy") is None  # vCenter put it to sleep
    assert host_verdict("disconnected", "poweredOn") is None  # an administrator's act


def _update(moid, kind="modify", **changes):
    names = {"name": "name", "connection": "runtime.connectionState", "power": "runtime.powerState"}
    change_set = [SimpleNamespace(name=names[k], val=v) for k, v in changes.items()]
    item = SimpleNamespace(obj=SimpleNamespace(_moId=moid), kind=kind, changeSet=change_set)
    return SimpleNamespace(filterSet=[SimpleNamespace(objectSet=[item])], version="1")


def test_a_host_watch_reports_each_change_of_verdict_once():
    watch = HostWatch(provider=None, report=None)
    assert watch._apply(_update("host-1", "enter", name="esx1", connection="connected",
                                power="poweredOn")) == [("up", "esx1", {})]
    down = watch._apply(_update("host-1", connection="notResponding"))
    assert down == [("down", "esx1", "vCenter reports host esx1 notResponding (power state "
                                     "poweredOn)")]
    assert watch._apply(_update("host-1", power="unknown")) == []  # still down
    assert watch._apply(_update("host-1", connection="disconnected")) == []  # not judged
    assert watch._apply(_update("host-1", connection="connected")) == [("up", "esx1", {})]
    assert watch._apply(_update("host-1", connection="disconnected")) == []
    assert watch._apply(_update("host-1", connection="connected")) == []  # up all along


def test_each_host_change_is_one_event_naming_the_host():
    store = MemoryStore()
    one = Instance(store, "a")
    assert one.take(("up", ESX, 1, {}), ("up", VC + "/esx2", 1, {})) == []
    assert one.take(("down", ESX, 5, "vCenter reports host esx1 notResponding"),
                    ("down", ESX, 6, "vCenter reports host esx1 notResponding"),
                    ("up", ESX, 9, {})) == [("hypervisor_unreachable", "esx1"),
                                            ("hypervisor_reachable", "esx1")]
    assert {e["provider"] for e in one.emitted} == {"vc1"}
    assert {e["provider_key"] for e in one.emitted} == {VC}
    assert store.get(NAMESPACE, "group/" + ESX)["reachable"] is True


def test_a_vcenter_that_does_not_answer_is_logged_and_its_hosts_are_not_announced():
    store = MemoryStore()
    one = Instance(store, "a")
    one.take(("up", ESX, 1, {}))
    assert one.take(("unanswered", VC, 2, "cannot reach vSphere endpoint vc1")) == []
    assert "nothing is announced about its hypervisors" in one.logged[-1]
    assert store.get(NAMESPACE, "group/" + VC) is None
    assert store.get(NAMESPACE, "group/" + ESX)["reachable"] is True


def test_a_new_lease_holder_repeats_a_host_outage_that_lasts():
    store = MemoryStore()
    first = Instance(store, "a")
    first.take(("down", ESX, 1, "vCenter reports host esx1 notResponding"))
    first.lease.release()
    later = Instance(store, "b")
    later.take(("down", ESX, 7, "vCenter reports host esx1 notResponding"))
    assert [(e["type"], e["repeated"]) for e in later.emitted] == [("hypervisor_unreachable", True)]
    assert later.emitted[0]["since"] == first.emitted[0]["since"]


def test_a_watcher_reports_a_vcenter_it_cannot_reach_as_unanswered():
    settings = resolve_settings({"base_delay": 0.1, "max_delay": 0.2, "timeout_validate": 5},
                                environ={})
    config = {"type": "vsphere", "name": "vc1", "host": "127.0.0.1", "port": 1,
              "protocol": "http", "username": "u", "password": "p-Secret-42"}
    guarded = open_provider(config, settings, MemoryStore(), environ={})
    stopping, messages = threading.Event(), []

    def report(message):
        messages.append(message)
        stopping.set()

    watcher = ProviderWatcher(guarded, settings, report, stopping)
    watcher.run()
    assert [(kind, key) for kind, key, _at, _observed in messages] == [("unanswered", VC)]
    assert "p-Secret-42" not in repr(messages)
