"""Reference cases of failover reservations (conformance/failover_cases.json), case by case.

The file is kept next to this test (see conformance/README.md for where it comes from). Its
memory values are bytes under the key ``memory``; they are converted to the collection's
``memory_mb`` here, at the boundary.
"""
import itertools
import json
import os

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import (
    stale_allocations)
from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import (
    plan_evacuation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    VM, Hypervisor, Reservation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    sanitize_az_for_name)
from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import run_cycle
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    required_count, validate_requirements)
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import (
    FailoverSettings)

from .oracle import guarantee_breaches, plan_errors
from .reference import (
    check_vms_still_eligible, does_vm_fit, find_eligible_reservations, graph_maps,
    is_vm_eligible_for_reservation)

MIB = 1024 * 1024
CASES_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance",
                          "failover_cases.json")


def _load():
    with open(CASES_FILE) as handle:
        cases = json.load(handle)["cases"]
    return [pytest.param(case, id="%s:%s" % (case["kind"], case["name"])) for case in cases]


def _mb(resources, key):
    value = resources.get(key)
    return None if value is None else value // MIB


def _vm(data):
    res = data.get("resources") or {}
    return VM(uuid=data["uuid"], host=data["host"], az=data.get("az", ""),
              flavor=data.get("flavor", ""), vcpus=res.get("vcpus"), memory_mb=_mb(res, "memory"),
              extra_specs=dict(data.get("extra_specs") or {}))


def _reservation(data):
    res = data.get("resources") or {}
    resources = {}
    if "cpu" in res:
        resources["cpu"] = res["cpu"]
    if "memory" in res:
        resources["memory_mb"] = res["memory"] // MIB
    return Reservation(name=data["name"], host=data["host"], resources=resources,
                       allocations=dict(data.get("allocations") or {}))


def _hypervisor(data):
    return Hypervisor(name=data["name"], az=data["az"], cpu=data["capacity"]["cpu"],
                      memory_mb=_mb(data["capacity"], "memory"), traits=frozenset(data["traits"]),
                      used_cpu=data["allocation"]["cpu"],
                      used_memory_mb=_mb(data["allocation"], "memory"))


def _existing_stay_eligible(vm, res, all_res):
    """After ``vm`` joins ``res``, each earlier member could still be (re-)added to it."""
    joined = Reservation(res.name, res.host, resources=dict(res.resources),
                         allocations=dict(res.allocations, **{vm.uuid: vm.host}))
    for uuid, host in res.allocations.items():
        temp = Reservation(res.name, res.host, resources=dict(res.resources),
                           allocations={u: h for u, h in joined.allocations.items() if u != uuid})
        others = [temp if r.name == res.name else r for r in all_res]
        if not is_vm_eligible_for_reservation(VM(uuid, host, vcpus=vm.vcpus,
                                                 memory_mb=vm.memory_mb), temp, others):
            return False
    return True


def check_is_vm_eligible_for_reservation(case):
    vm, res = _vm(case["vm"]), _reservation(case["reservation"])
    all_res = [_reservation(r) for r in case["all_reservations"]]
    eligible = is_vm_eligible_for_reservation(vm, res, all_res)
    assert eligible is case["expected_eligible"]
    if eligible and "expected_existing_vms_stay_eligible" in case:
        assert _existing_stay_eligible(vm, res, all_res) is case["expected_existing_vms_stay_eligible"]


def check_find_eligible_reservations(case):
    found = find_eligible_reservations(_vm(case["vm"]),
                                       [_reservation(r) for r in case["all_reservations"]])
    assert len(found) == case["expected_count"]
    assert [r.name for r in found] == case["expected_names"]
    assert [r.host for r in found] == case["expected_hosts"]


def _allocations(reservations):
    return {r.name: dict(r.allocations) for r in reservations}


def check_check_vms_still_eligible(case):
    reservations = [_reservation(r) for r in case["all_reservations"]]
    removed = check_vms_still_eligible({v["uuid"]: v["host"] for v in case["vms"]}, reservations)
    assert removed == case["expected_removed"]
    after = _allocations(reservations)
    for name, uuids in removed.items():
        for uuid in uuids:
            del after[name][uuid]
    assert after == case["expected_allocations_after"]
    assert len(removed) == case["expected_reservations_changed"]


def check_remove_invalid_vms(case):
    reservations = [_reservation(r) for r in case["all_reservations"]]
    removals = stale_allocations(reservations, {v["uuid"]: v["host"] for v in case["vms"]},
                                 case["vms_on_hypervisor"])
    after = _allocations(reservations)
    for removal in removals:
        del after[removal.reservation][removal.vm]
    assert after == case["expected_allocations_after"]
    assert len(set(r.reservation for r in removals)) == case["expected_reservations_changed"]


def check_does_vm_fit_in_reservation(case):
    assert does_vm_fit(_vm(case["vm"]), _reservation(case["reservation"])) is case["expected_fits"]


def check_flavor_failover_requirement(case):
    requirements = validate_requirements(case["flavor_failover_requirements"])
    assert required_count(case["flavor"], requirements) == case["expected_count"]


def check_sanitize_az_for_name(case):
    assert sanitize_az_for_name(case["az"]) == case["expected"]


def check_dependency_graph_build(case):
    vm_res, res_vms, current_hosts = graph_maps([_reservation(r) for r in case["all_reservations"]])
    assert len(vm_res) == case["expected_vm_count"]
    assert len(res_vms) == case["expected_reservation_count"]
    assert {u: ["/" + n for n in names] for u, names in vm_res.items()} == \
        case["expected_vm_to_reservation_keys"]
    assert {"/" + n: members for n, members in res_vms.items()} == \
        case["expected_reservation_key_to_vms"]
    assert current_hosts == case["expected_vm_current_host"]


def _check_scenario_outcome(case, hypervisors, vms, result, requirements):
    reservations = result.reservations
    count = len(reservations)
    if case["expected_max_reservations"] > 0:
        assert case["expected_min_reservations"] <= count <= case["expected_max_reservations"]
    else:
        assert count >= case["expected_min_reservations"]
    by_name = result.reservations_by_name()
    for name, removed in case["vms_removed_from_reservation"].items():
        if name in by_name:
            for uuid, host in removed.items():
                assert by_name[name].allocations.get(uuid) != host, (name, uuid)
    zone = {hv.name: hv.az for hv in hypervisors}
    held = {}
    for res in reservations:
        for uuid in res.allocations:
            held.setdefault(uuid, []).append(res)
    for vm in vms:
        required = required_count(vm.flavor, requirements)
        mine = held.get(vm.uuid, [])
        if vm.uuid in case["verify_vms_have_reservation"]:
            assert mine, "%s holds no reservation" % vm.uuid
        assert len(mine) >= required, "%s holds %d of %d" % (vm.uuid, len(mine), required)
        for res in mine:
            assert res.host != vm.host and zone[res.host] == vm.az
    for hv in hypervisors:
        on_host = [r for r in reservations if r.host == hv.name]
        assert hv.used_cpu + sum(r.resources["cpu"] for r in on_host) <= hv.cpu
        assert hv.used_memory_mb + sum(r.resources["memory_mb"] for r in on_host) <= hv.memory_mb


def _check_failures(hypervisors, vms, reservations, requirements):
    """The guarantee by the oracle's own matching, then the evacuation plan against it."""
    needed = {vm.uuid: required_count(vm.flavor, requirements) for vm in vms}
    hosts = [hv.name for hv in hypervisors]
    assert guarantee_breaches(hosts, vms, reservations, needed) == []
    for size in range(1, max(needed.values(), default=0) + 1):
        for failed in itertools.combinations(hosts, size):
            protected = [vm for vm in vms if needed[vm.uuid] >= size]
            plan = plan_evacuation(failed, protected, reservations).to_dict()
            assert plan_errors(plan, protected, reservations, failed) == [], plan
            assert plan["complete"], plan


def check_integration_scenario(case):
    hypervisors = [_hypervisor(h) for h in case["hypervisors"]]
    running = {uuid: h["name"] for h in case["hypervisors"] for uuid in h["instances"]}
    vms = [_vm(v) for v in case["vms"]]
    settings = FailoverSettings(requirements=validate_requirements(case["flavor_failover_requirements"]))
    reservations = [_reservation(r) for r in case["reservations"]]
    result = None
    for cycle in range(max(1, case["reconcile_count"])):
        result = run_cycle(hypervisors, vms, reservations, settings, now=1.8e9 + 60 * cycle,
                           cycle=cycle, running=running)
        reservations = result.reservations
    _check_scenario_outcome(case, hypervisors, vms, result, settings.requirements)
    if not case["skip_failure_simulation"]:
        _check_failures(hypervisors, vms, reservations, settings.requirements)


@pytest.mark.parametrize("case", _load())
def test_case(case):
    globals()["check_" + case["kind"]](case)
