"""The vm_snapshot task's decisions, without Ansible: the mark of the snapshots it made,
retention, what a task does from the VM's snapshots, the kind of snapshot a VM's state allows,
the options; and whole tasks on libvirt's in-process test driver (a domain with a qcow2 disk:
the driver keeps snapshots as metadata), read back with the test's own libvirt connection."""
import libvirt
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._snapshot import marks
from ansible_collections.resilient.virt.plugins.module_utils._snapshot.retention import to_prune
from ansible_collections.resilient.virt.plugins.module_utils._snapshot.task import (
    check_params, kind, plan, run_vm_snapshot)
from ansible_collections.resilient.virt.plugins.module_utils._task_context import TaskContext
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotFound, NotSupported)

DAY = 86400.0
NOW = 1795900000.0  # 2026-11-28T...Z


def shown(name, created, managed=True, pinned=False, current=False):
    from ansible_collections.resilient.virt.plugins.module_utils._time import format_time

    return {"name": name, "created": format_time(created) if created is not None else None,
            "managed": managed, "pinned": pinned, "current": current, "vm_state": "running"}


def test_the_mark_is_read_back_and_leaves_the_users_text():
    for text in ("", "pre-upgrade", "two\nlines"):
        for pinned in (False, True):
            assert marks.read(marks.marked(text, pinned)) == (text, True, pinned)
    assert marks.read("made by hand") == ("made by hand", False, False)
    assert marks.read("[resilient.virt snapshot] in the middle\nof it") == (
        "[resilient.virt snapshot] in the middle\nof it", False, False)


def test_keep_last_keeps_the_newest_managed_unpinned_ones():
    snapshots = [shown("hand", NOW - 9 * DAY, managed=False), shown("pin", NOW - 8 * DAY, pinned=True),
                 shown("a", NOW - 3 * DAY), shown("b", NOW - 2 * DAY), shown("c", NOW - DAY)]
    assert [s["name"] for s in to_prune(snapshots, keep_last=2)] == ["a"]
    assert [s["name"] for s in to_prune(snapshots, keep_last=1, keep="b")] == ["a"]
    assert to_prune(snapshots, keep_last=5) == []


def test_max_age_prunes_older_ones_but_never_the_kept_or_pinned_ones():
    snapshots = [shown("pin", NOW - 30 * DAY, pinned=True), shown("old", NOW - 8 * DAY),
                 shown("new", NOW - DAY), shown("undated", None)]
    assert [s["name"] for s in to_prune(snapshots, max_age=7 * DAY, now=NOW)] == ["old"]
    assert to_prune(snapshots, max_age=7 * DAY, now=NOW, keep="old") == []


def test_same_second_snapshots_are_pruned_parent_first():
    snapshots = [shown("p", NOW), shown("child", NOW), shown("grandchild", NOW)]
    assert [s["name"] for s in to_prune(snapshots, keep_last=1)] == ["p", "child"]


def test_plan_is_idempotent_by_name():
    one = [shown("s1", NOW - DAY, current=True)]
    assert plan("present", "s1", one) == {"create": False, "delete": False, "revert": False,
                                          "prune": []}
    assert plan("present", "s2", one)["create"] is True
    assert plan("absent", "s2", one)["delete"] is False
    assert plan("absent", "s1", one)["delete"] is True
    assert plan("reverted", "s1", one)["revert"] is True  # an action: made each time
    with pytest.raises(NotFound, match="no snapshot 's2'; its snapshots: s1"):
        plan("reverted", "s2", one)
    with pytest.raises(Conflict, match="2 snapshots named 's1'"):
        plan("present", "s1", one + one)


def test_plan_counts_the_new_snapshot_in_keep_last():
    two = [shown("a", NOW - 2 * DAY), shown("b", NOW - DAY)]
    assert plan("present", "c", two, keep_last=2, now=NOW)["prune"] == ["a"]
    assert plan("present", "b", two, keep_last=1, now=NOW)["prune"] == ["a"]  # exists: kept


def test_kind_follows_the_vm_state():
    assert kind("running", True, False) == (True, False, None, None)
    memory, quiesce, why, warning = kind("stopped", True, "best_effort")
    assert (memory, quiesce) == (False, False) and "at rest" in why and "disks only" in warning
    memory, quiesce, why, warning = kind("running", True, "best_effort")
    assert (memory, quiesce, warning) == (True, False, None) and "with memory" in why
    assert kind("running", False, True) == (False, True, None, None)


def params(**given):
    base = {"vm": "test", "name": "s1", "state": "present", "description": None, "memory": False,
            "quiesce": False, "pinned": False, "keep_last": None, "max_age": None}
    base.update(given)
    return base


def test_every_bad_option_is_named_at_once():
    with pytest.raises(InvalidSpec) as caught:
        check_params(params(vm="", name="a\nb", quiesce="maybe", keep_last=0, max_age="soon"))
    paths = sorted(e["path"] for e in caught.value.details["errors"])
    assert paths == ["keep_last", "max_age", "name", "quiesce", "vm"]
    with pytest.raises(InvalidSpec, match="quiesce: true with memory: true"):
        check_params(params(memory=True, quiesce="yes"))
    with pytest.raises(InvalidSpec, match="keep_last applies to state: present only"):
        check_params(params(state="absent", keep_last=2))
    assert check_params(params(quiesce="best_effort", max_age="168h"))["max_age"] == 7 * DAY
    assert check_params(params(max_age="30d"))["max_age"] == 30 * DAY
    with pytest.raises(InvalidSpec, match="max_age='400d' is longer than the 366d allowed"):
        check_params(params(max_age="400d"))


# -- whole tasks on libvirt's test driver -----------------------------------------------------------
DOMAIN = ("<domain type='test'><name>%s</name><memory unit='MiB'>64</memory><os><type>hvm</type>"
          "</os><devices><disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
          "<source file='/guest/%s.qcow2'/><target dev='vda' bus='virtio'/></disk></devices>"
          "</domain>")


@pytest.fixture
def testbed(tmp_path):
    """(task runner, the test's connection, the running domain ``snap``); one test driver per
    process, shared by both: the domain is removed afterwards."""
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
        resolve_settings)
    from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
    from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
        open_provider)

    conn = libvirt.open("test:///default")
    dom = conn.defineXML(DOMAIN % ("snap", "snap"))
    dom.create()
    provider = open_provider({"type": "libvirt", "name": "unit", "uri": "test:///default"},
                             resolve_settings({}, environ={}), MemoryStore("unit"), environ={})

    def run(check=False, **given):
        warnings = []
        ctx = TaskContext(open_store=lambda: None, open_provider=lambda *a, **k: provider,
                          provider_config=lambda *a, **k: {}, provider_references=lambda: [],
                          read_settings=lambda: None, environ={}, warnings=warnings,
                          check_mode=check, diff_mode=True)
        result = run_vm_snapshot(params(**dict({"vm": "snap"}, **given)), ctx)
        result["warnings"] = warnings
        return result

    yield run, dom
    dom.destroy()
    dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
    provider.close()
    conn.close()


def names(dom):
    return sorted(s.getName() for s in dom.listAllSnapshots(0))


def test_a_task_takes_once_and_check_mode_takes_nothing(testbed):
    run, dom = testbed
    would = run(check=True, name="s1", memory=True)
    assert would["changed"] and would["snapshot"]["managed"] and names(dom) == []
    assert would["diff"] == {"before": {"snapshots": [], "current": None},
                             "after": {"snapshots": ["s1"], "current": "s1"}}
    taken = run(name="s1", memory=True, description="pre")
    assert taken["changed"] and names(dom) == ["s1"]
    assert taken["snapshot"]["description"] == "pre" and taken["snapshot"]["current"]
    assert "[resilient.virt snapshot]" in dom.snapshotLookupByName("s1").getXMLDesc()
    again = run(name="s1", memory=True, description="other")
    assert again["changed"] is False and names(dom) == ["s1"]
    assert "left as it is" in again["warnings"][0]


def test_retention_deletes_only_what_it_made_and_never_a_pinned_one(testbed):
    run, dom = testbed
    dom.snapshotCreateXML("<domainsnapshot><name>by-hand</name></domainsnapshot>", 0)
    run(name="pin", memory=True, pinned=True)
    for name in ("a", "b", "c"):
        result = run(name=name, memory=True, keep_last=2)
    assert result["pruned"] == ["a"]
    assert names(dom) == ["b", "by-hand", "c", "pin"]
    assert run(name="pin", state="absent")["changed"] and names(dom) == ["b", "by-hand", "c"]


def test_a_vm_without_a_disk_is_refused_before_anything_is_made(testbed):
    run, dom = testbed
    conn = dom.connect()
    bare = conn.defineXML("<domain type='test'><name>bare</name><memory unit='MiB'>64</memory>"
                          "<os><type>hvm</type></os></domain>")
    try:
        with pytest.raises(NotSupported, match="it has no writable disk"):
            run(vm="bare", name="s1", memory=False)
        assert bare.listAllSnapshots(0) == []
    finally:
        bare.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
