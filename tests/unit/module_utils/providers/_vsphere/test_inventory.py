"""Contract fields from vSphere properties, with pyVmomi's own data objects."""
import pyVmomi

from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import NO_GUEST
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    guest_addresses, guest_info, host_fields)

vim = pyVmomi.vim


def test_guest_addresses_primary_first_then_each_nic_once():
    nics = [vim.vm.GuestInfo.NicInfo(macAddress="00:50:56:00:00:01",
                                     ipAddress=["10.0.0.5", "fe80::250:56ff:fe00:1"]),
            vim.vm.GuestInfo.NicInfo(macAddress="00:50:56:00:00:02", ipAddress=["192.168.1.9"])]
    props = {"guest.ipAddress": "10.0.0.5", "guest.net": nics}
    assert guest_addresses(props) == ["10.0.0.5", "fe80::250:56ff:fe00:1", "192.168.1.9"]


def test_no_tools_no_addresses():
    assert guest_addresses({}) == []
    assert guest_addresses({"guest.ipAddress": None,
                            "guest.net": [vim.vm.GuestInfo.NicInfo(macAddress="m")]}) == []


def test_guest_info_from_tools():
    props = {"guest.toolsRunningStatus": "guestToolsRunning", "guest.guestFullName": "Debian",
             "guest.hostName": "web1"}
    assert guest_info(props) == {"agent": True, "agent_state": "guestToolsRunning",
                                 "os": "Debian", "hostname": "web1"}
    stopped = guest_info({"guest.toolsRunningStatus": "guestToolsNotRunning"})
    assert stopped == dict(NO_GUEST, agent_state="guestToolsNotRunning")
    assert guest_info({"guest.guestFullName": "", "guest.hostName": ""}) == NO_GUEST


def test_a_host_counts_its_vms_from_its_vm_property():
    vms = [vim.VirtualMachine("vm-%d" % i) for i in range(3)]
    host = host_fields({"name": "esx1", "vm": vms, "summary.hardware.numCpuCores": 8,
                        "summary.hardware.memorySize": 8 << 30}, "C0", [])
    assert (host["name"], host["az"], host["cpu"], host["memory_mb"], host["vm_count"]) == (
        "esx1", "C0", 8, 8192, 3)
    assert host_fields({"name": "empty"}, None, [])["vm_count"] == 0
