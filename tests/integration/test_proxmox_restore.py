"""Restores of vzdump archives through the backup module on a simulated Proxmox VE cluster
(fakepve, with the lab's additions of the archives vzdump stores and of PVE's qmrestore, which
fakepve does not model: ``lab/pvesim.py``), through real ansible-playbook runs: a backup restored
to a new name (the new VM has the archive's config, on the archive's node, its disk on the
provider's storage), restored onto the same stopped VM, refused onto a running VM with nothing
changed, a rerun and a retried start that restore nothing twice, check mode that restores
nothing, and a cancelled or failed restore that leaves no half-made VM. The oracle is a
proxmoxer session of the test's own and the simulator's task list. One simulator for the module.
"""
import pytest
from playbook_runner import play, run_playbook

DISK_BYTES = 1024 ** 3


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    import pve_simulator  # only the Proxmox tests need fakepve

    with pytest.MonkeyPatch.context() as patch, \
            pve_simulator.started(tmp_path_factory.mktemp("pve"), patch) as simulator:
        yield simulator


def _vm_with_disk(sim, name, node, status):
    """A VM of 256 MiB with a 1 GiB qcow2 disk on vmdata and a NIC; its vmid."""
    vmid = sim.new_vm(name, node, status=status)
    disk = "%d/vm-%d-disk-0.qcow2" % (vmid, vmid)

    def configure():
        sim.pve.vm(vmid).config.update({"scsi0": "vmdata:%s,size=1G" % disk,
                                        "net0": "virtio=BC:24:11:AA:%02X:01,bridge=vmbr0" % (vmid % 256)})
        sim.pve.storages["vmdata"]["volumes"][disk] = {
            "content": "images", "format": "qcow2", "size": DISK_BYTES, "vmid": vmid}
    sim.call(configure)
    return vmid


def _restores(sim, vmid=None):
    return [t for t in sim.pve.tasklog
            if t["type"] == "qmrestore" and (vmid is None or t["id"] == str(vmid))]


def _task(title, **args):
    return {"name": title, "resilient.virt.backup": args, "ignore_errors": True}


def _run(sim, tmp_path, tasks, name, check=False):
    return run_playbook(tmp_path, [play(tasks, module_defaults={
        "provider": sim.provider, "state_store": "sqlite:///%s" % (tmp_path / "state.db")})],
        name=name, check=check)


def _vms(sim, name):
    return [r for r in sim.oracle.cluster.resources.get(type="vm") if r.get("name") == name]


def test_a_backup_restored_to_a_new_name(sim, tmp_path, guarded_provider):
    source = _vm_with_disk(sim, "rs1", "pve2", "running")
    run = _run(sim, tmp_path, [
        _task("take", vm="rs1", name="rs1-b1"),
        _task("restore", vm="rs1", name="rs1-r1", state="restored", target="rs1-copy"),
        _task("again", vm="rs1", name="rs1-r1", state="restored", target="rs1-copy"),
    ], "new-name")
    assert not run.task("take").failed, run.describe()
    restored = run.task("restore")
    assert not restored.failed and restored["changed"], restored
    assert restored["record"]["phase"] == "Completed", restored["record"]
    again = run.task("again")
    assert not again.failed and not again["changed"], again

    [copy] = _vms(sim, "rs1-copy")
    assert copy["node"] == "pve2" and copy["vmid"] != source and copy["status"] == "stopped", copy
    config = sim.oracle.nodes("pve2").qemu(copy["vmid"]).config.get()
    original = sim.oracle.nodes("pve2").qemu(source).config.get()
    assert (config["memory"], config["cores"]) == (original["memory"], original["cores"]), config
    assert config["scsi0"] == "vmdata:%d/vm-%d-disk-0.qcow2,size=1G" % (copy["vmid"], copy["vmid"])
    assert config["net0"].split(",", 1)[0] != original["net0"].split(",", 1)[0], config  # a new MAC
    assert sim.pve.vm(source).status == "running" and original["name"] == "rs1"
    assert len(_restores(sim, copy["vmid"])) == 1  # the rerun restored nothing

    # a retried start (the answer to the first one lost: the handle has no task) finds the restore
    handle = dict(restored["record"]["handle"], task=None)
    provider = guarded_provider(sim.provider)
    retried = provider.backup("backup_start", handle=handle)
    assert retried["task"] == restored["record"]["handle"]["task"], retried
    assert len(_restores(sim, copy["vmid"])) == 1

    checked = _run(sim, tmp_path, [_task("dry", vm="rs1", name="rs1-r2", state="restored",
                                         target="rs1-dry")], "check", check=True)
    assert checked.task("dry")["changed"] and not _vms(sim, "rs1-dry"), checked.describe()
    assert len(_restores(sim)) == 1


def test_restore_onto_the_same_vm_and_refused_while_it_runs(sim, tmp_path):
    vmid = _vm_with_disk(sim, "rs2", "pve3", "stopped")
    node = sim.oracle.nodes("pve3")
    run = _run(sim, tmp_path, [_task("take", vm="rs2", name="rs2-b1")], "take")
    assert not run.task("take").failed, run.describe()
    node.qemu(vmid).config.put(memory=512, cores=2)

    run = _run(sim, tmp_path, [_task("restore", vm="rs2", name="rs2-r1", state="restored")],
               "same")
    restored = run.task("restore")
    assert not restored.failed and restored["record"]["phase"] == "Completed", restored
    config = node.qemu(vmid).config.get()
    assert (int(config["memory"]), int(config["cores"])) == (256, 1), config
    assert config["name"] == "rs2" and "lock" not in config, config
    assert config["net0"].startswith("virtio=BC:24:11:AA:"), config  # the same VM keeps its MAC
    assert len(_restores(sim, vmid)) == 1

    node.qemu(vmid).status.start.post()
    before = node.qemu(vmid).config.get()
    run = _run(sim, tmp_path, [_task("running", vm="rs2", name="rs2-r2", state="restored")],
               "running")
    refused = run.task("running")
    assert refused.failed and refused["error"]["type"] == "Conflict", refused
    assert "'rs2' is running; stop it first" in refused["msg"], refused["msg"]
    assert refused["record"]["phase"] == "FailedValidation", refused["record"]
    assert len(_restores(sim, vmid)) == 1
    assert node.qemu(vmid).config.get() == before
    assert node.qemu(vmid).status.current.get()["status"] == "running"


def test_a_cancelled_or_failed_restore_leaves_no_vm(sim, tmp_path):
    """The simulator's restore takes 4 s and does not stop when asked (fakepve answers the
    request to stop a task and goes on): the cancel waits for its end, then deletes the VM it
    made. A restore onto a full storage fails, and leaves nothing either."""
    _vm_with_disk(sim, "rs3", "pve1", "stopped")
    run = _run(sim, tmp_path, [_task("take", vm="rs3", name="rs3-b1")], "take")
    assert not run.task("take").failed, run.describe()
    before = len(_restores(sim))

    def slow_restore(seconds):
        sim.pve.time_scale, sim.pve.restore_secs = (1, seconds) if seconds else (0, 0)
    sim.call(lambda: slow_restore(4))
    try:
        run = _run(sim, tmp_path, [_task("cancelled", vm="rs3", name="rs3-r1", state="restored",
                                         target="rs3-copy", timeout="1s", cancel_on_timeout=True)],
                   "cancel")
    finally:
        sim.call(lambda: slow_restore(0))
    cancelled = run.task("cancelled")
    assert cancelled.failed and cancelled["record"]["phase"] == "Failed", cancelled
    assert "Cancel" in str(cancelled["record"]["conditions"]), cancelled["record"]
    started = _restores(sim)[before:]
    assert len(started) == 1 and started[0]["status"] == "stopped", started
    assert not _vms(sim, "rs3-copy") and sim.pve.vm(int(started[0]["id"])) is None

    def full(avail):
        store = sim.pve.storages["vmdata"]
        store.pop("avail", None) if avail is None else store.update(avail=avail)
    sim.call(lambda: full(1024))
    try:
        run = _run(sim, tmp_path, [_task("full", vm="rs3", name="rs3-r2", state="restored",
                                         target="rs3-full")], "full")
    finally:
        sim.call(lambda: full(None))
    failed = run.task("full")
    assert failed["record"]["phase"] == "Failed" and failed["record"]["failed"], failed["record"]
    assert "No space left on device" in str(failed["record"]), failed["record"]
    assert not _vms(sim, "rs3-full")
    assert not [v for v in sim.pve.storages["vmdata"]["volumes"].values()
                if v.get("vmid") == int(_restores(sim)[-1]["id"])]
