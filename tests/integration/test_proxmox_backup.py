"""The backup module on a simulated Proxmox VE cluster (fakepve, with the lab's addition of the
archives vzdump stores, which fakepve does not model: ``lab/pvesim.py``), through real
ansible-playbook runs: a running VM backed up with vzdump (the record Completed, the archive on
the backup storage with the record's name in its notes, the VM still running), the same task
again changes nothing, an incremental backup is NotSupported, a restore onto the running VM a
Conflict (restores: test_proxmox_restore.py), the backup deleted
with its archive; the token secret appears in no output or store. The simulator's storage and
task list are the oracle.
"""
import os

from playbook_runner import play, run_playbook


def _archives(sim, vmid):
    volumes = sim.pve.storages["local"].get("volumes", {})
    return {name: volume for name, volume in volumes.items()
            if volume.get("content") == "backup" and volume.get("vmid") == vmid}


def test_vzdump_backup_through_the_backup_module(simulated_pve, tmp_path):
    sim = simulated_pve
    vmid = max(vm.vmid for vm in sim.pve.vms) + 1
    sim.call(lambda: sim.pve.add_vm(vmid, "bk1", node="pve2", status="running",
                                    config={"memory": 256, "cores": 1}))
    store = tmp_path / "state.db"

    def backup(title, **args):
        return {"name": title, "resilient.virt.backup": args, "ignore_errors": True}
    run = run_playbook(tmp_path, [play([
        backup("take", vm="bk1", name="bk1-b1"),
        backup("again", vm="bk1", name="bk1-b1"),
        backup("incremental", vm="bk1", name="bk1-b2", incremental=True),
        backup("restore", vm="bk1", name="bk1-r1", state="restored", backup="bk1-b1"),
        {"name": "listed", "resilient.virt.backup_status": {"vm": "bk1"}, "ignore_errors": True},
    ], module_defaults={"provider": sim.token_provider, "state_store": "sqlite:///%s" % store})],
        args=("-vvv",))
    taken = run.task("take")
    assert not taken.failed and taken["changed"], taken
    record = taken["record"]
    assert record["phase"] == "Completed" and record["handle"]["task"].startswith("UPID:pve2:")
    archives = _archives(sim, vmid)
    assert len(archives) == 1, archives
    [(volname, volume)] = archives.items()
    assert volume["notes"] == "resilient.virt backup bk1-b1", volume
    assert record["artifact"]["location"]["volid"] == "local:" + volname, record["artifact"]
    assert record["artifact"]["complete"] is True and record["artifact"]["vm"] == "bk1"
    assert sim.pve.vm(vmid).status == "running" and sim.pve.vm(vmid).lock is None
    dumps = [t for t in sim.pve.tasklog if t["type"] == "vzdump" and t["id"] == str(vmid)]
    assert len(dumps) == 1, dumps  # the second task found the record, no second vzdump

    again = run.task("again")
    assert not again.failed and not again["changed"], again
    for title, error in (("incremental", "NotSupported"), ("restore", "Conflict")):
        refused = run.task(title)
        assert refused.failed and refused["error"]["type"] == error, refused
    phases = {r["name"]: r["phase"] for r in run.task("listed")["records"]}
    assert phases == {"bk1-b1": "Completed", "bk1-b2": "FailedValidation",
                      "bk1-r1": "FailedValidation"}, phases

    secret = sim.token_secret
    assert secret not in run.stdout + run.stderr
    for entry in os.listdir(tmp_path):
        if entry.startswith("state.db"):
            assert secret.encode() not in (tmp_path / entry).read_bytes()

    run = run_playbook(tmp_path, [play([backup("refused", name="bk1-b2", state="absent"),
                                        backup("delete", name="bk1-b1", state="absent")],
                                       module_defaults={"provider": sim.token_provider,
                                                        "state_store": "sqlite:///%s" % store})],
                       name="delete")
    deleted = run.task("delete")
    assert not deleted.failed and deleted["changed"], deleted
    assert _archives(sim, vmid) == {}


def test_a_backup_cancelled_on_timeout_leaves_no_archive(simulated_pve, tmp_path):
    """The simulator's vzdump takes 4 s and does not stop when asked (fakepve answers the
    request to stop a task and goes on): the cancel waits for its end, then deletes the archive
    it stored."""
    sim = simulated_pve
    vmid = max(vm.vmid for vm in sim.pve.vms) + 1

    def slow_vzdump():
        sim.pve.add_vm(vmid, "bk2", node="pve1", status="running",
                       config={"memory": 256, "cores": 1})
        sim.pve.time_scale, sim.pve.vzdump_secs = 1, 4
    sim.call(slow_vzdump)
    run = run_playbook(tmp_path, [play([{"name": "take", "resilient.virt.backup": {
        "vm": "bk2", "name": "bk2-b1", "timeout": "1s", "cancel_on_timeout": True},
        "ignore_errors": True}], module_defaults={
            "provider": sim.provider, "state_store": "sqlite:///%s" % (tmp_path / "state.db")})])
    taken = run.task("take")
    assert taken.failed and taken["record"]["phase"] == "Failed", taken
    assert "Cancel" in str(taken["record"]["conditions"]), taken["record"]
    stops = [r for r in sim.pve.requests if r[0] == "DELETE" and "/tasks/UPID:" in r[1]]
    assert len(stops) == 1, stops
    dumps = [t for t in sim.pve.tasklog if t["type"] == "vzdump" and t["id"] == str(vmid)]
    assert len(dumps) == 1 and dumps[0]["status"] == "stopped", dumps
    assert _archives(sim, vmid) == {}  # stored after the cancel asked, then deleted
