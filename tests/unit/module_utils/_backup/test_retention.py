"""Which backups keep_last deletes: the oldest, never one a kept backup builds on."""
from ansible_collections.resilient.virt.plugins.module_utils._backup.operations import (
    children, latest_backup, retention)


def _b(name, at, parent=None, vm="v", phase="Completed", kind="backup"):
    return {"name": name, "completed_at": "2026-11-23T03:%02d:00Z" % at, "parent": parent,
            "vm": vm, "provider": "libvirt:hv1", "phase": phase, "kind": kind}


def test_the_oldest_go_first():
    done = [_b("a", 1), _b("b", 2), _b("c", 3), _b("d", 4)]
    assert [r["name"] for r in retention(done, 2)] == ["b", "a"]
    assert retention(done, 4) == [] and retention(done, 9) == []


def test_the_chain_of_a_kept_incremental_is_kept():
    # full f1 <- i1 <- i2, then a new full f2: keeping 2 keeps f2 and i2, hence i1 and f1 too
    done = [_b("f1", 1), _b("i1", 2, "f1"), _b("i2", 3, "i1"), _b("f2", 4)]
    assert retention(done, 2) == []
    # keeping 1 keeps only f2: the whole old chain goes, newest first
    assert [r["name"] for r in retention(done, 1)] == ["i2", "i1", "f1"]


def test_children_and_latest():
    records = [_b("f1", 1), _b("i1", 2, "f1"), _b("x", 5, vm="other"),
               _b("r", 6, kind="restore"), _b("g", 7, phase="Failed")]
    assert [r["name"] for r in children(records[0], records)] == ["i1"]
    assert latest_backup(records, "v", "libvirt:hv1")["name"] == "i1"
    assert latest_backup(records, "nobody", "libvirt:hv1") is None
