"""Targeted behaviour of one failover reconcile cycle."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    VM, Hypervisor, Reservation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import (
    REPLACED, run_cycle)
from ansible_collections.resilient.virt.plugins.module_utils._failover.slots import (
    Need, select_window, slot_pairs)
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import (
    FailoverSettings)
from ansible_collections.resilient.virt.plugins.module_utils._time import (
    format_time, parse_time)
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec

from ansible_collections.resilient.virt.plugins.module_utils._failover import reconcile
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_state import is_interim
from ansible_collections.resilient.virt.plugins.module_utils._failover.fleet_index import FleetIndex

from .oracle import guarantee_breaches
from .reference import check_vms_still_eligible
from .test_packing import no_worse_than, plain_greedy
from .test_properties import constraint_violations

NOW = 1.8e9
GIB = 1024


def hv(name, cpu=32, mem=64 * GIB, az="az-a", traits=()):
    return Hypervisor(name, az, cpu, mem, frozenset(traits))


def vm(uuid, host, cpu=2, mem=4 * GIB, flavor="m1", az="az-a", specs=None):
    return VM(uuid, host, az, flavor, cpu, mem, specs or {})


def settings(**kw):
    kw.setdefault("requirements", {"m1": 1, "m2": 2})
    return FailoverSettings(**kw)


def slots(result, uuid):
    return sorted(r.host for r in result.reservations if uuid in r.allocations)


def status(result, uuid):
    return {s.uuid: s for s in result.vm_status}[uuid]


def test_largest_vm_first_lets_the_small_one_share():
    # Only host3 has room, for one 16 GiB reservation; the 8 GiB VM fits into it, not vice versa.
    fleet = [hv("host1", mem=8 * GIB), hv("host2", mem=16 * GIB), hv("host3", mem=16 * GIB)]
    vms = [vm("a-small", "host1", mem=8 * GIB), vm("b-big", "host2", mem=16 * GIB)]
    result = run_cycle(fleet, vms, [], settings(), now=NOW)
    assert [r.resources["memory_mb"] for r in result.reservations] == [16 * GIB]
    assert slots(result, "a-small") == slots(result, "b-big") == ["host3"]
    assert result.summary["coverage_ratio"] == 1.0


def test_reuse_prefers_the_most_shared_reservation():
    fleet = [hv("h%d" % i) for i in range(1, 6)]
    existing = [Reservation("res-busy", "h4", "az-a", {"cpu": 2, "memory_mb": 4 * GIB},
                            {"v1": "h1", "v2": "h2"}),
                Reservation("res-calm", "h5", "az-a", {"cpu": 2, "memory_mb": 4 * GIB},
                            {"v1b": "h1"})]
    vms = [vm("v1", "h1"), vm("v2", "h2"), vm("v1b", "h1"), vm("v3", "h3")]
    result = run_cycle(fleet, vms, existing, settings(), now=NOW)
    assert result.created == [] and result.reused == 1 and result.changed_anything
    assert "v3" in result.reservations_by_name()["res-busy"].allocations
    assert result.changed == ["res-busy"]


def test_one_new_reservation_per_hypervisor_per_cycle():
    # VMs on one host cannot share a reservation, so each needs its own.
    fleet = [hv("host1"), hv("host2"), hv("host3")]
    vms = [vm("v%d" % i, "host1") for i in range(3)]
    limited = run_cycle(fleet, vms, [], settings(), now=NOW)
    assert sorted(r.host for r in limited.reservations) == ["host2", "host3"]
    short = [s for s in limited.vm_status if s.short_by]
    assert len(short) == 1 and "already got a new reservation this cycle" in short[0].why
    free = run_cycle(fleet, vms, [], settings(limit_one_new_per_hypervisor=False), now=NOW)
    assert len(free.reservations) == 3 and free.summary["coverage_ratio"] == 1.0
    assert run_cycle(fleet, vms, limited.reservations, settings(), now=NOW + 60,
                     cycle=1).summary["coverage_ratio"] == 1.0


def test_new_reservation_goes_to_the_host_with_most_free_memory():
    fleet = [hv("host1"), hv("host2", mem=32 * GIB), hv("host3", mem=48 * GIB)]
    result = run_cycle(fleet, [vm("v", "host1")], [], settings(), now=NOW)
    (res,) = result.reservations
    assert res.host == "host3" and res.allocations == {"v": "host1"}
    assert res.resources == {"cpu": 2, "memory_mb": 4 * GIB} and res.az == "az-a"
    assert res.name.startswith("failover-az-a-") and res.creator == "resilient.virt"
    assert res.last_changed == format_time(NOW) and res.acknowledged_at is None
    assert res.conditions[0]["type"] == "Ready" and res.conditions[0]["status"] is True


def test_capacity_counts_vms_and_every_reservation_on_the_host():
    fleet = [hv("host1"), Hypervisor("host2", "az-a", 8, 8 * GIB, frozenset(), 2, 2 * GIB)]
    blocking = Reservation("old", "host2", "az-a", {"cpu": 4, "memory_mb": 4 * GIB},
                           {"other": "host1"}, acknowledged_at=format_time(NOW))
    vms = [vm("other", "host1", cpu=4), vm("v", "host1", mem=4 * GIB, flavor="m2")]
    result = run_cycle(fleet, vms, [blocking], settings(), now=NOW)
    assert status(result, "v").held == 0
    assert "1 its own host, 1 without room" in status(result, "v").why


def test_slot_pairs_keep_hosts_apart_and_come_closing_fewest_then_most_used_first():
    place = {"a": ("h5", {"h5", "h1", "h2"}), "b": ("h6", {"h6", "h1"}),
             "c": ("h7", {"h7", "h2", "h4"}), "d": ("h8", {"h8", "h9"}),
             "e": ("h5", {"h5", "h3", "h9"})}

    def pairs(closes):
        return list(slot_pairs(list("abcde"), lambda name: place[name][0],
                               lambda name: place[name][1],
                               lambda first, second: (first, second) == ("c", "d"), closes.get))

    # out: a-b (h1 at both), a-c (h2), a-e (one hypervisor), d-e (h9), c-d (barred);
    # c-e is used from 6 hosts, b-d from 4, the others from 5, in the order given
    assert pairs(dict.fromkeys("abcde", 0)) == [
        ("c", "e"), ("a", "d"), ("b", "c"), ("b", "e"), ("b", "d")]
    # closing c and e each close a pair: those closing none come first, c-e (two) last
    assert pairs({"a": 0, "b": 0, "c": 1, "d": 0, "e": 1}) == [
        ("a", "d"), ("b", "d"), ("b", "c"), ("b", "e"), ("c", "e")]


def test_n2_vm_spreads_its_slots_over_distinct_hosts():
    fleet = [hv("h%d" % i) for i in range(1, 5)]
    result = run_cycle(fleet, [vm("v", "h1", flavor="m2")], [], settings(), now=NOW)
    assert slots(result, "v") == ["h2", "h3"]


def test_zone_and_traits_are_honoured():
    fleet = [hv("a1", az="az-a"), hv("b1", az="az-b"), hv("a2", az="az-a", traits=["HANA"]),
             hv("a3", az="az-a")]
    hana = vm("hana", "a1", specs={"trait:HANA": "required"})
    plain = vm("plain", "a3", specs={"trait:HANA": "forbidden"})
    result = run_cycle(fleet, [hana, plain], [], settings(), now=NOW)
    assert slots(result, "hana") == ["a2"] and slots(result, "plain") == ["a1"]


def test_rotating_window_walks_every_vm():
    vms = [vm("v%d" % i, "h1", mem=(i + 1) * GIB) for i in range(5)]
    vms.append(vm("u3", "h1", mem=4 * GIB))
    order = FleetIndex([hv("h1")], vms, {}, {}).by_size
    assert order == ["v4", "u3", "v3", "v2", "v1", "v0"]  # largest first, then by uuid
    by_uuid = {item.uuid: item for item in vms}
    needs = [Need(by_uuid[uuid], 1, 0) for uuid in order]
    seen = []
    for cycle in range(3):
        selected, deferred = select_window(needs, 2, cycle)
        assert len(selected) == 2 and len(deferred) == 4
        seen.extend(n.vm.uuid for n in selected)
    assert set(seen) == set(order)
    assert [n.vm.uuid for n in select_window(needs, 0, 7)[0]] == order


def test_max_vms_to_process_defers_the_rest_and_later_cycles_catch_up():
    fleet = [hv("h%d" % i) for i in range(1, 8)]
    vms = [vm("v%d" % i, "h%d" % (i + 1), mem=(i + 1) * GIB) for i in range(5)]
    reservations = []
    processed = []
    for cycle in range(3):
        result = run_cycle(fleet, vms, reservations, settings(max_vms_to_process=2), now=NOW,
                           cycle=cycle)
        processed.append(result.summary["vms_processed"])
        reservations = result.reservations
        if cycle == 0:
            assert status(result, "v4").held == 1 and status(result, "v3").held == 1
            assert "max_vms_to_process=2" in status(result, "v0").why
    assert result.summary["coverage_ratio"] == 1.0 and processed[0] == 2


def test_vm_that_is_gone_or_moved_leaves_and_empty_reservation_is_deleted():
    fleet = [hv("h%d" % i) for i in range(1, 5)]
    existing = [Reservation("res-gone", "h3", "az-a", {"cpu": 2, "memory_mb": 4 * GIB},
                            {"ghost": "h1"}),
                Reservation("res-moved", "h4", "az-a", {"cpu": 2, "memory_mb": 4 * GIB},
                            {"mover": "h1"})]
    result = run_cycle(fleet, [vm("mover", "h2", flavor="other")], existing, settings(), now=NOW)
    assert result.reservations == []
    assert sorted((d.reservation.name, d.reason) for d in result.deleted) == [
        ("res-gone", "Empty"), ("res-moved", "Empty")]
    reasons = {r.vm: r.reason for r in result.removals}
    assert reasons == {"ghost": "VM no longer exists", "mover": "VM moved from h1 to h2"}


def test_vm_missing_from_the_list_is_kept_while_a_hypervisor_runs_it():
    fleet = [hv("h%d" % i) for i in range(1, 4)]
    existing = [Reservation("res", "h3", "az-a", {"cpu": 2, "memory_mb": 4 * GIB},
                            {"listed": "h1", "unlisted": "h2"}, acknowledged_at=format_time(NOW))]
    vms = [vm("listed", "h1")]
    kept = run_cycle(fleet, vms, existing, settings(), now=NOW, running={"unlisted": "h2"})
    assert kept.reservations[0].allocations == {"listed": "h1", "unlisted": "h2"}
    assert kept.removals == [] and kept.changed == [] and not kept.changed_anything
    moved = run_cycle(fleet, vms, existing, settings(), now=NOW, running={"unlisted": "h1"})
    assert moved.reservations[0].allocations == {"listed": "h1"}
    gone = run_cycle(fleet, vms, existing, settings(), now=NOW)
    assert gone.reservations[0].allocations == {"listed": "h1"}


def test_vm_breaking_the_constraints_leaves_the_reservation():
    fleet = [hv("h%d" % i) for i in range(1, 5)]
    # a and b both run on h1 yet share res-1 (constraint 3): the first by uuid leaves.
    existing = [Reservation("res-1", "h3", "az-a", {"cpu": 2, "memory_mb": 4 * GIB},
                            {"a": "h1", "b": "h1"}, acknowledged_at=format_time(NOW))]
    result = run_cycle(fleet, [vm("a", "h1"), vm("b", "h1")], existing, settings(), now=NOW)
    assert [(r.reservation, r.vm) for r in result.removals] == [("res-1", "a")]
    assert result.reservations_by_name()["res-1"].allocations == {"b": "h1"}
    assert slots(result, "a") == ["h2"]
    assert result.summary["coverage_ratio"] == 1.0


def test_short_vm_trades_blocking_slots_for_a_full_set(monkeypatch):
    # Shared greedily, the first cycle leaves three hana VMs one slot short: every other host
    # would break constraint 4 or 5 with the slots they hold. Later cycles swap those slots.
    # Packing alone: following the target (below) would not leave them short this way.
    monkeypatch.setattr(reconcile, "STRATEGIES", (reconcile.PACK,))
    fleet = [hv("kvm%d" % i, mem=128 * GIB) for i in range(1, 5)]
    vms = [vm("vm-%d-%s" % (i, flavor), "kvm%d" % i, cpu=4, mem=8 * GIB, flavor=flavor)
           for i in range(1, 5) for flavor in ("hana_small", "web")]
    rules = settings(requirements={"hana_*": 2, "*": 1})
    hosts = {v.uuid: v.host for v in vms}
    reservations, covered, reasons = [], [], set()
    for cycle in range(4):
        result = run_cycle(fleet, vms, reservations, rules, now=NOW + 60 * cycle, cycle=cycle)
        reservations = result.reservations
        covered.append(result.summary["vms_covered"])
        reasons.update(r.reason for r in result.removals)
        assert check_vms_still_eligible(hosts, reservations) == {}
        assert all(r.allocations for r in reservations)
    assert covered == [5, 7, 8, 8] and REPLACED in reasons
    again = run_cycle(fleet, vms, reservations, rules, now=NOW + 600, cycle=4)
    assert not again.changed_anything and again.removals == [] and again.reused == 0
    assert [r.allocations for r in again.reservations] == [r.allocations for r in reservations]


def test_a_plan_short_under_the_limit_grows_along_the_plan_built_without_it():
    # Under the one-new-per-hypervisor limit the first cycle cannot give every VM its target
    # slots. VMs that cannot take them all are covered for now by interim reservations, which
    # they leave once they take their target slots, so the settled plan is the plan built
    # from nothing without the limit (the target), whatever the cycles in between.
    fleet = [hv("kvm%d" % i, mem=128 * GIB) for i in range(1, 5)]
    vms = [vm("vm-%d-%s" % (i, flavor), "kvm%d" % i, cpu=4, mem=8 * GIB, flavor=flavor)
           for i in range(1, 5) for flavor in ("hana_small", "web")]
    rules = settings(requirements={"hana_*": 2, "*": 1})
    target = run_cycle(fleet, vms, [], settings(requirements={"hana_*": 2, "*": 1},
                                                limit_one_new_per_hypervisor=False), now=NOW)
    reservations, interim = [], set()
    for cycle in range(6):
        result = run_cycle(fleet, vms, reservations, rules, now=NOW + 60 * cycle, cycle=cycle)
        assert {removal.reservation for removal in result.removals} <= interim
        reservations = result.reservations
        interim = {r.name for r in reservations if is_interim(r)}
        if not result.changed_anything:
            break
    assert not interim
    assert sorted((r.host, sorted(r.allocations)) for r in reservations) == \
        sorted((r.host, sorted(r.allocations)) for r in target.reservations)


@pytest.mark.parametrize("hosts, per_host, sizes, two_slot_every", [
    (8, 3, (8, 16, 4, 32), 4),
    (12, 4, (2, 8, 16, 4, 32, 64), 4),
])
def test_the_first_cycle_covers_every_vm_the_limit_allows(hosts, per_host, sizes,
                                                          two_slot_every):
    # The plan built from nothing puts several reservations on the hypervisors with the most
    # room, and the limit opens one a hypervisor a cycle; packing one a hypervisor covers every
    # VM at once. The first cycle covers every VM (interim reservations where target ones
    # cannot open yet), checked against the guarantee itself; no VM loses its cover on the
    # way, and the plan settles with no interim reservation left, holding no more than the
    # plain greedy (the test's own).
    vms = [vm("vm-%02d-%d" % (i, j), "kvm%02d" % i, mem=sizes[(i * per_host + j) % len(sizes)] * GIB,
              flavor="hana_m" if (i * per_host + j) % two_slot_every == 0 else "web")
           for i in range(hosts) for j in range(per_host)]
    fleet = [Hypervisor("kvm%02d" % i, "az-a", 64, 256 * GIB, frozenset(),
                        sum(v.vcpus for v in vms if v.host == "kvm%02d" % i),
                        sum(v.memory_mb for v in vms if v.host == "kvm%02d" % i))
             for i in range(hosts)]
    required = {v.uuid: 2 if v.flavor == "hana_m" else 1 for v in vms}
    rules = settings(requirements={"hana_*": 2, "*": 1})
    first = run_cycle(fleet, vms, [], rules, now=NOW)
    assert constraint_violations(first.reservations, {v.uuid: v.host for v in vms}) == []
    assert guarantee_breaches([h.name for h in fleet], vms, first.reservations, required) == []
    reservations = first.reservations
    for cycle in range(1, 12):
        result = run_cycle(fleet, vms, reservations, rules, now=NOW + 60 * cycle, cycle=cycle)
        assert guarantee_breaches([h.name for h in fleet], vms, result.reservations,
                                  required) == []  # no VM loses its cover on the way
        reservations = result.reservations
        if not result.changed_anything:
            break
    assert not result.changed_anything
    assert not any(is_interim(r) for r in reservations)
    assert no_worse_than(result, plain_greedy(fleet, vms, {"hana_*": 2, "*": 1}))


def test_stuck_vm_leaves_its_slots_and_an_emptied_reservation_is_deleted():
    # v needs 3 and holds small (outgrown, not yet revalidated) on h2 and shared on h3 with u,
    # which runs on h4; h5 has no room, so no third slot exists beside those two.
    fleet = [hv("h1"), hv("h2"), hv("h3"), hv("h4"), hv("h5", mem=2 * GIB)]
    stamp = format_time(NOW - 60)
    small = Reservation("small", "h2", "az-a", {"cpu": 1, "memory_mb": GIB}, {"v": "h1"},
                        last_changed=stamp, acknowledged_at=stamp)
    shared = Reservation("shared", "h3", "az-a", {"cpu": 2, "memory_mb": 4 * GIB},
                         {"v": "h1", "u": "h4"}, last_changed=stamp, acknowledged_at=stamp)
    vms = [vm("v", "h1", flavor="m3"), vm("u", "h4")]
    rules = settings(requirements={"m1": 1, "m3": 3})
    result = run_cycle(fleet, vms, [small, shared], rules, now=NOW)
    assert slots(result, "v") == ["h2", "h3", "h4"] and status(result, "v").why is None
    assert [(r.reservation, r.vm, r.host, r.reason) for r in result.removals] == [
        ("shared", "v", "h1", REPLACED), ("small", "v", "h1", REPLACED)]
    assert [(d.reservation.name, d.reason) for d in result.deleted] == [("small", "Empty")]
    assert result.reservations_by_name()["shared"].allocations == {"u": "h4"}
    assert "small" not in result.changed and "shared" in result.changed
    assert result.summary["coverage_ratio"] == 1.0


def acked(age, **kw):
    stamp = format_time(NOW - age)
    base = dict(name="res", host="h3", az="az-a", resources={"cpu": 2, "memory_mb": 4 * GIB},
                allocations={"v": "h1"}, last_changed=stamp, acknowledged_at=stamp)
    base.update(kw)
    return Reservation(**base)


def test_revalidation_acknowledges_when_due_only():
    fleet = [hv("h1"), hv("h2"), hv("h3")]
    vms = [vm("v", "h1")]
    fresh = run_cycle(fleet, vms, [acked(60)], settings(), now=NOW)
    assert fresh.summary["acknowledged"] == 0
    assert fresh.reservations[0].acknowledged_at == format_time(NOW - 60)
    due = run_cycle(fleet, vms, [acked(3600)], settings(), now=NOW)
    assert due.summary["acknowledged"] == 1
    res = due.reservations[0]
    assert res.acknowledged_at == format_time(NOW) and res.last_changed == format_time(NOW - 3600)
    assert res.conditions[0]["status"] is True and res.conditions[0]["reason"] == "ReservationActive"
    changed = run_cycle(fleet, vms, [acked(60, last_changed=format_time(NOW - 1))], settings(),
                        now=NOW)
    assert changed.summary["acknowledged"] == 1
    short = run_cycle(fleet, vms, [acked(60)], settings(revalidation_interval=30), now=NOW)
    assert short.summary["acknowledged"] == 1


@pytest.mark.parametrize("reservation, vms, reason", [
    (acked(3600), [vm("v", "h1", mem=8 * GIB)], "VMDoesNotFit"),
    (acked(3600, host="gone"), [vm("v", "h1")], "HostNotFound"),
    (acked(3600, resources={"cpu": 2, "memory_mb": 4 * GIB, "gpu": 1}), [vm("v", "h1")],
     "InvalidResources"),
    (acked(3600), [vm("v", "h1", specs={"trait:HANA": "required"})], "VMDoesNotFit"),
])
def test_invalid_reservation_is_deleted_with_a_reason_and_replaced(reservation, vms, reason):
    fleet = [hv("h1"), hv("h2"), hv("h3"), hv("h4", traits=["HANA"])]
    result = run_cycle(fleet, vms, [reservation], settings(), now=NOW)
    (deleted,) = result.deleted
    assert deleted.reason == reason and deleted.reservation.name == "res"
    ready = deleted.reservation.conditions[-1]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", False, reason)
    assert deleted.reservation.last_changed == format_time(NOW)
    assert status(result, "v").held == 1 and "res" not in result.reservations_by_name()


def test_revalidation_sees_a_host_that_lost_its_room():
    # host h3 now runs more than before: with the reservation given back, v no longer fits.
    fleet = [hv("h1"), Hypervisor("h3", "az-a", 4, 8 * GIB, frozenset(), 4, 6 * GIB), hv("h4")]
    result = run_cycle(fleet, [vm("v", "h1")], [acked(3600)], settings(), now=NOW)
    assert [d.reason for d in result.deleted] == ["VMDoesNotFit"]
    assert slots(result, "v") == ["h4"]


def test_summary_and_status_report_coverage():
    fleet = [hv("h1"), hv("h2")]
    vms = [vm("a", "h1"), vm("b", "h2", flavor="m2"), vm("c", "h1", flavor="untracked")]
    result = run_cycle(fleet, vms, [], settings(), now=NOW)
    summary = result.summary
    assert summary["vms_requiring"] == 2 and summary["vms_covered"] == 1
    assert summary["coverage_ratio"] == 0.5 and summary["slots_missing"] == 1
    assert summary["reservations"] == 2
    assert summary["reserved_cpu"] == 4 and summary["reserved_memory_mb"] == 8 * GIB
    b = status(result, "b")
    assert (b.required, b.held, b.short_by) == (2, 1, 1) and b.why
    assert "c" not in [s.uuid for s in result.vm_status]
    assert result.to_dict()["summary"] == summary


def test_unknown_size_or_zone_is_reported_not_guessed():
    fleet = [hv("h1"), hv("h2")]
    vms = [VM("nosize", "h1", "az-a", "m1"), VM("nozone", "elsewhere", "", "m1", 1, 512)]
    result = run_cycle(fleet, vms, [], settings(), now=NOW)
    assert "unknown" in status(result, "nosize").why and "zone" in status(result, "nozone").why
    assert result.reservations == []


def test_names_are_unique_and_avoid_existing_ones():
    fleet = [hv("h%d" % i) for i in range(1, 6)]
    vms = [vm("v%d" % i, "h1") for i in range(4)]
    first = run_cycle(fleet, vms, [], settings(limit_one_new_per_hypervisor=False), now=NOW)
    names = [r.name for r in first.reservations]
    assert len(set(names)) == 4
    taken = Reservation(names[0], "h5", "az-a", {"cpu": 1}, {"x": "h4"})
    again = run_cycle(fleet, vms, [taken], settings(limit_one_new_per_hypervisor=False), now=NOW)
    assert len(set(r.name for r in again.reservations)) == len(again.reservations)


def test_inputs_are_not_modified_and_duplicates_are_rejected():
    fleet = [hv("h1"), hv("h2"), hv("h3")]
    existing = [acked(3600, allocations={"v": "h1", "ghost": "h2"})]
    snapshot = existing[0].to_dict()
    run_cycle(fleet, [vm("v", "h1")], existing, settings(), now=NOW)
    assert existing[0].to_dict() == snapshot
    with pytest.raises(InvalidSpec, match=r"vms\[1\]\.uuid"):
        run_cycle(fleet, [vm("v", "h1"), vm("v", "h2")], [], settings(), now=NOW)


def test_timestamps_round_trip():
    assert format_time(NOW) == "2027-01-15T08:00:00Z"
    assert parse_time("2027-01-15T08:00:00Z") == NOW
    assert parse_time("2027-01-15T10:00:00.5+02:00") == NOW + 0.5
    with pytest.raises(InvalidSpec, match="last_changed"):
        parse_time("yesterday", "last_changed")
