"""Which VMs with disks an evacuation starts on another hypervisor: those whose every disk file
the target sees at the same path in a pool shared with the failed host, never a copy; the others
are failed moves naming each disk and why. The target here is a stand-in object that answers
``locate_disks`` as told and records what it was asked (the lab test runs the real libvirt one)."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import (
    execute_move, recreate_spec)
from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound, NotSupported

SHARED = "/var/lib/libvirt/shared/db-disk0.qcow2"
LOCAL = "/var/lib/libvirt/images/db-disk1.qcow2"
VM = {"name": "db", "vcpus": 1, "memory_mb": 64, "interfaces": [], "metadata": {"tier": "db"},
      "disks": [{"path": SHARED, "format": "qcow2", "bus": "virtio", "device": "disk", "size_gb": 1,
                 "pool": "shared", "target": "vda"},
                {"device": "cdrom", "path": None, "bus": "sata"}]}
MOVE = {"vm": "u-1", "from_host": "hv1", "reservation": "r1", "to_host": "hv2", "priority": 0}
PROVED = {"pool": "shared", "shared": True, "witness": "libvirt:hv3", "witness_error": None}
SEEN = {"pool": "shared", "shared": None, "witness": None, "witness_error": "libvirt:hv3 did not answer (x)"}
NOT_SHARED = {"pool": "images", "shared": False, "witness": "libvirt:hv3", "witness_error": None}


class Target:
    key = "libvirt:hv2"
    type_name = "libvirt"
    capabilities = frozenset(("describe", "create", "power", "locate_disks"))

    def __init__(self, located):
        self.located, self.calls = located, []

    def describe(self, name):
        if not any(call[0] == "create" for call in self.calls):
            raise NotFound(name)
        return {"name": name, "hypervisor": "hv2", "state": "running" if self.calls[-1][0] == "power" else "stopped"}

    def locate_disks(self, paths, witnesses=()):
        self.calls.append(("locate_disks", list(paths), list(witnesses)))
        return dict((path, self.located.get(path)) for path in paths)

    def create(self, spec):
        self.calls.append(("create", spec))

    def power(self, name, action):
        self.calls.append(("power", name, action))


def test_a_vm_on_a_proved_shared_pool_is_defined_at_the_same_paths_without_a_new_volume():
    target = Target({SHARED: PROVED})
    outcome = execute_move(MOVE, VM, None, target, False, witnesses=["hv3"])
    assert outcome["action"] == "recreate", outcome
    assert target.calls[0] == ("locate_disks", [SHARED], ["hv3"])
    spec = target.calls[1][1]
    assert spec["disks"] == [{"path": SHARED, "format": "qcow2", "bus": "virtio", "device": "disk"},
                             {"device": "cdrom", "bus": "sata"}]
    assert target.calls[2] == ("power", "db", "on")
    assert outcome["disks"] == [{"path": SHARED, "pool": "shared",
                                 "proof": "a marker made through the target was found through libvirt:hv3"}]


def test_a_disk_only_seen_on_the_target_moves_and_says_sharing_was_not_proved():
    outcome = execute_move(MOVE, VM, None, Target({SHARED: SEEN}), False)
    assert outcome["action"] == "recreate"
    assert "sharing not proved" in outcome["disks"][0]["proof"]
    assert "libvirt:hv3 did not answer" in outcome["disks"][0]["proof"]


@pytest.mark.parametrize("located, words", [
    ({}, ["has no volume at that path", "local storage", "backup"]),
    ({LOCAL: NOT_SHARED}, ["pool 'images' of libvirt:hv2 is not shared", "libvirt:hv3"]),
])
def test_a_disk_the_target_cannot_use_is_a_failed_move_naming_it_and_why(located, words):
    vm = dict(VM, disks=VM["disks"] + [{"path": LOCAL, "format": "qcow2", "device": "disk"}])
    target = Target(dict(located, **{SHARED: PROVED}))
    outcome = execute_move(MOVE, vm, None, target, False)
    assert outcome["action"] == "failed" and outcome["error"]["type"] == "NotSupported"
    message = outcome["error"]["message"]
    assert LOCAL in message and SHARED not in message, message
    assert all(word in message for word in words), message
    assert [call[0] for call in target.calls] == ["locate_disks"]  # nothing defined, nothing started


def test_check_mode_locates_the_disks_and_defines_nothing():
    target = Target({SHARED: PROVED})
    outcome = execute_move(MOVE, VM, None, target, True)
    assert outcome["action"] == "recreate" and outcome["disks"][0]["pool"] == "shared"
    assert [call[0] for call in target.calls] == ["locate_disks"]


def test_a_diskless_vm_moves_without_locating_anything():
    target = Target({})
    target.capabilities = frozenset(("describe", "create", "power"))
    outcome = execute_move(MOVE, dict(VM, disks=[]), None, target, False)
    assert outcome["action"] == "recreate" and "disks" not in outcome
    assert [call[0] for call in target.calls] == ["create", "power"]


def test_a_target_that_cannot_locate_disks_refuses_a_vm_with_disks():
    target = Target({SHARED: PROVED})
    target.capabilities = frozenset(("describe", "create", "power"))
    outcome = execute_move(MOVE, VM, None, target, False)
    assert outcome["action"] == "failed" and "cannot tell whether it sees the disks" in outcome["error"]["message"]
    assert target.calls == []


def test_a_disk_without_a_file_is_refused():
    vm = dict(VM, disks=[{"device": "disk", "path": None}])
    with pytest.raises(NotSupported, match="a disk without a file"):
        recreate_spec(vm, {}, "libvirt:hv2")
