"""The prechecks of a move, from plain values: the target's state, its capacity after what runs
there and what failover reservations hold there, the zone, and the reservations' rules."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import Reservation
from ansible_collections.resilient.virt.plugins.module_utils._migration.prechecks import (
    fleet_check, prechecks, refusal)
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import OWNER_KEY

VM = {"name": "web1", "uuid": "u1", "state": "running", "vcpus": 2, "memory_mb": 1024,
      "az": "az1", "hypervisor": "hv1"}
HV2 = {"name": "hv2", "az": "az1", "state": "up", "cpu": 8, "used_cpu": 2, "memory_mb": 4096,
       "used_memory_mb": 1024}


def failed(checks):
    return dict((c["check"], c["detail"]) for c in checks if not c["passed"])


def test_a_target_with_room_in_the_zone_passes_every_check():
    checks = prechecks(VM, HV2, [])
    assert [c["check"] for c in checks] == ["hypervisor", "capacity", "zone", "failover"]
    assert failed(checks) == {} and refusal("web1", "hv2", checks) is None


def test_capacity_counts_what_failover_reservations_hold_there():
    held = Reservation(name="r1", host="hv2", resources={"cpu": 1, "memory_mb": 2560})
    checks = failed(prechecks(VM, HV2, [held]))
    assert "512 MiB of memory free, the VM needs 1024" in checks["capacity"]
    assert "held by failover reservations" in checks["capacity"]
    assert set(checks) == {"capacity"}


def test_a_stopped_vm_needs_no_room():
    full = dict(HV2, used_memory_mb=4096, used_cpu=8)
    assert failed(prechecks(dict(VM, state="stopped"), full, [])) == {}


@pytest.mark.parametrize("state", ["maintenance", "disconnected", None])
def test_a_hypervisor_that_takes_no_vms_is_refused(state):
    assert "hypervisor" in failed(prechecks(VM, dict(HV2, state=state), []))


def test_a_hypervisor_that_does_not_tell_its_room_is_refused_for_a_running_vm():
    # an offline Proxmox VE node: the cluster knows nothing of its memory and vCPUs
    offline = dict(HV2, state="disconnected", cpu=None, used_cpu=None, memory_mb=None,
                   used_memory_mb=None)
    checks = failed(prechecks(VM, offline, []))
    assert set(checks) == {"hypervisor", "capacity"}
    assert "cannot be checked" in checks["capacity"]
    assert failed(prechecks(dict(VM, state="stopped"), offline, [])).keys() == {"hypervisor"}


def test_another_zone_needs_allow_zone_change():
    other = dict(HV2, az="az2")
    assert "allow_zone_change" in failed(prechecks(VM, other, []))["zone"]
    assert failed(prechecks(VM, other, [], allow_zone_change=True)) == {}


def test_the_vm_does_not_go_where_its_own_reservation_is():
    mine = Reservation(name="r1", host="hv2", resources={"cpu": 2, "memory_mb": 1024},
                       allocations={"u1": "hv1"})
    # r1 holds room on hv2 for u1 itself: the capacity it holds does not keep u1 out, the rule does
    checks = failed(prechecks(VM, dict(HV2, memory_mb=8192), [mine]))
    assert "r1" in checks["failover"] and "lose its protection" in checks["failover"]


def test_the_vm_does_not_join_a_vm_that_shares_its_reservation():
    shared = Reservation(name="r1", host="hv3", resources={"cpu": 2, "memory_mb": 1024},
                         allocations={"u1": "hv1", "u2": "hv2"})
    checks = failed(prechecks(VM, HV2, [shared]))
    assert "u2" in checks["failover"]
    assert failed(prechecks(VM, dict(HV2, name="hv4"), [shared])) == {}


def test_the_refusal_names_each_failed_check_and_keeps_them_all():
    checks = prechecks(VM, dict(HV2, az="az2", used_memory_mb=4000), [])
    error = refusal("web1", "hv2", checks)
    assert isinstance(error, Conflict)
    assert "capacity:" in error.message and "zone:" in error.message
    assert error.details["prechecks"] == checks


def test_a_vm_a_fleet_keeps_moves_with_the_fix_for_its_fleet():
    assert fleet_check(dict(VM, metadata={}), "libvirt:hv2") is None
    kept = fleet_check(dict(VM, metadata={OWNER_KEY: "web"}, provider_key="libvirt:hv1"),
                       "libvirt:hv2")
    assert kept["check"] == "fleet" and kept["passed"]
    assert "'web'" in kept["detail"] and "again on libvirt:hv1" in kept["detail"]
    assert "libvirt:hv2" in kept["detail"]
