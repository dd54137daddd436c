"""The rules of a reconfiguration (providers/_reconfigure.py), with hand-written expectations."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    differences, list_changes, merged_metadata, metadata_value)

DISKS = [{"device": "disk", "path": "/a.qcow2", "size_gb": 10, "bus": "virtio", "target": "vda"},
         {"device": "cdrom", "path": "/i.iso", "bus": "sata", "target": "sda"}]
NICS = [{"mac": "52:54:00:00:00:01", "network": "default", "model": "virtio"}]


def test_metadata_is_merged_and_null_removes_a_key():
    assert merged_metadata({"a": "1", "b": "2"}, {"b": None, "c": 3, "d": True, "e": "x"}) == \
        {"a": "1", "c": "3", "d": "true", "e": "x"}
    assert [metadata_value(v) for v in (1.5, False, "s", None)] == ["1.5", "false", "s", None]


def test_differences_name_only_what_differs():
    vm = {"vcpus": 2, "memory_mb": 64, "metadata": {"a": "1"}, "tags": ["x", "y"],
          "autostart": False, "disks": DISKS, "interfaces": NICS}
    same = {"vcpus": 2, "metadata": {"a": 1, "gone": None}, "tags": ["y", "x"],
            "disks": [{"size_gb": 10}, {"device": "cdrom"}],
            "interfaces": [{"mac": "52:54:00:00:00:01".upper()}], "autostart": False,
            "memory_mb": None}
    assert differences(vm, same) == {}
    assert differences(vm, {"vcpus": 3, "tags": ["x"], "metadata": {"a": None}}) == \
        {"vcpus": 3, "tags": ["x"], "metadata": {"a": None}}
    assert differences(vm, {"metadata": {"b": 2}}) == {"metadata": {"b": "2"}}
    assert differences({"state": "stopped"}, {"autostart": True}) == {"autostart": True}


def test_list_changes_by_position():
    grown = [{"size_gb": 10}, {"device": "cdrom"}, {"size_gb": 5}]
    assert list_changes("disks", DISKS, grown) == {
        "update": [], "add": [(2, {"size_gb": 5})], "remove": []}
    assert list_changes("disks", DISKS, grown[:1]) == {
        "update": [], "add": [], "remove": [(1, DISKS[1])]}
    moved = [{"network": "other"}, {"bridge": "br0"}]
    assert list_changes("interfaces", NICS, moved) == {
        "update": [(0, {"network": "other"})], "add": [(1, {"bridge": "br0"})], "remove": []}


def test_what_cannot_change_is_named_by_its_path():
    with pytest.raises(InvalidSpec) as info:
        list_changes("disks", DISKS, [{"size_gb": 20, "bus": "virtio"}, {"device": "disk"}])
    paths = [e["path"] for e in info.value.details["errors"]]
    assert paths == ["disks[0].size_gb", "disks[1].device"]
    assert "20" in info.value.details["errors"][0]["message"]
    with pytest.raises(InvalidSpec) as info:
        differences({"interfaces": NICS}, {"interfaces": [{"model": "e1000"}]})
    assert [e["path"] for e in info.value.details["errors"]] == ["interfaces[0].model"]


def test_placement_compares_the_keys_given():
    vm = {"placement": {"cluster": "c1", "host": "h1", "folder": "/dc/vm"}}
    assert differences(vm, {"placement": {"cluster": "c1", "datastore": None}}) == {}
    assert differences(vm, {"placement": {"host": "h2"}}) == {"placement": {"host": "h2"}}
    pooled = {"placement": {"folder": "/DC0/vm/team-a", "resource_pool": "/DC0/host/C0/Resources/RP1"}}
    assert differences(pooled, {"placement": {"folder": "team-a", "resource_pool": "RP1"}}) == {}
    assert differences(pooled, {"placement": {"folder": "a"}}) == {"placement": {"folder": "a"}}
    assert differences(pooled, {"placement": {"folder": "/team-a"}}) != {}
