"""Which nodes of a Proxmox VE cluster the listings warn about, from PVE's own answers (the HA
manager's status given by a recorder of the requests, standing in for the session)."""
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.nodes import (
    maintenance_nodes, maintenance_warning, offline_nodes, offline_warning)


def test_offline_nodes_from_node_entries_and_from_vms_of_unknown_state():
    records = [
        {"type": "node", "node": "pve1", "status": "online"},
        {"type": "node", "node": "pve2", "status": "offline"},
        {"type": "qemu", "node": "pve3", "vmid": 101, "status": "unknown"},
        {"type": "qemu", "node": "pve1", "vmid": 102, "status": "running"},
        {"type": "qemu", "node": "pve2", "vmid": 103, "status": "unknown"},
        {"type": "storage", "node": "pve1", "status": "available"},
    ]
    assert offline_nodes(records) == ["pve2", "pve3"]
    assert offline_nodes([]) == []


def test_the_warning_names_the_node_and_the_provider():
    text = offline_warning("proxmox:pve", "pve2")
    assert text.startswith("node pve2 of proxmox:pve is offline") and "unknown" in text


class Recorder:
    """A session that answers ``answer`` (or raises it) and records the paths asked."""

    def __init__(self, answer):
        self.answer, self.asked = answer, []

    def get(self, *path):
        self.asked.append("/".join(path))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


HA_VM = {"type": "qemu", "node": "pve1", "vmid": 100, "status": "running", "hastate": "started"}
STATUS = {"manager_status": {"node_status": {"pve1": "online", "pve2": "maintenance",
                                             "pve3": "fence"}}}


def test_maintenance_is_read_from_the_ha_manager_when_the_cluster_has_ha_resources():
    session = Recorder(STATUS)
    assert maintenance_nodes(session, [HA_VM]) == ["pve2"]
    assert session.asked == ["cluster/ha/status/manager_status"]


def test_no_ha_resource_no_request():
    session = Recorder(STATUS)
    assert maintenance_nodes(session, [dict(HA_VM, hastate=None)]) == []
    assert session.asked == []


def test_an_unreadable_ha_status_leaves_the_warning_out():
    assert maintenance_nodes(Recorder(RuntimeError("403 Permission check failed")), [HA_VM]) == []
    assert maintenance_nodes(Recorder({}), [HA_VM]) == []
    assert "node pve2 of proxmox:pve is in maintenance" in maintenance_warning("proxmox:pve", "pve2")
