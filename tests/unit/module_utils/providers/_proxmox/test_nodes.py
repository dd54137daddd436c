"""Which nodes of a Proxmox VE cluster the listings warn about, from PVE's own answers."""
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.nodes import (
    offline_nodes, offline_warning)


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
