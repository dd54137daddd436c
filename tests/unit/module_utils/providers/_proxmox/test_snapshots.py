"""PVE's snapshot list into snapshot dicts (snapshots.py): the ``current`` pseudo-entry left out
and naming the current snapshot, parents before children, times in RFC 3339 UTC, memory from
``vmstate``; names PVE would refuse refused first, naming the field."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.snapshots import (
    _check_name, _parents_first, _snapshot)

# what GET .../snapshot answers: a tree root -> (a, b), a -> c, listed in no particular order
ENTRIES = [
    {"name": "c", "snaptime": 1795000300, "parent": "a", "vmstate": 0, "description": ""},
    {"name": "b", "snaptime": 1795000200, "parent": "root", "vmstate": 1, "description": "mem"},
    {"name": "current", "parent": "b", "running": 1, "description": "You are here!"},
    {"name": "root", "snaptime": 1795000000, "vmstate": 0},
    {"name": "a", "snaptime": 1795000100, "parent": "root"},
]


def test_the_list_is_parents_first_without_current():
    entries = [e for e in ENTRIES if e["name"] != "current"]
    assert [e["name"] for e in _parents_first(entries)] == ["root", "a", "c", "b"]


def test_a_snapshot_dict():
    snap = _snapshot(ENTRIES[1], current="b")
    assert (snap["name"], snap["parent"], snap["memory"], snap["vm_state"], snap["current"]) == \
        ("b", "root", True, "running", True)
    assert snap["created"] == "2026-11-18T11:10:00Z" and snap["description"] == "mem"
    root = _snapshot(ENTRIES[3], current="b")
    assert (root["parent"], root["memory"], root["vm_state"], root["current"]) == \
        (None, False, "stopped", False)


@pytest.mark.parametrize("name", ["1st", "a", "current", "Pending", "with space", "x" * 41, ""])
def test_names_pve_refuses(name):
    with pytest.raises(InvalidSpec) as caught:
        _check_name(name)
    assert caught.value.details["errors"][0]["path"] == "name"


def test_a_name_pve_takes():
    _check_name("pre-upgrade_2")
