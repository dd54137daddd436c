"""Fleet runs against libvirt's in-process test:///default driver and a SQLite state store.

The oracle is a libvirt connection of the test's own (which also keeps the driver's state alive)
and an observer plugin that counts every provider attempt, by operation.
"""
import threading
import xml.etree.ElementTree as ET

import pluggy
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._fleet import status as st
from ansible_collections.resilient.virt.plugins.module_utils._fleet.desired import desired_fleet
from ansible_collections.resilient.virt.plugins.module_utils._fleet.prune import PruneLimit
from ansible_collections.resilient.virt.plugins.module_utils._fleet.fleet_run import (
    FleetRun, Options, _interleave)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    CircuitBreaker)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, Unavailable)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
    open_provider, provider_key)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import OWNER_KEY

from provider_testing import TEST_URI, quick_settings

hookimpl = pluggy.HookimplMarker("resilient_virt")
MUTATING = ("create", "delete", "power", "reconfigure")
NS = "https://resilient.virt/xmlns/vm/1"


class Observer:
    """Counts attempts by operation, tracks calls in flight, and fails the names in ``failing``."""

    def __init__(self):
        self.calls = []
        self.failing = {}
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most_in_flight = 0
        self.hook_creates = None
        self.slow = {}  # operation -> seconds each attempt waits before the call

    @hookimpl
    def resilient_virt_before_call(self, provider, operation, arguments):
        name = arguments.get("name") or (arguments.get("spec") or {}).get("name")
        with self.lock:
            self.calls.append((operation, name))
        if operation in self.slow:
            threading.Event().wait(self.slow[operation])
        if operation == "create" and self.hook_creates is not None:
            self.hook_creates(name)
        if name in self.failing and operation in MUTATING:
            raise self.failing[name]

    @hookimpl
    def resilient_virt_after_call(self, operation):
        pass

    def count(self, *operations):
        return sum(1 for op, _name in self.calls if op in operations)


@pytest.fixture
def oracle():
    import libvirt

    conn = libvirt.open(TEST_URI)
    yield conn
    conn.close()


@pytest.fixture
def store(tmp_path):
    return open_store("sqlite://%s/state.db" % tmp_path)


@pytest.fixture
def observer():
    return Observer()


class Fleet:
    """Runs fleets of one owner on one test:///default provider, with a clock the test sets."""

    def __init__(self, store, observer, owner, prefix):
        self.store = store
        self.observer = observer
        self.owner = owner
        self.prefix = prefix
        self.now = 1_800_000_000.0
        self.config = {"type": "libvirt", "uri": TEST_URI, "name": "t-" + owner}
        self.settings = quick_settings()
        self.opened = []

    def names(self, count):
        return ["%s%d" % (self.prefix, i) for i in range(count)]

    def entries(self, count, **spec):
        return [dict({"name": name, "vcpus": 1, "memory_mb": 64}, **spec) for name in self.names(count)]

    def run(self, entries, **options):
        vms = desired_fleet(entries, self.config, lambda ref, path: dict(ref), provider_key)
        options.setdefault("backoff", st.Backoff(30, 3600, 3))
        options.setdefault("max_prune", PruneLimit("100%"))
        run = FleetRun(vms, Options(self.owner, **options), self.store, self._open,
                       clock=lambda: self.now)
        self.observer.calls.clear()
        try:
            outcomes = run.run()
        finally:
            while self.opened:  # as the module does when it exits
                self.opened.pop().close()
        return dict((o.vm.name, o) for o in outcomes), run

    def _open(self, config):
        provider = open_provider(config, self.settings, self.store, plugins=[self.observer])
        self.opened.append(provider)
        return provider

    def records(self):
        return self.store.items(st.NAMESPACE, self.owner + "|")


def domains(conn, prefix):
    return sorted(d.name() for d in conn.listAllDomains() if d.name().startswith(prefix))


def owner_of(conn, name):
    root = ET.fromstring(conn.lookupByName(name).XMLDesc(0))
    for item in root.iter("{%s}item" % NS):
        if item.get("key") == OWNER_KEY:
            return item.text
    return None


def memory_mib(conn, name):
    return conn.lookupByName(name).info()[1] // 1024


def outcomes_of(result):
    return dict((name, o.outcome) for name, o in result.items())


def test_create_then_nothing_then_only_what_changed(store, observer, oracle):
    fleet = Fleet(store, observer, "life", "life-")
    result, _run = fleet.run(fleet.entries(8), round_size=3, concurrency=4, per_provider=2)
    assert set(outcomes_of(result).values()) == {"created"}
    assert domains(oracle, "life-") == fleet.names(8)
    assert all(owner_of(oracle, name) == "life" for name in fleet.names(8))
    assert observer.count("create") == 8
    assert len(fleet.records()) == 8

    result, _run = fleet.run(fleet.entries(8))
    assert set(outcomes_of(result).values()) == {"unchanged"}
    assert observer.calls == []  # an incremental run with nothing changed makes no call at all

    entries = fleet.entries(8)
    for entry in entries[:2]:
        entry["memory_mb"] = 96
    result, _run = fleet.run(entries)
    assert [n for n, o in outcomes_of(result).items() if o != "unchanged"] == ["life-0", "life-1"]
    assert [memory_mib(oracle, n) for n in fleet.names(3)] == [96, 96, 64]
    assert observer.count(*MUTATING) == 2 and observer.count("list_vms", "list_vm_summaries") == 0


def test_a_full_run_finds_and_fixes_drift(store, observer, oracle):
    fleet = Fleet(store, observer, "drift", "drift-")
    fleet.run(fleet.entries(5))
    oracle.lookupByName("drift-3").undefine()
    oracle.lookupByName("drift-1").setMemoryFlags(48 * 1024, 2)  # VIR_DOMAIN_AFFECT_CONFIG
    result, _run = fleet.run(fleet.entries(5))
    assert set(outcomes_of(result).values()) == {"unchanged"}  # incremental: not looked at
    result, _run = fleet.run(fleet.entries(5), full=True)
    assert outcomes_of(result) == {"drift-0": "unchanged", "drift-1": "updated", "drift-2": "unchanged",
                                   "drift-3": "created", "drift-4": "unchanged"}
    assert [name for name, o in result.items() if o.out_of_sync] == ["drift-1", "drift-3"]
    assert domains(oracle, "drift-") == fleet.names(5) and memory_mib(oracle, "drift-1") == 64
    assert observer.count("list_vm_summaries", "list_vms") == 1 and observer.count("describe") <= 2


def test_prune_deletes_only_unlisted_marked_vms_within_the_limit(store, observer, oracle):
    fleet = Fleet(store, observer, "prune", "prune-")
    fleet.run(fleet.entries(6))
    oracle.defineXML("<domain type='test'><name>prune-unmarked</name><memory>65536</memory>"
                     "<os><type>hvm</type></os></domain>")
    with pytest.raises(InvalidSpec) as info:
        fleet.run(fleet.entries(3), prune=True, max_prune=PruneLimit(2))
    assert "max_prune" in info.value.message and "prune-5" in info.value.message
    assert domains(oracle, "prune-") == fleet.names(6) + ["prune-unmarked"]
    assert observer.count(*MUTATING) == 0
    result, _run = fleet.run(fleet.entries(3), prune=True, max_prune=PruneLimit(3))
    assert sorted(n for n, o in outcomes_of(result).items() if o == "pruned") == fleet.names(6)[3:]
    assert domains(oracle, "prune-") == fleet.names(3) + ["prune-unmarked"]
    assert sorted(record["name"] for record in fleet.records().values()) == fleet.names(3)


def test_a_listed_vm_it_did_not_create_is_managed_but_pruned_only_once_adopted(
        store, observer, oracle):
    fleet = Fleet(store, observer, "hand", "hand-")
    oracle.defineXML("<domain type='test'><name>hand-made</name><memory>65536</memory>"
                     "<os><type>hvm</type></os></domain>")
    listed = {"name": "hand-made", "memory_mb": 96, "state": "stopped", "metadata": {"team": "a"}}
    result, _run = fleet.run([listed] + fleet.entries(1))
    assert outcomes_of(result) == {"hand-made": "updated", "hand-0": "created"}
    assert memory_mib(oracle, "hand-made") == 96 and owner_of(oracle, "hand-made") is None
    assert owner_of(oracle, "hand-0") == "hand"

    result, _run = fleet.run(fleet.entries(1), prune=True, full=True)
    assert outcomes_of(result) == {"hand-0": "unchanged"}
    assert domains(oracle, "hand-") == ["hand-0", "hand-made"]

    result, _run = fleet.run([dict(listed, adopt=True)] + fleet.entries(1))
    assert result["hand-made"].outcome == "updated" and result["hand-made"].actions == ["reconfigure"]
    assert owner_of(oracle, "hand-made") == "hand"
    result, _run = fleet.run(fleet.entries(1), prune=True)
    assert outcomes_of(result) == {"hand-0": "unchanged", "hand-made": "pruned"}
    assert domains(oracle, "hand-") == ["hand-0"]


def test_an_owner_sees_only_its_own_records(store, observer, oracle):
    short, longer = Fleet(store, observer, "dup", "dup-a-"), Fleet(store, observer, "dup2", "dup-b-")
    longer.run(longer.entries(2))
    result, run = short.run(short.entries(1), prune=True)
    assert run.read == {} and run.warnings == []  # not the records of "dup2"
    assert len(longer.records()) == 2
    result, _run = longer.run(longer.entries(2))
    assert set(outcomes_of(result).values()) == {"unchanged"} and observer.calls == []


def test_a_vm_of_another_owner_is_refused_and_not_retried(store, observer, oracle):
    other = Fleet(store, observer, "other", "own-")
    other.run(other.entries(1))
    fleet = Fleet(store, observer, "mine", "own-")
    fleet.config = other.config
    result, _run = fleet.run(fleet.entries(1))
    outcome = result["own-0"]
    assert (outcome.outcome, outcome.error.type) == ("failed", "Conflict")
    assert "'other'" in outcome.error.message
    result, _run = fleet.run(fleet.entries(1))
    assert result["own-0"].outcome == "deferred" and observer.calls == []


def test_retryable_failures_back_off_across_runs_until_the_last_attempt(store, observer, oracle):
    fleet = Fleet(store, observer, "retry", "retry-")
    observer.failing["retry-1"] = Unavailable("injected outage")
    result, _run = fleet.run(fleet.entries(3))
    assert outcomes_of(result) == {"retry-0": "created", "retry-1": "failed", "retry-2": "created"}
    record = fleet.records()["retry|libvirt:t-retry|retry-1"]
    assert (record["attempts"], record["next_retry_at"]) == (1, fleet.now + 30)

    fleet.now += 29
    result, _run = fleet.run(fleet.entries(3))
    assert result["retry-1"].outcome == "deferred" and observer.calls == []
    fleet.now += 1
    result, _run = fleet.run(fleet.entries(3))
    assert (result["retry-1"].outcome, result["retry-1"].decision.attempt) == ("failed", 2)
    assert fleet.records()["retry|libvirt:t-retry|retry-1"]["next_retry_at"] == fleet.now + 60
    fleet.now += 60
    result, _run = fleet.run(fleet.entries(3))
    assert result["retry-1"].decision.attempt == 3  # the last of max_attempts=3
    fleet.now += 10 ** 6
    result, _run = fleet.run(fleet.entries(3))
    assert result["retry-1"].outcome == "deferred" and "max_attempts" in result["retry-1"].decision.reason

    del observer.failing["retry-1"]
    result, _run = fleet.run(fleet.entries(3), retry_now=True)
    assert result["retry-1"].outcome == "created"
    assert fleet.records()["retry|libvirt:t-retry|retry-1"]["attempts"] == 0
    assert domains(oracle, "retry-") == fleet.names(3)


def test_an_invalid_spec_waits_for_a_spec_change(store, observer, oracle):
    fleet = Fleet(store, observer, "spec", "spec-")
    bad = fleet.entries(1, disks=[{"size_gb": 1, "bus": "nonesuch"}])  # refused by libvirt's schema
    result, _run = fleet.run(bad)
    assert result["spec-0"].error.type == "InvalidSpec" and domains(oracle, "spec-") == []
    result, _run = fleet.run(bad)
    assert result["spec-0"].outcome == "deferred" and observer.calls == []
    result, _run = fleet.run(fleet.entries(1))
    assert result["spec-0"].outcome == "created"


def test_an_open_breaker_defers_without_a_call_and_keeps_the_status(store, observer, oracle):
    fleet = Fleet(store, observer, "breaker", "brk-")
    fleet.run(fleet.entries(2))
    CircuitBreaker(store, provider_key(fleet.config)).force_open()
    entries = fleet.entries(2, memory_mb=80)
    result, _run = fleet.run(entries)
    assert set(outcomes_of(result).values()) == {"deferred"}
    assert all(o.error.type == "BreakerOpen" for o in result.values())
    assert observer.calls == []
    assert all(r["status"] == "done" for r in fleet.records().values())  # not overwritten
    CircuitBreaker(store, provider_key(fleet.config)).reset()
    result, _run = fleet.run(entries)
    assert set(outcomes_of(result).values()) == {"updated"}


def test_vms_refused_while_the_probe_was_in_flight_get_a_second_pass(store, observer, oracle):
    fleet = Fleet(store, observer, "probe", "probe-")
    CircuitBreaker(store, provider_key(fleet.config), reset_timeout=0.05).force_open()
    threading.Event().wait(0.1)  # half-open: one probe at a time
    observer.slow["describe"] = 0.2
    result, _run = fleet.run(fleet.entries(3), concurrency=3, per_provider=3)
    assert set(outcomes_of(result).values()) == {"created"}
    assert domains(oracle, "probe-") == fleet.names(3)


def test_check_mode_plans_everything_and_changes_nothing(store, observer, oracle):
    fleet = Fleet(store, observer, "check", "check-")
    fleet.run(fleet.entries(2))
    entries = fleet.entries(4)
    entries[0]["state"] = "absent"
    entries[1]["memory_mb"] = 128
    result, _run = fleet.run(entries, check_mode=True)
    assert outcomes_of(result) == {"check-0": "deleted", "check-1": "updated", "check-2": "created",
                                   "check-3": "created"}
    assert result["check-2"].after == {"state": "stopped", "vcpus": 1, "memory_mb": 64,
                                       "metadata": {"resilient_virt_owner": "check"}}
    assert domains(oracle, "check-") == fleet.names(2) and memory_mib(oracle, "check-1") == 64
    assert observer.count(*MUTATING) == 0 and len(fleet.records()) == 2


def test_statuses_are_written_round_by_round(store, observer, oracle):
    fleet = Fleet(store, observer, "rounds", "rounds-")
    seen = []
    observer.hook_creates = lambda name: seen.append((name, len(fleet.records())))
    fleet.run(fleet.entries(7), round_size=3, concurrency=3)
    recorded = [count for _name, count in sorted(seen, key=lambda item: int(item[0].split("-")[1]))]
    # each VM of round n is created after the n*3 statuses of the rounds before were written
    assert [count // 3 * 3 for count in recorded] == [0, 0, 0, 3, 3, 3, 6]


def test_calls_on_one_provider_stay_within_its_bound(store, observer, oracle):
    fleet = Fleet(store, observer, "bound", "bound-")
    gate = threading.Lock()
    state = {"now": 0, "most": 0}

    def slow_create(_name):
        with gate:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        threading.Event().wait(0.02)
        with gate:
            state["now"] -= 1

    observer.hook_creates = slow_create
    fleet.run(fleet.entries(12), concurrency=8, per_provider=3)
    assert state["most"] == 3
    assert domains(oracle, "bound-") == sorted(fleet.names(12))


def test_work_is_interleaved_across_providers():
    class Vm:
        def __init__(self, provider, name):
            self.provider, self.name = provider, name

    work = [(Vm("a", i), None) for i in range(3)] + [(Vm("b", i), None) for i in range(2)]
    assert [(vm.provider, vm.name) for vm, _d in _interleave(work)] == [
        ("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2)]


def test_a_store_that_stops_answering_stops_the_run_after_the_round(tmp_path, observer, oracle):
    import sqlite3

    path = tmp_path / "locked.db"
    store = open_store("sqlite://%s" % path, timeout=0.3)
    fleet = Fleet(store, observer, "outage", "outage-")
    holder = {}
    round_two = threading.Barrier(3, timeout=10)  # outage-3 to outage-5, created concurrently

    def lock_in_round_two(name):
        # the store locks once all three creates of round 2 are under way (past the guarded
        # call's own use of the store), so each is created whatever the threads' timing
        if name in ("outage-3", "outage-4", "outage-5") and round_two.wait() == 0:
            holder["db"] = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            holder["db"].execute("BEGIN EXCLUSIVE")

    observer.hook_creates = lock_in_round_two
    result, run = fleet.run(fleet.entries(9), round_size=3, concurrency=3)
    holder["db"].execute("ROLLBACK")
    holder["db"].close()
    assert run.store_error is not None and run.store_error.type == "Unavailable"
    assert sorted(result) == fleet.names(6)  # round 3 never started
    assert domains(oracle, "outage-") == fleet.names(6)

    fleet.store = open_store("sqlite://%s" % path, timeout=5)
    assert sorted(r["name"] for r in fleet.records().values()) == fleet.names(3)
    result, run = fleet.run(fleet.entries(9))
    assert run.store_error is None
    # round 2's VMs exist without a status: read again and found, not created twice
    assert outcomes_of(result) == dict((n, "created" if n >= "outage-6" else "unchanged")
                                       for n in fleet.names(9))
    assert domains(oracle, "outage-") == fleet.names(9) and len(fleet.records()) == 9
