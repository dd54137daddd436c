"""A drain's plan, from plain values: each VM on the target with the most free memory where
every precheck passes, counting what is already planned there (memory, vCPUs, and the new host
of the VMs that share a failover reservation); a VM no target takes is left with each target's
reasons; stopped VMs stay unless asked to move."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import Reservation
from ansible_collections.resilient.virt.plugins.module_utils._migration.drain_plan import (
    Candidate, plan_drain)


def vm(name, memory_mb=1024, state="running", uuid=None):
    return {"name": name, "uuid": uuid or name, "state": state, "vcpus": 1,
            "memory_mb": memory_mb, "az": "az1", "hypervisor": "hv1"}


def hv(name, free_mb, state="up", az="az1"):
    return Candidate(name, "libvirt:" + name, {
        "name": name, "az": az, "state": state, "cpu": 16, "used_cpu": 0,
        "memory_mb": 8192, "used_memory_mb": 8192 - free_mb})


def where(plan):
    return dict((m["vm"]["name"], m["candidate"].hypervisor["name"]) for m in plan["moves"])


def test_the_largest_vm_goes_first_to_the_most_room_and_the_plan_counts_it():
    plan = plan_drain([vm("small", 512), vm("big", 2048), vm("mid", 1024)],
                      [hv("hv2", 2560), hv("hv3", 2048)], [])
    # big -> hv2 (2560 free, then 512); mid -> hv3 (2048 free, then 1024); small -> hv3
    assert where(plan) == {"big": "hv2", "mid": "hv3", "small": "hv3"}
    assert plan["left"] == [] and plan["stays"] == []


def test_a_vm_no_target_has_room_for_is_left_with_each_targets_reason():
    plan = plan_drain([vm("a", 2048), vm("b", 2048)], [hv("hv2", 3000)], [])
    assert where(plan) == {"a": "hv2"}
    [left] = plan["left"]
    assert left["vm"]["name"] == "b"
    assert left["why"].startswith("libvirt:hv2 - capacity: hv2 has 952 MiB of memory free")


def test_a_target_in_maintenance_or_another_zone_takes_nothing():
    plan = plan_drain([vm("a")], [hv("hv2", 4096, state="maintenance"),
                                  hv("hv3", 4096, az="az2")], [])
    [left] = plan["left"]
    assert "libvirt:hv2 - hypervisor: hv2 is maintenance" in left["why"]
    assert "libvirt:hv3 - zone:" in left["why"]
    assert where(plan_drain([vm("a")], [hv("hv3", 4096, az="az2")], [],
                            allow_zone_change=True)) == {"a": "hv3"}


def test_two_vms_sharing_a_reservation_are_not_planned_onto_one_host():
    shared = Reservation(name="r1", host="hv9", resources={"cpu": 1, "memory_mb": 1024},
                         allocations={"a": "hv1", "b": "hv1"})
    plan = plan_drain([vm("a"), vm("b")], [hv("hv2", 4096), hv("hv3", 1024)], [shared])
    assert where(plan) == {"a": "hv2", "b": "hv3"}
    plan = plan_drain([vm("a"), vm("b")], [hv("hv2", 4096)], [shared])
    assert where(plan) == {"a": "hv2"}
    assert "failover: VM(s) a share a failover reservation" in plan["left"][0]["why"]


def test_a_vm_is_not_planned_onto_the_host_of_its_own_reservation():
    own = Reservation(name="r1", host="hv2", resources={"cpu": 1, "memory_mb": 1024},
                      allocations={"a": "hv1"})
    plan = plan_drain([vm("a")], [hv("hv2", 8192), hv("hv3", 2048)], [own])
    assert where(plan) == {"a": "hv3"}


def test_stopped_vms_stay_unless_asked_to_move_and_need_no_room():
    vms = [vm("off", 4096, state="stopped"), vm("on", 1024)]
    plan = plan_drain(vms, [hv("hv2", 1024)], [])
    assert where(plan) == {"on": "hv2"}
    assert [s["vm"]["name"] for s in plan["stays"]] == ["off"]
    assert where(plan_drain(vms, [hv("hv2", 1024)], [], move_stopped=True)) == {
        "on": "hv2", "off": "hv2"}


def test_no_target_at_all_says_so():
    assert plan_drain([vm("a")], [], [])["left"][0]["why"].startswith("no target hypervisor")
