"""VM dicts from PVE's answers (vm_dict.py): configuration strings as PVE writes them, read
back into the contract's fields."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.vm_dict import (
    METADATA_PREFIX, agent_enabled, config_of, disks_of, interfaces_of, join_tags, metadata_of,
    split_props, state_of, tags_of, uuid_of, vcpus_of, with_metadata)

# a VM's configuration as PVE's /pending lists it (a cloned web server with a cloud-init drive)
PENDING = [
    {"key": "name", "value": "web1"},
    {"key": "cores", "value": 2}, {"key": "sockets", "value": 2},
    {"key": "memory", "value": "2048", "pending": "4096"},
    {"key": "scsi0", "value": "vmdata:base-9000-disk-0/101/vm-101-disk-0.qcow2,size=32G"},
    {"key": "scsi1", "value": "local-lvm:vm-101-disk-1,iothread=1,size=512M"},
    {"key": "virtio10", "value": "ceph:vm-101-disk-2,size=1T"},
    {"key": "ide2", "value": "local-lvm:vm-101-cloudinit,media=cdrom"},
    {"key": "ide0", "value": "none,media=cdrom"},
    {"key": "sata0", "value": "local:iso/debian.iso,media=cdrom,size=600M"},
    {"key": "net0", "value": "virtio=BC:24:11:AA:00:01,bridge=vmbr0,firewall=1"},
    {"key": "net1", "value": "e1000=bc:24:11:aa:00:02,bridge=vmbr1,tag=42"},
    {"key": "net2", "value": "model=vmxnet3,bridge=vmbr2,macaddr=BC:24:11:AA:00:03"},
    {"key": "smbios1", "value": "uuid=6f1c2e4a-8a39-4c6b-9c0b-52d1e1b0a7f1,manufacturer=QUVNVQ=="},
    {"key": "agent", "value": "enabled=1,fstrim_cloned_disks=1"},
    {"key": "tags", "value": "web;prod"},
    {"key": "onboot", "delete": 1},
]


def test_config_and_its_pending_changes():
    config, waiting = config_of(PENDING)
    assert waiting is True
    assert config["memory"] == "2048" and "onboot" not in config
    assert config_of([{"key": "memory", "value": "512"}]) == ({"memory": "512"}, False)
    assert config_of(None) == ({}, False)


def test_disks_in_device_order_without_cdroms_and_cloud_init():
    config = config_of(PENDING)[0]
    assert disks_of(config) == [
        {"bus": "scsi", "slot": "scsi0", "storage": "vmdata",
         "volume": "vmdata:base-9000-disk-0/101/vm-101-disk-0.qcow2", "size_gb": 32},
        {"bus": "scsi", "slot": "scsi1", "storage": "local-lvm",
         "volume": "local-lvm:vm-101-disk-1", "size_gb": 0.5},
        {"bus": "virtio", "slot": "virtio10", "storage": "ceph", "volume": "ceph:vm-101-disk-2",
         "size_gb": 1024},
    ]


def test_disk_slots_sort_as_numbers():
    config = {"scsi%d" % i: "s:vm-1-disk-%d,size=1G" % i for i in (10, 2, 1)}
    assert [d["slot"] for d in disks_of(config)] == ["scsi1", "scsi2", "scsi10"]


def test_interfaces_with_model_mac_bridge_vlan():
    config = config_of(PENDING)[0]
    assert interfaces_of(config) == [
        {"slot": "net0", "model": "virtio", "mac": "bc:24:11:aa:00:01", "bridge": "vmbr0",
         "vlan": None},
        {"slot": "net1", "model": "e1000", "mac": "bc:24:11:aa:00:02", "bridge": "vmbr1",
         "vlan": 42},
        {"slot": "net2", "model": "vmxnet3", "mac": "bc:24:11:aa:00:03", "bridge": "vmbr2",
         "vlan": None},
    ]


@pytest.mark.parametrize("text, tags", [
    ("web;prod", ["prod", "web"]), ("b,a a", ["a", "b"]), ("", []), (None, []),
    ("x;;x", ["x"]),
])
def test_tags(text, tags):
    assert tags_of(text) == tags
    assert tags_of(join_tags(tags)) == tags


def test_metadata_lives_on_its_own_line_of_the_description():
    mine = "Owned by team A.\nDo not stop on Fridays."
    description = with_metadata(mine, {"owner": "a", "flavor": "web"})
    assert description.splitlines()[:2] == mine.splitlines()
    assert description.splitlines()[2] == METADATA_PREFIX + '{"flavor":"web","owner":"a"}'
    assert metadata_of(description) == {"owner": "a", "flavor": "web"}
    changed = with_metadata(description, {"owner": "b"})
    assert metadata_of(changed) == {"owner": "b"} and changed.startswith(mine)
    assert with_metadata(changed, {}) == mine


@pytest.mark.parametrize("description", [None, "", "just words", METADATA_PREFIX + "{broken",
                                         METADATA_PREFIX + "[1, 2]"])
def test_no_metadata_reads_as_empty(description):
    assert metadata_of(description) == {}


@pytest.mark.parametrize("resource, current, lock, state", [
    ({"status": "running"}, None, None, "running"),
    ({"status": "running"}, {"status": "running", "qmpstatus": "paused"}, None, "paused"),
    ({"status": "running"}, {"status": "running", "qmpstatus": "prelaunch"}, None, "paused"),
    ({"status": "stopped"}, None, None, "stopped"),
    ({"status": "stopped"}, None, "suspended", "suspended"),
    ({"status": "stopped"}, None, "backup", "stopped"),
    ({"status": "unknown"}, None, None, "unknown"),
])
def test_state(resource, current, lock, state):
    assert state_of(resource, current, lock) == state


@pytest.mark.parametrize("config, vcpus", [
    ({"cores": 2, "sockets": 2}, 4), ({"cores": "3"}, 3), ({}, 1), ({"vcpus": 3, "cores": 4}, 3),
])
def test_vcpus(config, vcpus):
    assert vcpus_of(config) == vcpus


def test_uuid_and_agent():
    config = config_of(PENDING)[0]
    assert uuid_of(config) == "6f1c2e4a-8a39-4c6b-9c0b-52d1e1b0a7f1"
    assert uuid_of({}) is None
    assert agent_enabled(config) is True
    assert [agent_enabled({"agent": v}) for v in ("1", "0", "enabled=0", "")] == [
        True, False, False, False]
    assert agent_enabled({}) is False


def test_split_props():
    assert split_props("virtio=BC:24:11:00:00:01,bridge=vmbr0") == (
        None, {"virtio": "BC:24:11:00:00:01", "bridge": "vmbr0"})
    assert split_props("local-lvm:vm-1-disk-0,size=4G") == ("local-lvm:vm-1-disk-0", {"size": "4G"})
