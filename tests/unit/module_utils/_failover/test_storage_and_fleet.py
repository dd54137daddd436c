"""Failover reservations in a real SQLite state store, and the fleet a cycle plans over.

The fleet is built from given options and from a real libvirt provider (libvirt's in-process
``test:///default`` driver, which starts with one running domain, "test") opened through the
registry.
"""
import multiprocessing
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_inputs import Fleet, _whole
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    VM, Hypervisor, Reservation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import CycleResult
from ansible_collections.resilient.virt.plugins.module_utils._failover.storage import (
    NAMESPACE, ReservationBook, Stored)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
    open_provider)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

WORKERS = 4
CYCLES_PER_WORKER = 25


def _url(tmp_path):
    return "sqlite:///%s" % (tmp_path / "state.db")


@pytest.fixture
def store(tmp_path):
    opened = open_store(_url(tmp_path), environ={})
    yield opened
    opened.close()


def _res(name, host, creator, cpu=2, memory_mb=1024, allocations=None):
    return Reservation(name, host, "az1", {"cpu": cpu, "memory_mb": memory_mb},
                       allocations or {}, creator, "2026-11-21T10:00:00Z", None,
                       [{"type": "Ready", "status": "True"}])


def _fixed(reservations, seen):
    """A cycle function that records what it was given and keeps ``reservations``."""

    def cycle_fn(before, cycle, now):
        seen.append((list(before), cycle, now))
        return CycleResult(reservations=list(reservations))

    return cycle_fn


# -- ReservationBook ----------------------------------------------------------------------------

def test_an_empty_book_loads_nothing(store):
    assert ReservationBook(store, "alpha").load() == Stored([], 0, {}, {}, {})
    assert ReservationBook(store, "alpha").foreign() == []
    ReservationBook(store, "alpha").save_held({"fo-1": {"slot": 1}})
    assert store.get(NAMESPACE, "alpha") is None, "saving what is held created a record"


def test_reconcile_stores_reservations_and_counts_cycles(store):
    book = ReservationBook(store, "alpha")
    first = [_res("fo-1", "h2", "alpha", allocations={"vm-a": "h1"}), _res("fo-2", "h3", "alpha")]
    seen = []
    began = time.time()
    result, before, held = book.reconcile(_fixed(first, seen), {"vm-a": {"name": "a"}}, {"h1": "kvm1"})
    assert isinstance(result, CycleResult) and result.reservations == first
    assert before == [] and held == {} and seen[0][:2] == ([], 0)
    assert began - 1 <= seen[0][2] <= time.time() + 1, "cycle_fn got no store time"

    loaded = book.load()
    assert loaded.reservations == first and loaded.cycle == 1
    assert loaded.definitions == {"vm-a": {"name": "a"}} and loaded.owners == {"h1": "kvm1"}
    assert loaded.held == {}

    native = {"fo-2": {"provider": "kvm3", "slot": "s-1"}}
    book.save_held(native)
    second = [_res("fo-2", "h3", "alpha", cpu=4)]
    result, before, held = book.reconcile(_fixed(second, seen), {"vm-b": {"name": "b"}}, {"h4": "kvm4"})
    assert before == first and held == native and seen[1][:2] == (first, 1)
    assert book.load() == Stored(second, 2, {"vm-b": {"name": "b"}}, {"h4": "kvm4"}, native)
    reopened = open_store(store.url, environ={})
    assert ReservationBook(reopened, "alpha").load().reservations == second


def test_a_failing_cycle_leaves_the_previous_one_intact(store):
    book = ReservationBook(store, "alpha")
    kept = [_res("fo-1", "h2", "alpha")]
    book.reconcile(_fixed(kept, []), {"vm-a": {}}, {"h1": "kvm1"})

    def broken(before, cycle, now):
        raise ValueError("planning failed")

    with pytest.raises(ValueError):
        book.reconcile(broken, {}, {})
    assert book.load() == Stored(kept, 1, {"vm-a": {}}, {"h1": "kvm1"}, {})


def test_foreign_returns_only_other_creators_reservations(store):
    books = dict((creator, ReservationBook(store, creator)) for creator in ("alpha", "beta", "gamma"))
    held = {
        "alpha": [_res("a-1", "h1", "alpha")],
        "beta": [_res("b-1", "h2", "beta"), _res("b-2", "h3", "beta")],
        "gamma": [_res("g-1", "h1", "gamma")],
    }
    for creator, book in books.items():
        book.reconcile(_fixed(held[creator], []), {}, {})
    assert books["alpha"].foreign() == held["beta"] + held["gamma"]
    assert books["beta"].foreign() == held["alpha"] + held["gamma"]
    assert ReservationBook(store, "delta").foreign() == held["alpha"] + held["beta"] + held["gamma"]


def test_remove_deletes_and_returns_the_creators_reservations(store):
    alpha, beta = ReservationBook(store, "alpha"), ReservationBook(store, "beta")
    mine = [_res("a-1", "h1", "alpha"), _res("a-2", "h2", "alpha")]
    theirs = [_res("b-1", "h2", "beta")]
    alpha.reconcile(_fixed(mine, []), {"vm": {}}, {"h1": "kvm1"})
    beta.reconcile(_fixed(theirs, []), {}, {})

    alpha.save_held({"a-1": {"slot": 7}})
    assert alpha.remove() == (mine, {"a-1": {"slot": 7}}, {"h1": "kvm1"})
    assert store.get(NAMESPACE, "alpha") is None
    assert alpha.load() == Stored([], 0, {}, {}, {})
    assert alpha.remove() == ([], {}, {})
    assert beta.load().reservations == theirs
    assert beta.foreign() == []


def _reconcile_many(url, creator, worker, cycles, barrier):
    """Worker process: ``cycles`` reconciles, each adding one reservation to what is stored."""
    store = open_store(url, environ={})
    book = ReservationBook(store, creator)
    barrier.wait()
    for number in range(cycles):
        name = "w%d-c%d" % (worker, number)

        def cycle_fn(before, cycle, now, name=name):
            return CycleResult(reservations=before + [_res(name, "h1", creator)])

        book.reconcile(cycle_fn, {"last": {"worker": worker}}, {"h1": "kvm1"})
    store.close()


def test_concurrent_reconciles_of_one_creator_lose_no_update(tmp_path, store):
    ReservationBook(store, "shared").load()  # creates the database before the workers race
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    workers = [ctx.Process(target=_reconcile_many,
                           args=(_url(tmp_path), "shared", worker, CYCLES_PER_WORKER, barrier))
               for worker in range(WORKERS)]
    for proc in workers:
        proc.start()
    for proc in workers:
        proc.join(120)
    assert [proc.exitcode for proc in workers] == [0] * WORKERS

    stored = ReservationBook(store, "shared").load()
    assert stored.cycle == WORKERS * CYCLES_PER_WORKER
    names = sorted(res.name for res in stored.reservations)
    assert names == sorted("w%d-c%d" % (w, c) for w in range(WORKERS) for c in range(CYCLES_PER_WORKER))
    for worker in range(WORKERS):  # each worker's own cycles stay in order
        mine = [res.name for res in stored.reservations if res.name.startswith("w%d-" % worker)]
        assert mine == ["w%d-c%d" % (worker, c) for c in range(CYCLES_PER_WORKER)]


# -- Fleet.given and capacity -------------------------------------------------------------------

@pytest.mark.parametrize("hypervisors, vms, path", [
    ([{"name": "h1"}, {"cpu": 4}], [], "hypervisors[1].name"),
    ([{"name": "h1", "cpu": -1}], [], "hypervisors[0].cpu"),
    ([{"name": "h1", "traits": "ssd"}], [], "hypervisors[0].traits"),
    ([], [{"uuid": "a", "host": "h1"}, {"uuid": "b"}], "vms[1].host"),
    ([], [{"uuid": "a", "host": "h1", "vcpus": "two"}], "vms[0].vcpus"),
    ([], ["vm-a"], "vms[0]"),
])
def test_given_errors_name_the_item(hypervisors, vms, path):
    with pytest.raises(InvalidSpec) as info:
        Fleet.given(hypervisors, vms)
    assert [e["path"] for e in info.value.details["errors"]] == [path]
    assert info.value.message.startswith(path + ":")


def test_given_builds_the_model_and_accepts_provider_dicts():
    fleet = Fleet.given(
        [{"name": "h1", "az": "az1", "cpu": 8, "memory_mb": 4096, "state": "up", "arch": "x86_64"}],
        [{"uuid": "u1", "hypervisor": "h1", "flavor": "web", "vcpus": 2, "memory_mb": 512, "name": "a"}])
    assert fleet.hypervisors == [Hypervisor("h1", "az1", 8, 4096)]
    assert fleet.vms == [VM("u1", "h1", "", "web", 2, 512)]
    assert fleet.running is None and fleet.owners == {} and fleet.definitions == {}


def test_capacity_held_by_other_creators_counts_as_used():
    fleet = Fleet.given(
        [{"name": "h1", "cpu": 32, "memory_mb": 65536},
         {"name": "h2", "cpu": 32, "memory_mb": 65536, "used_cpu": 5, "used_memory_mb": 100},
         {"name": "h3", "cpu": 32, "memory_mb": 65536}],
        [{"uuid": "a", "host": "h1", "vcpus": 2, "memory_mb": 1024},
         {"uuid": "b", "host": "h1", "vcpus": 4, "memory_mb": 2048},
         {"uuid": "c", "host": "h1"},
         {"uuid": "d", "host": "h3", "vcpus": 8, "memory_mb": 8192}])
    held = [_res("x-1", "h1", "other", cpu=3, memory_mb=512),
            _res("x-2", "h1", "other", cpu=1, memory_mb=0),
            _res("x-3", "h2", "other", cpu=2, memory_mb=256),
            _res("x-4", "gone", "other", cpu=99, memory_mb=99)]
    adjusted = dict((hv.name, hv) for hv in fleet.with_capacity_held_by(held))
    assert (adjusted["h1"].used_cpu, adjusted["h1"].used_memory_mb) == (2 + 4 + 3 + 1, 1024 + 2048 + 512)
    assert (adjusted["h2"].used_cpu, adjusted["h2"].used_memory_mb) == (5 + 2, 100 + 256)
    assert adjusted["h3"] == fleet.hypervisors[2], "a host without foreign reservations changed"
    assert (adjusted["h1"].cpu, adjusted["h1"].memory_mb) == (32, 65536)
    assert sorted(adjusted) == ["h1", "h2", "h3"]
    assert fleet.hypervisors[0].used_cpu is None, "the fleet itself was modified"
    assert fleet.with_capacity_held_by([]) is fleet.hypervisors


def test_whole_rounds_usage_up_and_capacity_down():
    given = {"name": "esx1", "cpu": 7.9, "memory_mb": 1023.5, "used_cpu": 0.1,
             "used_memory_mb": 2.0, "free_memory_mb": 3.5}
    whole = _whole(given)
    assert whole == {"name": "esx1", "cpu": 7, "memory_mb": 1023, "used_cpu": 1,
                     "used_memory_mb": 2, "free_memory_mb": 3.5}
    assert all(isinstance(whole[key], int) for key in ("cpu", "memory_mb", "used_cpu", "used_memory_mb"))
    assert given["cpu"] == 7.9, "the provider's dict was modified"
    assert _whole({"name": "h", "cpu": 8, "used_cpu": None}) == {"name": "h", "cpu": 8, "used_cpu": None}
    Hypervisor.from_dict(whole, "hypervisors[0]")  # whole numbers pass the model's checks


# -- Fleet.listed on test:///default ------------------------------------------------------------

@pytest.fixture
def libvirt_provider(store):
    settings = resolve_settings({"base_delay": "10ms", "max_delay": "50ms", "max_attempts": 2}, environ={})
    guarded = open_provider({"type": "libvirt", "uri": "test:///default", "name": "t", "az": "az7",
                             "cpu_allocation_ratio": 1.5}, settings, store, environ={})
    yield guarded
    for name in ("fl-web", "fl-plain"):
        try:
            guarded.delete(name)
        except Exception:  # noqa: BLE001 - cleanup only
            pass
    guarded.provider.close()


def test_listed_reads_the_fleet_from_a_provider(libvirt_provider):
    guarded = libvirt_provider
    web = guarded.create({"name": "fl-web", "vcpus": 2, "memory_mb": 128, "metadata": {"flavor": "web", "team": "a"}})
    guarded.power("fl-web", "on")
    plain = guarded.create({"name": "fl-plain", "vcpus": 1, "memory_mb": 64})
    reported_vms = guarded.list_vms()

    fleet = Fleet.listed([("kvm-t", guarded)])
    (hv,) = fleet.hypervisors
    reported = guarded.list_hypervisors()[0]
    assert (hv.name, hv.az, hv.cpu, hv.memory_mb) == ("t", "az7", reported["cpu"], reported["memory_mb"])
    assert (hv.used_cpu, hv.used_memory_mb) == (reported["used_cpu"], reported["used_memory_mb"])
    assert fleet.owners == {"t": "kvm-t"}

    vms = dict((vm.uuid, vm) for vm in fleet.vms)
    assert sorted(vms) == sorted(vm["uuid"] for vm in reported_vms)
    assert vms[web["uuid"]] == VM(web["uuid"], "t", "az7", "web", 2, 128)
    assert vms[plain["uuid"]] == VM(plain["uuid"], "t", "az7", "", 1, 64)
    assert all(vm.host == "t" and vm.az == "az7" for vm in fleet.vms)
    assert fleet.running == dict((vm["uuid"], "t") for vm in reported_vms if vm["state"] == "running")
    assert web["uuid"] in fleet.running and plain["uuid"] not in fleet.running

    definition = fleet.definitions[web["uuid"]]
    assert definition["provider"] == "kvm-t" and definition["name"] == "fl-web"
    assert definition["metadata"] == {"flavor": "web", "team": "a"}
    assert set(fleet.definitions) == set(vms)
