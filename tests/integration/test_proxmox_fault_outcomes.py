"""How the proxmox provider ends each fault that bench/bench_proxmox.py measures, through real
ansible-playbook and ansible-inventory runs against a PVE API simulator (fakepve) with the
fault injected: a backup that holds a VM or a template (the change and the clone wait for its
end, then succeed), a guest whose shutdown outlasts the timeout (a
Timeout, or a power-off with force; never a second shutdown) and a login ticket that expired
before a start (renewed, one start). The offline node is in test_proxmox_faults.py and
test_proxmox_inventory.py. The simulator's own record of requests and tasks is the oracle.
"""
import threading
import time

from playbook_runner import play, run_playbook

KEY = "proxmox:pve"
WATCH_LIMIT = 120  # seconds the lock waits for the task at most
HELD = 2.0  # seconds a backup goes on holding the VM once the task has met its lock


def _run(sim, tmp_path, tasks, name="playbook"):
    return run_playbook(tmp_path, [play(tasks, module_defaults={
        "provider": sim.provider,
        "state_store": "sqlite:///%s" % (tmp_path / "state.db")})], name=name)


def _new_vm(sim, name, node="pve1", status="stopped"):
    vmid = max(vm.vmid for vm in sim.pve.vms) + 1
    sim.call(lambda: sim.pve.add_vm(vmid, name, node=node, status=status,
                                    config={"memory": 512, "cores": 1}))
    return vmid


def _tasks(sim, kind, vmid):
    return [t for t in sim.pve.tasklog if t["type"] == kind and t["id"] == str(vmid)]


def _backup_until_met(sim, vmid, method, suffix):
    """The VM carries PVE's ``backup`` lock (what a client sees of a vzdump in progress) until
    HELD seconds after the first ``method`` request ending with ``suffix`` met it: however
    slowly Ansible starts, the task meets the lock and has to wait for its end."""
    sim.call(lambda: sim.pve.snapshot_lock(vmid, "backup"))

    def watch():
        end = time.monotonic() + WATCH_LIMIT
        while time.monotonic() < end:
            if any(r[0] == method and r[1].endswith(suffix) for r in list(sim.pve.requests)):
                sim.later(HELD, lambda: sim.pve.unlock(vmid))
                return
            time.sleep(0.05)
        sim.later(0, lambda: sim.pve.unlock(vmid))
    threading.Thread(target=watch, daemon=True).start()


def test_change_and_clone_wait_for_the_backups_to_end(simulated_pve, tmp_path):
    sim = simulated_pve
    vmid, template = _new_vm(sim, "locked1"), sim.vm_id("tpl")
    _backup_until_met(sim, vmid, "PUT", "/qemu/%d/config" % vmid)
    _backup_until_met(sim, template, "POST", "/qemu/%d/clone" % template)
    run = _run(sim, tmp_path, [
        {"name": "grow", "resilient.virt.vm": {"name": "locked1", "memory_mb": 1024},
         "ignore_errors": True},
        {"name": "clone", "resilient.virt.vm": {"name": "copy1", "template": "tpl",
                                                "state": "present"}, "ignore_errors": True}])
    for task in (run.task("grow"), run.task("clone")):
        assert not task.failed and task["changed"], task
        assert task["resilience"][KEY]["retries"] >= 1, task["resilience"]
        assert task["resilience"][KEY]["failures"] == 0, task["resilience"]  # answers, no outage
    assert str(sim.pve.vm(vmid).config["memory"]) == "1024"
    writes = [r for r in sim.pve.requests if r[0] == "PUT" and r[1].endswith("/%d/config" % vmid)]
    assert len(writes) == 2, writes  # refused while locked, then once more when it had ended
    assert [vm.name for vm in sim.pve.vms].count("copy1") == 1
    assert len(_tasks(sim, "qmclone", template)) == 1, sim.pve.tasklog


def test_shutdown_outlasting_the_timeout(simulated_pve, tmp_path):
    sim = simulated_pve
    vmid = _new_vm(sim, "slow1", status="running")

    def slow_guest():
        sim.pve.time_scale = 0.01  # the PVE task's 100 s timeout passes in 1 s
        sim.pve.vm(vmid).shutdown_secs = 3600
    sim.call(slow_guest)
    stop = {"name": "slow1", "state": "stopped", "shutdown_timeout": "100s"}
    run = _run(sim, tmp_path, [
        {"name": "wait", "resilient.virt.vm": stop, "ignore_errors": True},
        {"name": "force", "resilient.virt.vm": dict(stop, force=True), "ignore_errors": True}])
    wait = run.task("wait")
    assert wait.failed and wait["error"]["type"] == "Timeout", wait
    force = run.task("force")
    assert not force.failed and force["changed"], force
    assert sim.pve.vm(vmid).status == "stopped"
    assert len(_tasks(sim, "qmshutdown", vmid)) == 2, sim.pve.tasklog  # one per task, no retry
    assert len(_tasks(sim, "qmstop", vmid)) == 1, sim.pve.tasklog


def test_expired_ticket_before_a_start_is_renewed_and_starts_once(simulated_pve, tmp_path):
    sim = simulated_pve
    vmid = _new_vm(sim, "tick2")
    sim.call(lambda: sim.pve.fail("POST", "/qemu/%d/status/start" % vmid, 401,
                                  "permission denied - invalid PVE ticket", times=1))
    logins = len([r for r in sim.pve.requests if r[1].endswith("/access/ticket")])
    run = _run(sim, tmp_path, [{"name": "start", "resilient.virt.vm": {
        "name": "tick2", "state": "running"}, "ignore_errors": True}])
    start = run.task("start")
    assert not start.failed and start["changed"], start
    assert start["resilience"][KEY]["attempts"] == start["resilience"][KEY]["calls"], start
    assert sim.pve.vm(vmid).status == "running"
    assert len(_tasks(sim, "qmstart", vmid)) == 1, sim.pve.tasklog
    posts = [r for r in sim.pve.requests if r[0] == "POST" and r[1].endswith("/status/start")]
    assert len(posts) == 2, posts  # refused (the expired ticket), then repeated once
    now = len([r for r in sim.pve.requests if r[1].endswith("/access/ticket")])
    assert now - logins == 2, now - logins  # the task's login, and the one that renewed it
