"""Who asked for a vSphere VM's power-off: vCenter's events and tasks about it, judged."""
import datetime

from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.power_off import (
    judge_power_off)

T0 = datetime.datetime(2026, 11, 29, 12, 0, 0, tzinfo=datetime.timezone.utc)
VM, HOST = ("vm-1", "host-1")


def _event(key, kind, seconds=0, user="", chain=None):
    return {"key": key, "chain": key if chain is None else chain, "kind": kind, "user": user,
            "time": T0 + datetime.timedelta(seconds=seconds)}


def _task(entity, queued, completed, description="VirtualMachine.powerOff"):
    return {"key": "task-9", "entity": entity, "description": description,
            "queued": T0 + datetime.timedelta(seconds=queued),
            "completed": None if completed is None else T0 + datetime.timedelta(seconds=completed)}


ON = [_event(1, "VmStartingEvent"), _event(2, "VmPoweredOnEvent")]


def test_a_power_off_of_no_task_and_no_user_is_unasked():
    unasked, why = judge_power_off(ON + [_event(5, "VmPoweredOffEvent", 60)], [], (VM, HOST))
    assert unasked is True
    assert why == "VmPoweredOffEvent 5 of no task and no user"


def test_no_power_off_since_the_vm_last_powered_on_is_not_judged():
    assert judge_power_off(ON, [], (VM, HOST)) is None
    earlier = [_event(1, "VmPoweredOffEvent"), _event(3, "VmStartingEvent"),
               _event(4, "VmPoweredOnEvent")]
    assert judge_power_off(earlier, [], (VM, HOST)) is None
    assert judge_power_off([], [], (VM, HOST)) is None


def test_a_power_off_in_a_task_chain_is_asked():
    chain = ON + [_event(5, "TaskEvent", 60, user="admin"), _event(6, "VmStoppingEvent", 60, chain=5),
                  _event(7, "VmPoweredOffEvent", 60, chain=5)]
    assert judge_power_off(chain, [], (VM, HOST)) == (
        False, "VmPoweredOffEvent 7 belongs to the task chain 5")
    # the chain's head alone tells it too, whatever the user field says
    assert judge_power_off(ON + [_event(5, "TaskEvent", 60, chain=5), _event(7, "VmPoweredOffEvent", 60, chain=5)],
                           [], (VM, HOST))[0] is False


def test_a_shutdown_asked_through_vcenter_is_asked():
    events = ON + [_event(5, "VmGuestShutdownEvent", 10, user="admin"),
                   _event(6, "VmPoweredOffEvent", 40)]
    assert judge_power_off(events, [], (VM, HOST)) == (
        False, "VmPoweredOffEvent 6 follows VmGuestShutdownEvent 5, asked by admin")
    # one asked before the VM last powered on says nothing of this power-off
    older = [_event(1, "VmGuestShutdownEvent"), _event(2, "VmPoweredOffEvent")] + [
        dict(e, key=e["key"] + 2) for e in ON] + [_event(9, "VmPoweredOffEvent", 60)]
    assert judge_power_off(older, [], (VM, HOST))[0] is True


def test_a_power_off_during_a_task_on_the_vm_or_its_host_is_asked():
    off = ON + [_event(5, "VmPoweredOffEvent", 60)]
    assert judge_power_off(off, [_task(VM, 59.5, 60.2)], (VM, HOST)) == (
        False, "VmPoweredOffEvent 5 happened during the task task-9 (VirtualMachine.powerOff)")
    assert judge_power_off(off, [_task(HOST, 50, None, "HostSystem.shutdown")], (VM, HOST))[0] is False
    # a task of another VM, or one over before the power-off (the VM's start), does not count
    assert judge_power_off(off, [_task("vm-2", 59, 61), _task(VM, 59.5, 59.9, "VirtualMachine.powerOn")],
                           (VM, HOST))[0] is True


def test_a_power_off_posted_for_a_user_is_asked():
    events = ON + [_event(5, "VmStoppingEvent", 60, user="admin"),
                   _event(6, "VmPoweredOffEvent", 60, user="admin")]
    assert judge_power_off(events, [], (VM, HOST)) == (
        False, "VmPoweredOffEvent 6 was posted for the user admin")


def test_vsphere_ha_isolation_response_is_asked():
    events = ON + [_event(5, "VmPowerOffOnIsolationEvent", 60)]
    assert judge_power_off(events, [], (VM, HOST)) == (
        False, "VmPowerOffOnIsolationEvent 5: vSphere HA's isolation response")
