"""resilient.virt.backup and backup_status through real ansible-playbook runs on the lab.

libvirt: a running VM with a small qcow2 disk holding known data, a full backup, data changed
between backups (the domain stopped, ``qemu-io`` writing a pattern, started again), an
incremental backup, each restored to a new VM, and the restored disks read back with
``qemu-io`` - the oracle is the patterns the test wrote. vSphere: snapshot, revert, remove on the
simulator, read back with a pyVmomi session of the test's own. Records are read from the SQLite
file with ``sqlite3``, not through the collection.
"""
import json
import os
import time
import uuid

import libvirt
import pytest
from backup_disks import disk_of, holds, make_vm, remove_prefixed, volume_names, write
from kill_plugin import KILL_ENV
from playbook_runner import play, plugin_env, run_playbook, store_records
from simulator_session import Simulator
from slow_backup_plugin import SLOW_ENV
from store_outage_plugin import OUTAGE_ENV

HERE = os.path.dirname(os.path.abspath(__file__))
HV = "hv1"


class Backups:
    """Playbook runs of the backup modules with one state store, and the records it holds."""

    def __init__(self, tmp_path, providers):
        self.tmp_path = tmp_path
        self.providers = providers
        self.store = "sqlite://%s" % (tmp_path / "state.db")
        self.runs = 0

    def run(self, tasks, env=None, check=False, diff=False):
        self.runs += 1
        environ = plugin_env("kill_plugin", "store_outage_plugin", "slow_backup_plugin")
        environ.update(env or {})
        defaults = {"providers": self.providers, "state_store": self.store}
        named = [dict(task, ignore_errors=True) for task in tasks]
        return run_playbook(self.tmp_path, [play(named, module_defaults=defaults)], env=environ,
                            name="backup%d" % self.runs, timeout=600, check=check, diff=diff)

    def task(self, module, title="task", **args):
        return {"name": title, "resilient.virt." + module: args}

    def records(self):
        return store_records(self.store, "backups")


COMMON_KEYS = {"changed", "failed", "msg", "error", "invocation", "warnings", "deprecations",
               "skipped", "action"}  # set by Ansible itself, or common to every module


def _return_doc(module):
    """The RETURN documentation of ``module``, read from its file."""
    import yaml

    path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "plugins", "modules", module + ".py")
    with open(path) as handle:
        text = handle.read()
    return yaml.safe_load(text.split('RETURN = r"""', 1)[1].split('"""', 1)[0])


def _documented(result, module):
    """Every key of ``result`` (and of its records) is in the module's RETURN documentation."""
    doc = _return_doc(module)
    keys = set(k for k in result.result if not k.startswith("_ansible")) - COMMON_KEYS
    assert keys <= set(doc), keys - set(doc)
    described = set(_return_doc("backup")["record"]["contains"])  # backup_status refers to it
    for record in [result.get("record")] + list(result.get("records") or []):
        if record:
            assert set(record) == described, set(record) ^ described


def _ok(run, title="task", module=None):
    result = run.task(title)
    assert not result.failed, run.describe()
    if module:
        _documented(result, module)
    return result


# -- vSphere --------------------------------------------------------------------------------------
@pytest.fixture
def sim(vsphere):
    oracle = Simulator(vsphere)
    yield oracle
    oracle.close()


def _snapshots(sim, vm_name):
    """Names of the snapshots of ``vm_name``, read through the test's own session."""
    from pyVmomi import vmodl

    ref = sim.vms_named(vm_name)[0]
    pc = vmodl.query.PropertyCollector
    spec = pc.FilterSpec(objectSet=[pc.ObjectSpec(obj=ref)],
                         propSet=[pc.PropertySpec(type=type(ref), pathSet=["snapshot"])])
    result = sim.content.propertyCollector.RetrievePropertiesEx([spec], pc.RetrieveOptions())
    props = dict((p.name, p.val) for p in result.objects[0].propSet or [])
    names, stack = [], list(props["snapshot"].rootSnapshotList) if "snapshot" in props else []
    while stack:
        node = stack.pop()
        names.append(node.name)
        stack.extend(node.childSnapshotList or [])
    return sorted(names)


def test_vsphere_snapshot_revert_and_remove_through_the_modules(tmp_path, vsphere, sim):
    name = "it-bkmod-%s" % uuid.uuid4().hex[:6]
    backups = Backups(tmp_path, {"vc": dict(vsphere, name="bk-vc")})
    try:
        run = backups.run([
            backups.task("vm", "create", provider="vc", name=name, vcpus=1, memory_mb=64,
                         state="stopped"),
            backups.task("backup", provider="vc", vm=name, name="%s-b1" % name),
            backups.task("backup", "again", provider="vc", vm=name, name="%s-b1" % name),
            backups.task("backup_status", "show", vm=name),
        ])
        _ok(run, "create")
        taken = _ok(run, module="backup")
        assert taken["changed"] and taken["ready"] is True
        assert taken["record"]["phase"] == "Completed" and taken["record"]["kind"] == "backup"
        assert taken["record"]["conditions"][0]["status"] is True
        again = _ok(run, "again")
        assert again["changed"] is False and again["record"]["version"] == taken["record"]["version"]
        assert [r["name"] for r in _ok(run, "show", "backup_status")["records"]] == ["%s-b1" % name]
        assert _snapshots(sim, name) == ["%s-b1" % name]
        record = backups.records()["%s-b1" % name]
        assert record["phase"] == "Completed" and record["lease_until"] is None
        assert record["handle"]["task"] and record["artifact"]["location"]["snapshot"]

        run = backups.run([
            backups.task("backup", provider="vc", vm=name, state="restored", name="%s-r1" % name),
            backups.task("backup", "elsewhere", provider="vc", vm=name, state="restored",
                         target=name + "-copy"),
            backups.task("backup", "delete", provider="vc", name="%s-b1" % name, state="absent"),
        ])
        restored = _ok(run)
        assert restored["record"]["phase"] == "Completed"
        assert restored["record"]["backup"] == "%s-b1" % name
        refused = run.task("elsewhere")
        assert refused.failed and refused["error"]["type"] == "NotSupported", refused
        assert refused["record"]["phase"] == "FailedValidation"
        assert _ok(run, "delete")["changed"]
        assert _snapshots(sim, name) == []
        assert "%s-b1" % name not in backups.records()
    finally:
        sim.remove(name)


# -- libvirt --------------------------------------------------------------------------------------
@pytest.fixture
def hv(lab):
    return lab.hypervisor(HV)


@pytest.fixture
def conn(hv):
    """The test's own libvirt connection (the oracle's)."""
    connection = libvirt.open(hv.uri)
    yield connection
    connection.close()


@pytest.fixture
def kvm(hv, conn, tmp_path):
    """A running VM on hv1 whose 64 MiB qcow2 disk holds 0x11 in its first 4 MiB, the backup
    modules' harness for it, and cleanup of every domain and volume named with its prefix."""
    mark = "bm%s" % uuid.uuid4().hex[:8]
    dom, disk = make_vm(conn, hv, mark + "-vm")
    config = {"type": "libvirt", "name": "bk-" + mark, "uri": hv.uri, "domain_type": "qemu"}
    backups = Backups(tmp_path, {"kvm": config})
    backups.mark, backups.vm, backups.dom, backups.disk = mark, mark + "-vm", dom, disk
    backups.key = "libvirt:bk-" + mark
    yield backups
    remove_prefixed(conn, mark)


def _change_disk(hv, kvm, pattern, offset):
    """Stop the VM, write 1 MiB of ``pattern`` at ``offset`` MiB into its disk, start it."""
    kvm.dom.destroy()
    write(hv, kvm.disk, pattern, "%dM" % offset, "1M")
    kvm.dom.create()


def test_full_and_incremental_backups_restored_to_new_vms_hold_what_was_written(hv, conn, kvm):
    b_full, b_inc = kvm.mark + "-full", kvm.mark + "-inc"
    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=b_full)])
    full = _ok(run, module="backup")
    assert full["changed"] and full["ready"] is True, full
    assert full["record"]["phase"] == "Completed" and full["record"]["incremental"] is False
    assert full["record"]["artifact"]["complete"] is True

    _change_disk(hv, kvm, "0x22", 8)
    run = kvm.run([
        kvm.task("backup", provider="kvm", vm=kvm.vm, name=b_inc, incremental=True),
        kvm.task("backup_status", "show", vm=kvm.vm, kind="backup"),
    ])
    inc = _ok(run)["record"]
    assert inc["phase"] == "Completed" and inc["incremental"] is True and inc["parent"] == b_full
    assert [r["name"] for r in _ok(run, "show")["records"]] == [b_full, b_inc]

    r_full, r_inc = kvm.mark + "-r-full", kvm.mark + "-r-inc"
    run = kvm.run([
        kvm.task("backup", "restore full", provider="kvm", vm=kvm.vm, state="restored",
                 backup=b_full, target=r_full, name=kvm.mark + "-rs1"),
        kvm.task("backup", "restore newest", provider="kvm", vm=kvm.vm, state="restored",
                 target=r_inc, name=kvm.mark + "-rs2"),
        kvm.task("backup", "running target", provider="kvm", vm=kvm.vm, state="restored",
                 target=kvm.vm),
    ])
    for title, backup in (("restore full", b_full), ("restore newest", b_inc)):
        record = _ok(run, title)["record"]
        assert record["phase"] == "Completed" and record["backup"] == backup, record
    refused = run.task("running target")
    assert refused.failed and refused["error"]["type"] == "Conflict", refused
    assert refused["record"]["phase"] == "FailedValidation"
    # the oracle: what the test wrote, read back from the restored disks
    first, second = (disk_of(conn.lookupByName(name)) for name in (r_full, r_inc))
    assert holds(hv, first, "0x11", 0, "4M") and holds(hv, first, "0x00", "8M", "1M")
    assert holds(hv, second, "0x11", 0, "4M") and holds(hv, second, "0x22", "8M", "1M")
    assert not conn.lookupByName(r_full).isActive()  # restored VMs are left stopped

    run = kvm.run([
        kvm.task("backup", "parent first", provider="kvm", name=b_full, state="absent"),
        kvm.task("backup", "child", provider="kvm", name=b_inc, state="absent"),
        kvm.task("backup", "parent", provider="kvm", name=b_full, state="absent"),
        kvm.task("backup", "gone", provider="kvm", name=b_full, state="absent"),
    ])
    refused = run.task("parent first")
    assert refused.failed and refused["error"]["type"] == "Conflict" and b_inc in refused["msg"]
    assert _ok(run, "child")["changed"] and _ok(run, "parent")["changed"]
    assert _ok(run, "gone")["changed"] is False
    assert volume_names(conn, "backups", kvm.mark) == []
    assert set(kvm.records()) == {kvm.mark + "-rs1", kvm.mark + "-rs2", refused_name(kvm)}


def refused_name(kvm):
    """The generated name of the one restore record without a given name."""
    [name] = [n for n, r in kvm.records().items() if r["phase"] == "FailedValidation"]
    return name


def test_check_mode_writes_nothing_and_keep_last_keeps_chains_whole(hv, conn, kvm):
    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm)], check=True, diff=True)
    planned = _ok(run)
    assert planned["changed"] and planned["record"]["phase"] == "New"
    assert planned["diff"]["after"]["vm"] == kvm.vm
    assert kvm.records() == {} and volume_names(conn, "backups", kvm.mark) == []

    names = [kvm.mark + suffix for suffix in ("-a", "-b", "-c")]
    tasks = [kvm.task("backup", "first", provider="kvm", vm=kvm.vm, name=names[0]),
             kvm.task("backup", "second", provider="kvm", vm=kvm.vm, name=names[1],
                      incremental=True),
             kvm.task("backup", "third", provider="kvm", vm=kvm.vm, name=names[2], keep_last=1)]
    run = kvm.run(tasks)
    third = _ok(run, "third")
    # the newest is a full backup, so the older chain (a <- b) goes, child first
    assert third["deleted"] == [names[1], names[0]], third
    assert sorted(kvm.records()) == [names[2]]
    assert all(v.startswith(names[2]) for v in volume_names(conn, "backups", kvm.mark))


def _lease_over(kvm, name, margin=0.5):
    """Sleep until the lease of record ``name`` has run out (read from the store file)."""
    from datetime import datetime, timezone

    until = datetime.strptime(kvm.records()[name]["lease_until"], "%Y-%m-%dT%H:%M:%SZ")
    left = until.replace(tzinfo=timezone.utc).timestamp() - time.time()
    time.sleep(max(0.0, left) + margin)


def test_a_run_killed_after_the_start_is_adopted_and_ends_with_the_job_s_real_outcome(kvm):
    name = kvm.mark + "-killed"
    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=name, lease="2s")],
                  env={KILL_ENV: "%s 1 self backup_poll" % kvm.key})
    assert not any(t.name == "task" and not t.failed for t in run.tasks), run.describe()
    left = kvm.records()[name]
    assert left["phase"] == "InProgress" and left["handle"]["checkpoint"] == name, left
    _lease_over(kvm, name)
    run = kvm.run([kvm.task("backup_status", mode="reconcile", lease="2s")])
    result = _ok(run, module="backup_status")
    [adopted] = result["adopted"]
    assert adopted["name"] == name and adopted["phase"] == "Completed", adopted
    record = kvm.records()[name]
    assert record["phase"] == "Completed" and record["artifact"]["complete"] is True
    assert record["owner"] != left["owner"] and record["lease_until"] is None


def test_a_run_killed_before_the_start_leaves_a_record_that_ends_failed_owner_lost(conn, kvm):
    name = kvm.mark + "-lost"
    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=name, lease="2s")],
                  env={KILL_ENV: "%s 1 self backup_start" % kvm.key})
    assert not any(t.name == "task" and not t.failed for t in run.tasks), run.describe()
    assert kvm.records()[name]["phase"] == "InProgress"
    _lease_over(kvm, name)
    # the next backup of the same VM adopts it first
    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=kvm.mark + "-next")])
    result = _ok(run)
    [adopted] = result["adopted"]
    assert adopted["name"] == name and adopted["phase"] == "Failed" and \
        adopted["reason"] == "OwnerLost", adopted
    assert result["record"]["phase"] == "Completed"
    assert kvm.records()[name]["reason"] == "OwnerLost"
    assert not any(v.startswith(name + ".") for v in volume_names(conn, "backups", kvm.mark))


def test_a_reconcile_refused_by_an_open_breaker_gives_the_record_back_at_once(kvm):
    """A reconcile takes over a record whose owner died, then the provider's breaker refuses its
    poll: the task fails with BreakerOpen and writes back the owner and lease the record had, so
    the next reconcile (the breaker reset) adopts it at once instead of after this one's lease."""
    name = kvm.mark + "-refused"
    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=name, lease="2s")],
                  env={KILL_ENV: "%s 1 self backup_poll" % kvm.key})
    assert not any(t.name == "task" and not t.failed for t in run.tasks), run.describe()
    left = kvm.records()[name]
    assert left["phase"] == "InProgress" and left["handle"], left
    _lease_over(kvm, name)
    run = kvm.run([  # the reconcile's own lease is the default, 2 min
        kvm.task("circuit_breaker", "open", provider="kvm", state="open"),
        kvm.task("backup_status", "refused", mode="reconcile"),
    ])
    _ok(run, "open")
    refused = run.task("refused")
    assert refused.failed and refused["error"]["type"] == "BreakerOpen", refused
    after = kvm.records()[name]
    assert (after["owner"], after["lease_until"]) == (left["owner"], left["lease_until"]), after
    assert after["version"] > left["version"]  # taken over, then given back
    kept = set(left) - {"version", "updated_at"}
    assert dict((k, after[k]) for k in kept) == dict((k, left[k]) for k in kept), after

    run = kvm.run([
        kvm.task("circuit_breaker", "reset", provider="kvm", state="reset"),
        kvm.task("backup_status", "again", mode="reconcile", lease="2s"),
    ])
    _ok(run, "reset")
    [adopted] = _ok(run, "again", "backup_status")["adopted"]
    assert adopted["name"] == name and adopted["phase"] == "Completed", adopted
    record = kvm.records()[name]
    assert record["phase"] == "Completed" and record["artifact"]["complete"] is True
    assert record["owner"] != left["owner"]


def _outage_env(kvm, seconds):
    flag = str(kvm.tmp_path / ("outage-%d" % kvm.runs))
    path = kvm.store[len("sqlite://"):]
    return flag, {OUTAGE_ENV: "%s %d %s" % (path, seconds, flag),
                  "RESILIENT_VIRT_STORE_TIMEOUT": "1s"}


def test_the_final_status_survives_a_20_s_store_outage(kvm):
    name = kvm.mark + "-outage"
    flag, env = _outage_env(kvm, 20)
    started = time.monotonic()
    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=name,
                            resource_timeout="60s")], env=env)
    took = time.monotonic() - started
    result = _ok(run)
    assert result["record"]["phase"] == "Completed", result
    with open(flag) as marks:
        assert "held" in marks.read() and took >= 20, took  # the outage happened, was waited out
    assert kvm.records()[name]["phase"] == "Completed"


def test_an_outage_longer_than_resource_timeout_is_a_timeout_and_reconcile_sets_it_right(kvm):
    name = kvm.mark + "-long"
    flag, env = _outage_env(kvm, 25)
    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=name,
                            resource_timeout="10s", lease="2s")], env=env)
    failed = run.task("task")
    assert failed.failed and failed["error"]["type"] == "Timeout", failed
    assert "resource_timeout" in failed["msg"] and name in failed["msg"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(flag) as marks:
            if "released" in marks.read():
                break
        time.sleep(0.5)
    assert kvm.records()[name]["phase"] == "InProgress"  # the outcome was never written
    _lease_over(kvm, name)
    run = kvm.run([kvm.task("backup_status", mode="reconcile", name=name)])
    assert [r["phase"] for r in _ok(run)["adopted"]] == ["Completed"]
    assert kvm.records()[name]["phase"] == "Completed"


def test_a_backup_not_waited_for_is_followed_by_backup_status_and_an_operator_can_fail_one(kvm):
    name = kvm.mark + "-nowait"
    run = kvm.run([
        kvm.task("backup", "start", provider="kvm", vm=kvm.vm, name=name, wait=False),
        kvm.task("backup_status", "wait", mode="wait", name=name, provider="kvm", timeout="60s"),
        kvm.task("backup_status", "set", mode="set", name=name, set_phase="Failed",
                 set_reason="OperatorAborted", set_message="pool replaced"),
        kvm.task("backup_status", "set again", mode="set", name=name, set_phase="Failed",
                 set_reason="OperatorAborted"),
        kvm.task("backup_status", "back", mode="set", name=name, set_phase="Completed"),
        kvm.task("backup_status", "wait failed", mode="wait", name=name),
        kvm.task("backup_status", "missing", name=kvm.mark + "-nothing"),
    ], diff=True)
    started = _ok(run, "start", "backup")
    assert started["record"]["phase"] == "InProgress" and started["ready"] is False
    assert started["record"]["handle"]
    waited = _ok(run, "wait", "backup_status")["record"]
    assert waited["phase"] == "Completed" and waited["ready"] is True  # adopted and followed
    assert waited["owner"] != started["record"]["owner"]
    # a Completed record set to Failed is refused: final phases are final
    refused = run.task("set")
    assert refused.failed and refused["error"]["type"] == "Conflict", refused
    assert "Completed" in refused["msg"] and "Failed" in refused["msg"]
    assert run.task("set again").failed and _ok(run, "back")["changed"] is False
    assert _ok(run, "wait failed")["record"]["phase"] == "Completed"
    missing = run.task("missing")
    assert missing.failed and missing["error"]["type"] == "NotFound", missing


def test_an_operator_fails_a_running_record_and_wait_reports_it(kvm):
    name = kvm.mark + "-op"
    run = kvm.run([
        kvm.task("backup", "start", provider="kvm", vm=kvm.vm, name=name, wait=False),
        kvm.task("backup_status", "set", mode="set", name=name, set_phase="Failed",
                 set_reason="OperatorAborted", set_message="pool replaced"),
        kvm.task("backup_status", "wait", mode="wait", name=name),
        kvm.task("backup_status", "accepted", mode="wait", name=name, fail_on_failure=False),
    ], diff=True)
    _ok(run, "start")
    changed = _ok(run, "set", "backup_status")
    assert changed["changed"] and changed["diff"] == {"before": {"phase": "InProgress"},
                                                      "after": {"phase": "Failed"}}
    failed = run.task("wait")
    assert failed.failed and failed["error"]["type"] == "Conflict"
    assert "Failed (OperatorAborted): pool replaced" in failed["msg"], failed["msg"]
    assert _ok(run, "accepted")["record"]["failed"] is True
    record = kvm.records()[name]
    assert record["phase"] == "Failed" and record["reason"] == "OperatorAborted"


def _no_job(dom):
    """True when no job runs on the domain (the oracle: libvirt's own job info)."""
    return dom.jobInfo()[0] == libvirt.VIR_DOMAIN_JOB_NONE


def test_a_timed_out_wait_cancels_the_job_with_cancel_on_timeout_and_absent_cancels_too(
        hv, conn, kvm):
    # a VM with 1 GiB of data, so that its backup job runs long enough to be slowed down
    kvm.vm = kvm.mark + "-big"
    kvm.dom, disk = make_vm(conn, hv, kvm.vm, size_mib=1024, running=False)
    write(hv, disk, "0x33", "4M", "1020M")
    kvm.dom.create()
    slow = {SLOW_ENV: "1"}  # then 1 MiB/s: minutes
    cancelled, left, dropped = (kvm.mark + suffix for suffix in ("-cancel", "-left", "-drop"))
    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=cancelled, timeout="1s",
                            cancel_on_timeout=True)], env=slow)
    failed = run.task("task")
    assert failed.failed and failed["error"]["type"] == "Timeout" and "cancelled" in failed["msg"], \
        json.dumps(failed.result)[-3000:]
    record = kvm.records()[cancelled]
    assert record["phase"] == "Failed" and record["reason"] == "Cancelled", record
    assert _no_job(kvm.dom) and volume_names(conn, "backups", cancelled) == []

    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=left, timeout="1s")],
                  env=slow)
    failed = run.task("task")
    assert failed.failed and failed["error"]["type"] == "Timeout" and "goes on" in failed["msg"]
    assert kvm.records()[left]["phase"] == "InProgress" and not _no_job(kvm.dom)
    run = kvm.run([kvm.task("backup", provider="kvm", name=left, state="absent")])
    assert _ok(run)["changed"]
    assert left not in kvm.records() and _no_job(kvm.dom)
    assert volume_names(conn, "backups", left) == []

    run = kvm.run([kvm.task("backup", provider="kvm", vm=kvm.vm, name=dropped, wait=False)],
                  env=slow)
    assert _ok(run)["record"]["phase"] == "InProgress"
    run = kvm.run([kvm.task("backup", provider="kvm", name=dropped, state="absent")])
    assert _ok(run)["changed"] and dropped not in kvm.records() and _no_job(kvm.dom)
    assert volume_names(conn, "backups", dropped) == []
