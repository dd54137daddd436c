"""Day-2 pieces of the vSphere backend that need no endpoint: checking changes, the device
specs of ReconfigVM_Task (with pyVmomi's own data objects), faults and states."""
import pyVmomi
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec)
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    list_changes)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.faults import (
    classify_fault)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    custom_values, power_state)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
    device_changes, validate_changes, validate_spec)

vim = pyVmomi.vim
device = vim.vm.device


def paths(err):
    return sorted(e["path"] for e in err.details["errors"])


def test_changes_are_checked_by_field_and_metadata_stored_as_strings():
    assert validate_changes({"vcpus": None, "tags": ["a"], "metadata": {
        "on": True, "ratio": 1.5, "gone": None, "owner": "x"}}) == {
        "tags": ["a"], "metadata": {"on": "true", "ratio": "1.5", "gone": None, "owner": "x"}}
    with pytest.raises(InvalidSpec) as caught:
        validate_changes({"vcpus": 0, "memory_mb": 30, "tags": "web", "metadata": {"k": ""},
                          "disks": [{"size_gb": 1, "bus": "ide"}],
                          "interfaces": [{"network": "n", "mac": "nope"}]})
    assert paths(caught.value) == ["disks[0].bus", "interfaces[0].mac", "memory_mb",
                                   "metadata.k", "tags", "vcpus"]
    assert "null to remove the key" in caught.value.message


def test_a_new_vm_takes_tags_and_refuses_empty_metadata():
    spec = validate_spec({"name": "v", "vcpus": 1, "memory_mb": 64, "tags": ["b", "a", "b"],
                          "metadata": {"n": 1, "b": False}})
    assert spec["tags"] == ["a", "b"] and spec["metadata"] == {"n": "1", "b": "false"}
    with pytest.raises(InvalidSpec) as caught:
        validate_spec({"name": "v", "vcpus": 1, "memory_mb": 64, "metadata": {"k": ""},
                       "tags": [""]})
    assert paths(caught.value) == ["metadata.k", "tags[0]"]


def _vm_devices():
    controller = device.ParaVirtualSCSIController(key=1000, busNumber=0)
    disks = [device.VirtualDisk(
        key=2000 + unit, controllerKey=1000, unitNumber=unit, capacityInKB=1 << 20,
        deviceInfo=vim.Description(label="Hard disk %d" % (unit + 1), summary=""),
        backing=device.VirtualDisk.FlatVer2BackingInfo(fileName="[ds] vm/vm_%d.vmdk" % unit))
        for unit in (0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13)]
    nic = device.VirtualVmxnet3(key=4000, macAddress="00:50:56:00:00:01",
                                backing=device.VirtualEthernetCard.NetworkBackingInfo(
                                    deviceName="old"))
    return [controller] + disks + [nic]


def _backing_for(name, path):
    return device.VirtualEthernetCard.NetworkBackingInfo(deviceName=name)


def test_added_disks_take_free_units_and_a_full_controller_is_an_error():
    devices = _vm_devices()
    current = [{"size_gb": 1.0}] * 13
    steps = list_changes("disks", current, current + [{"size_gb": 2}, {"size_gb": 3, "thin": False}])
    specs, kept = device_changes("disks", steps, devices, None)
    assert kept == []
    assert [(s.operation, s.fileOperation, s.device.controllerKey, s.device.unitNumber,
             s.device.capacityInKB, s.device.backing.thinProvisioned) for s in specs] == [
        ("add", "create", 1000, 14, 2 << 20, True), ("add", "create", 1000, 15, 3 << 20, False)]
    steps = list_changes("disks", current, current + [{"size_gb": 1}] * 3)
    with pytest.raises(InvalidSpec) as caught:
        device_changes("disks", steps, devices, None)
    assert paths(caught.value) == ["disks[15]"] and "no free unit" in caught.value.message


def test_a_vm_without_a_controller_gets_one_for_its_first_disk():
    specs, _kept = device_changes("disks", list_changes("disks", [], [{"size_gb": 1}]), [], None)
    assert isinstance(specs[0].device, device.ParaVirtualSCSIController)
    assert specs[1].device.controllerKey == specs[0].device.key and specs[1].device.unitNumber == 0


def test_a_removed_disk_keeps_its_file_and_is_reported():
    devices = _vm_devices()
    current = [{"size_gb": 1.0}] * 13
    specs, kept = device_changes("disks", list_changes("disks", current, current[:12]),
                                 devices, None)
    (spec,) = specs
    assert spec.operation == "remove" and spec.fileOperation is None  # no "destroy"
    assert spec.device.key == devices[13].key
    assert kept == [("Hard disk 14", "[ds] vm/vm_13.vmdk")]


def test_an_interface_gets_a_new_backing_in_place_or_is_removed():
    devices = _vm_devices()
    current = [{"network": "old", "model": "vmxnet3", "mac": "00:50:56:00:00:01"}]
    steps = list_changes("interfaces", current, [{"network": "new", "mac": "00:50:56:00:00:01"}])
    (spec,), kept = device_changes("interfaces", steps, devices, _backing_for)
    assert (spec.operation, spec.device.key, spec.device.backing.deviceName) == (
        "edit", 4000, "new")
    assert spec.device.macAddress == "00:50:56:00:00:01" and kept == []
    (spec,), kept = device_changes("interfaces", list_changes("interfaces", current, []),
                                   _vm_devices(), _backing_for)
    assert (spec.operation, spec.device.key, kept) == ("remove", 4000, [])


@pytest.mark.parametrize("fault", [vim.fault.CpuHotPlugNotSupported,
                                   vim.fault.MemoryHotPlugNotSupported,
                                   vim.fault.DeviceHotPlugNotSupported])
def test_hot_plug_refusals_are_conflicts_saying_power_it_off(fault):
    err = classify_fault(fault())
    assert isinstance(err, Conflict) and "power the VM off first" in err.message


def test_suspended_is_its_own_state_and_empty_attributes_are_no_value():
    assert power_state("suspended") == "suspended"
    assert power_state(vim.VirtualMachinePowerState.suspended) == "suspended"
    values = [vim.CustomFieldsManager.StringValue(key=1, value="a"),
              vim.CustomFieldsManager.StringValue(key=2, value="")]
    assert custom_values({"customValue": values}, {1: "owner", 2: "cleared"}) == {"owner": "a"}


def test_clone_is_refused_as_vsphere_clones_are_full_copies():
    from ansible_collections.resilient.virt.plugins.module_utils.errors import NotSupported

    with pytest.raises(NotSupported, match="always a full copy"):
        validate_spec({"name": "c", "template": "tpl", "clone": "overlay"})
