"""resilient.virt.vm_snapshot (and vm_info's snapshots) through real ansible-playbook runs.

libvirt (lab hypervisor hv1): a running VM whose qcow2 disk holds 0x11 in its first 4 MiB; a
snapshot with memory, data written after it (the VM stopped, ``qemu-io`` writing 0x77), a
revert that must bring the VM back running and the data back to 0x11 (read with ``qemu-io`` on
the stopped VM's disk), retention with a pinned snapshot, check mode, and the refusals. The
oracle is the test's own libvirt-python connection and ``qemu-io``.

vSphere (the lab's simulator): quiescing a VM without VMware Tools (refused with the reason;
best effort says it was not quiesced) and one with them, a snapshot with memory and one without,
and reverts that leave the VM in each snapshot's state, read with the test's own pyVmomi session.

Proxmox VE (a simulator of the test's own, fakepve: no PVE server can run here): a snapshot
with memory of a running VM, taken once however often the task runs, quiescing refused (the
PVE API has no such flag) and best effort saying so, a revert that brings back the snapshot's
configuration and its running state (memory) or leaves the VM stopped (no memory), retention
with a pinned snapshot, and absent, and a VM whose raw disk on a directory storage keeps no
snapshots (refused, nothing made); read with the test's own proxmoxer session.
"""
import uuid

import libvirt
import pytest
from backup_disks import holds, make_vm, remove_prefixed, write
from playbook_runner import play, run_playbook
from simulator_session import Simulator

HV = "hv1"
# every test runs its tasks in the controller's worker and as module processes (conftest.py)
BOTH_PATHS = pytest.mark.parametrize("task_path", ["worker", "module"], indirect=True)
TOOLS_VM = "DC0_C0_RP0_VM0"  # the simulator's VM with VMware Tools running (lab/vcsim/main.go)


class Snapshots:
    """Playbook runs of vm_snapshot tasks with one provider and one state store."""

    def __init__(self, tmp_path, provider):
        self.tmp_path = tmp_path
        self.defaults = {"provider": provider, "state_store": "sqlite://%s" % (tmp_path / "s.db")}
        self.runs = 0

    def run(self, tasks, check=False, diff=False):
        self.runs += 1
        named = [dict(task, ignore_errors=True) for task in tasks]
        run = run_playbook(self.tmp_path, [play(named, module_defaults=self.defaults)],
                           name="snap%d" % self.runs, check=check, diff=diff)
        assert "Traceback" not in run.output, run.output
        return run


def snap(title, **args):
    return {"name": title, "resilient.virt.vm_snapshot": args}


def ok(run, title):
    result = run.task(title)
    assert not result.failed, run.describe()
    return result


def refused(run, title, error_type):
    result = run.task(title)
    assert result.failed and result["error"]["type"] == error_type, result
    return result["msg"]


# -- libvirt --------------------------------------------------------------------------------------
@pytest.fixture
def kvm(lab, tmp_path):
    """(hv, the test's connection, VM name, its domain, its disk, the runner); every domain and
    volume of the test removed afterwards."""
    hv = lab.hypervisor(HV)
    conn = libvirt.open(hv.uri)
    mark = "sn%s" % uuid.uuid4().hex[:8]
    dom, disk = make_vm(conn, hv, mark + "-vm")
    runner = Snapshots(tmp_path, {"type": "libvirt", "name": "sn-" + mark, "uri": hv.uri})
    yield hv, conn, mark + "-vm", dom, disk, runner
    for found in conn.listAllDomains(0):
        if found.name().startswith(mark) and found.isActive():
            found.destroy()
        if found.name().startswith(mark):
            found.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
    remove_prefixed(conn, mark)
    conn.close()


def _names(dom):
    return sorted(s.getName() for s in dom.listAllSnapshots(0))


@BOTH_PATHS
def test_libvirt_snapshot_revert_retention_and_refusals(kvm):
    hv, _conn, vm, dom, disk, runner = kvm
    run = runner.run([
        snap("take", vm=vm, name="before", memory=True, pinned=True, description="pre"),
        snap("again", vm=vm, name="before", memory=True, pinned=True, description="pre"),
        snap("no memory", vm=vm, name="disk-only", memory=False),
        snap("quiesced", vm=vm, name="quiesced", memory=False, quiesce=True),
        snap("both", vm=vm, name="both", memory=True, quiesce=True),
        {"name": "info", "resilient.virt.vm_info": {"name": vm, "snapshots": True}},
    ])
    taken = ok(run, "take")
    assert taken["changed"] and taken["snapshot"]["memory"] and taken["snapshot"]["pinned"]
    assert taken["snapshot"]["description"] == "pre" and taken["snapshot"]["vm_state"] == "running"
    assert ok(run, "again")["changed"] is False
    assert "always hold its memory" in refused(run, "no memory", "NotSupported")
    assert "always hold its memory" in refused(run, "quiesced", "NotSupported")
    assert "quiesce" in refused(run, "both", "InvalidSpec")
    [listed] = ok(run, "info")["vms"][0]["snapshots"]
    assert (listed["name"], listed["memory"], listed["current"], listed["parent"]) == \
        ("before", True, True, None)
    assert listed["created"].endswith("Z")
    assert _names(dom) == ["before"]
    assert "snapshot='internal'" in dom.snapshotLookupByName("before").getXMLDesc().replace('"', "'")

    dom.destroy()  # data written after the snapshot, on the stopped VM's disk
    write(hv, disk, "0x77", 0, "1M")
    assert holds(hv, disk, "0x77", 0, "1M")
    run = runner.run([snap("revert", vm=vm, name="before", state="reverted")])
    assert ok(run, "revert")["vm"]["state"] == "running"
    assert dom.isActive()  # the snapshot was taken running: the VM runs again
    dom.destroy()
    assert holds(hv, disk, "0x11", 0, "1M") and not holds(hv, disk, "0x77", 0, "1M")

    run = runner.run([snap("stopped", vm=vm, name="n1", memory=True)]
                     + [snap("keep %s" % n, vm=vm, name=n, keep_last=2) for n in ("n2", "n3")])
    assert ok(run, "stopped")["snapshot"]["memory"] is False  # a stopped VM: disks only
    assert any("disks only" in w for w in ok(run, "stopped")["warnings"])
    assert ok(run, "keep n3")["pruned"] == ["n1"]
    assert _names(dom) == ["before", "n2", "n3"]  # the pinned one is never counted or pruned

    run = runner.run([snap("would", vm=vm, name="n4", keep_last=1)], check=True, diff=True)
    would = ok(run, "would")
    assert would["changed"] and would["pruned"] == ["n2", "n3"]
    assert would["diff"]["after"]["snapshots"] == ["before", "n4"]
    assert _names(dom) == ["before", "n2", "n3"]
    run = runner.run([snap("delete", vm=vm, name="n3", state="absent"),
                      snap("deleted", vm=vm, name="n3", state="absent")])
    assert ok(run, "delete")["changed"] and ok(run, "deleted")["changed"] is False
    assert _names(dom) == ["before", "n2"]


def test_libvirt_refuses_a_raw_disk_before_anything_is_made(lab, tmp_path):
    hv = lab.hypervisor(HV)
    conn = libvirt.open(hv.uri)
    mark = "sr%s" % uuid.uuid4().hex[:8]
    try:
        dom, _disk = make_vm(conn, hv, mark + "-vm", disk_format="raw")
        runner = Snapshots(tmp_path, {"type": "libvirt", "name": "sr-" + mark, "uri": hv.uri})
        run = runner.run([snap("raw", vm=mark + "-vm", name="s1", memory=True)])
        message = refused(run, "raw", "NotSupported")
        assert "is raw" in message and "qcow2" in message
        assert dom.listAllSnapshots(0) == []
    finally:
        remove_prefixed(conn, mark)
        conn.close()


# -- vSphere --------------------------------------------------------------------------------------
def _tree(sim, name):
    """{snapshot name: (power state it records, quiesced)} of VM ``name``, and its power state,
    read through the test's own session."""
    ref = sim.vm(name)
    found, stack = {}, list(ref.snapshot.rootSnapshotList) if ref.snapshot else []
    while stack:
        node = stack.pop()
        found[node.name] = (str(node.state), bool(node.quiesced))
        stack.extend(node.childSnapshotList or [])
    return found, str(ref.runtime.powerState)


@BOTH_PATHS
def test_vsphere_quiesce_memory_and_reverts(tmp_path, vsphere):
    sim = Simulator(vsphere)
    name = "it-snap-%s" % uuid.uuid4().hex[:6]
    runner = Snapshots(tmp_path, dict(vsphere, name="sn-vc"))
    try:
        run = runner.run([
            {"name": "create", "resilient.virt.vm": {"name": name, "vcpus": 1, "memory_mb": 64,
                                                     "state": "running"}},
            snap("quiesced", vm=name, name="q", quiesce=True),
            snap("best effort", vm=name, name="disk", quiesce="best_effort"),
            snap("memory", vm=name, name="mem", memory=True),
            snap("tools", vm=TOOLS_VM, name=name, quiesce=True),
            snap("tools gone", vm=TOOLS_VM, name=name, state="absent"),
        ])
        assert "VMware Tools are not running" in refused(run, "quiesced", "Conflict")
        best = ok(run, "best effort")
        assert "VMware Tools are not running" in best["not_quiesced"]
        assert best["snapshot"]["quiesced"] is False and best["snapshot"]["memory"] is False
        tools = ok(run, "tools")
        assert tools["snapshot"]["quiesced"] is True and tools["not_quiesced"] is None
        assert ok(run, "tools gone")["changed"]
        tree, power = _tree(sim, name)
        assert tree == {"disk": ("poweredOff", False), "mem": ("poweredOn", False)}
        assert power == "poweredOn"

        run = runner.run([snap("to disk", vm=name, name="disk", state="reverted")])
        assert ok(run, "to disk")["vm"]["state"] == "stopped"
        assert _tree(sim, name)[1] == "poweredOff"  # no memory: the VM is left off
        run = runner.run([snap("to memory", vm=name, name="mem", state="reverted")])
        assert ok(run, "to memory")["vm"]["state"] == "running"
        assert _tree(sim, name)[1] == "poweredOn"
    finally:
        sim.remove(name)
        sim.close()


# -- Proxmox VE -----------------------------------------------------------------------------------
def _pve_snapshots(sim, node, vmid):
    """{name: (holds memory, parent)} of the VM's snapshots, and its current snapshot, read by
    the test's own proxmoxer session (PVE's ``current`` entry is the VM itself)."""
    entries = sim.oracle.nodes(node).qemu(vmid).snapshot.get()
    current = [e.get("parent") for e in entries if e["name"] == "current"]
    return ({e["name"]: (bool(e.get("vmstate")), e.get("parent"))
             for e in entries if e["name"] != "current"}, current[0] if current else None)


@BOTH_PATHS
def test_proxmox_snapshot_revert_retention_and_absent(simulated_pve, tmp_path):
    sim = simulated_pve
    runner = Snapshots(tmp_path, sim.provider)
    run = runner.run([
        {"name": "create", "resilient.virt.vm": {  # LVM-thin: a storage that keeps snapshots
            "name": "snap1", "vcpus": 1, "memory_mb": 512, "disks": [{"size_gb": 1}],
            "placement": {"datastore": "local-lvm"}, "state": "running"}},
        {"name": "raw", "resilient.virt.vm": {  # a raw image on a directory storage
            "name": "raw1", "vcpus": 1, "memory_mb": 512, "disks": [{"size_gb": 1}],
            "placement": {"datastore": "vmdata"}, "state": "running"}},
        snap("raw refused", vm="raw1", name="s1"),
        snap("take", vm="snap1", name="before", memory=True, pinned=True, description="pre"),
        snap("again", vm="snap1", name="before", memory=True, pinned=True, description="pre"),
        snap("quiesced", vm="snap1", name="quiesced", quiesce=True),
        snap("best effort", vm="snap1", name="disk", quiesce="best_effort"),
        snap("bad name", vm="snap1", name="1st"),
        {"name": "info", "resilient.virt.vm_info": {"name": "snap1", "snapshots": True}},
    ])
    vm = ok(run, "create")["vm"]
    node, vmid = vm["hypervisor"], sim.vm_id("snap1")
    pve = sim.oracle.nodes(node).qemu(vmid)
    taken = ok(run, "take")
    assert taken["changed"] and taken["snapshot"]["memory"] and taken["snapshot"]["pinned"]
    assert taken["snapshot"]["description"] == "pre" and taken["snapshot"]["vm_state"] == "running"
    assert ok(run, "again")["changed"] is False
    assert "no quiesce option" in refused(run, "quiesced", "NotSupported")
    best = ok(run, "best effort")
    assert "no quiesce option" in best["not_quiesced"] and best["snapshot"]["quiesced"] is False
    assert best["snapshot"]["memory"] is False and best["snapshot"]["vm_state"] == "stopped"
    assert "'1st'" in refused(run, "bad name", "InvalidSpec")
    assert "keeps no snapshots" in refused(run, "raw refused", "NotSupported")
    raw = sim.oracle.nodes(ok(run, "raw")["vm"]["hypervisor"]).qemu(sim.vm_id("raw1"))
    assert [e["name"] for e in raw.snapshot.get()] == ["current"]  # nothing made
    listed = ok(run, "info")["vms"][0]["snapshots"]
    assert [(s["name"], s["memory"], s["current"], s["parent"]) for s in listed] == \
        [("before", True, False, None), ("disk", False, True, "before")]
    assert all(s["created"].endswith("Z") for s in listed)
    assert _pve_snapshots(sim, node, vmid) == (
        {"before": (True, None), "disk": (False, "before")}, "disk")

    pve.config.put(memory=1024)  # changed after the snapshots, and the VM stopped
    pve.status.stop.post()
    run = runner.run([snap("to memory", vm="snap1", name="before", state="reverted")])
    assert ok(run, "to memory")["vm"]["state"] == "running"
    assert pve.status.current.get()["status"] == "running"  # the snapshot holds memory
    assert int(pve.config.get()["memory"]) == 512  # the snapshot's configuration is back
    run = runner.run([snap("to disk", vm="snap1", name="disk", state="reverted")])
    assert ok(run, "to disk")["vm"]["state"] == "stopped"
    assert pve.status.current.get()["status"] == "stopped"  # no memory: left stopped
    assert _pve_snapshots(sim, node, vmid)[1] == "disk"

    run = runner.run([snap("gone", vm="snap1", name="disk", state="absent")]
                     + [snap("keep %s" % n, vm="snap1", name=n, keep_last=2)
                        for n in ("n1", "n2", "n3")])
    assert ok(run, "gone")["changed"]
    assert ok(run, "keep n3")["pruned"] == ["n1"]
    assert sorted(_pve_snapshots(sim, node, vmid)[0]) == ["before", "n2", "n3"]  # pinned kept
    run = runner.run([snap("delete", vm="snap1", name="n3", state="absent"),
                      snap("deleted", vm="snap1", name="n3", state="absent")])
    assert ok(run, "delete")["changed"] and ok(run, "deleted")["changed"] is False
    assert _pve_snapshots(sim, node, vmid)[0] == {"before": (True, None), "n2": (False, "before")}
