"""What the proxmox provider does under the faults a Proxmox VE cluster shows, through real
ansible-playbook runs against a PVE API simulator (fakepve) with faults injected: a VM held by a
backup that ends a few seconds later (retried, ends ok), a login ticket that expired (renewed,
the task ends ok), a node that is offline (Unavailable, and the other VMs still listed), a task
that hangs (Timeout within the time limits given).
"""
from playbook_runner import play, run_playbook

FAST = {"max_attempts": 3, "base_delay": 0.1, "max_delay": 1}
KEY = "proxmox:pve"  # the simulated cluster's provider key: its resilience figures


def _run(sim, tmp_path, tasks, provider=None, name="playbook"):
    return run_playbook(tmp_path, [play(tasks, module_defaults={
        "provider": provider or sim.provider,
        "state_store": "sqlite:///%s" % (tmp_path / "state.db")})], name=name)


def _new_vm(sim, name, node="pve1", status="stopped"):
    vmid = max(vm.vmid for vm in sim.pve.vms) + 1
    sim.call(lambda: sim.pve.add_vm(vmid, name, node=node, status=status,
                                    config={"memory": 256, "cores": 1}))
    return vmid


def test_locked_vm_is_retried_until_the_backup_ends(simulated_pve, tmp_path):
    sim = simulated_pve
    vmid = _new_vm(sim, "busy1")
    sim.call(lambda: sim.pve.snapshot_lock(vmid, "backup"))
    sim.later(2.0, lambda: sim.pve.unlock(vmid))
    run = _run(sim, tmp_path, [{"name": "start", "resilient.virt.vm": {
        "name": "busy1", "state": "running", "resilience": FAST}, "ignore_errors": True}])
    start = run.task("start")
    assert not start.failed and start["changed"], start
    assert start["resilience"][KEY]["attempts"] >= 2, start["resilience"]
    assert start["resilience"][KEY]["failures"] == 0, start["resilience"]  # an answer, not an outage
    assert sim.oracle.nodes("pve1").qemu(vmid).status.current.get()["status"] == "running"


def test_expired_ticket_is_renewed(simulated_pve, tmp_path):
    sim = simulated_pve
    _new_vm(sim, "tick1")
    before = len([r for r in sim.pve.requests if r[1].endswith("/access/ticket")])
    sim.call(lambda: sim.pve.fail("GET", "/cluster/resources", 401,
                                  "permission denied - invalid PVE ticket", times=1))
    run = _run(sim, tmp_path, [{"name": "info", "resilient.virt.vm_info": {"name": "tick1"},
                                "ignore_errors": True}])
    info = run.task("info")
    assert not info.failed and info["vms"][0]["name"] == "tick1", info
    assert info["resilience"][KEY]["attempts"] == 1, info["resilience"]  # renewed, not retried
    logins = [r for r in sim.pve.requests if r[1].endswith("/access/ticket")]
    assert len(logins) - before == 2, logins  # the task's login, and the one that renewed it


def test_offline_node_is_unavailable(simulated_pve, tmp_path):
    sim = simulated_pve
    _new_vm(sim, "far1", node="pve2")
    _new_vm(sim, "near1", node="pve3")
    sim.call(lambda: sim.pve.set_node_offline("pve2"))
    run = _run(sim, tmp_path, [
        {"name": "start", "resilient.virt.vm": {"name": "far1", "state": "running",
                                                "resilience": FAST}, "ignore_errors": True},
        {"name": "list", "resilient.virt.vm_info": {}, "ignore_errors": True}])
    start = run.task("start")
    assert start.failed and start["error"]["type"] == "Unavailable", start
    assert start["error"]["retryable"] and start["resilience"][KEY]["attempts"] == 3, start
    listed = run.task("list")
    assert not listed.failed, listed
    states = dict((vm["name"], vm["state"]) for vm in listed["vms"])
    assert states["far1"] == "unknown" and states["near1"] == "stopped", states


def test_hanging_task_times_out_within_the_limits(simulated_pve, tmp_path):
    sim = simulated_pve
    vmid = _new_vm(sim, "hang1")

    def hang():
        sim.pve.time_scale = 1.0  # tasks take their (simulated) time from now on
        sim.pve.vm(vmid).start_secs = 3600
    sim.call(hang)
    provider = dict(sim.provider, task_timeout="2s")
    run = _run(sim, tmp_path, [{"name": "start", "resilient.virt.vm": {
        "name": "hang1", "state": "running",
        "resilience": dict(FAST, max_attempts=2, timeout_mutating="5s")},
        "ignore_errors": True}], provider=provider)
    start = run.task("start")
    assert start.failed and start["error"]["type"] == "Timeout", start
    assert start["error"]["details"]["in_progress"] or "UPID:" in start["error"]["message"], start
    # attempt 1 gives up at task_timeout, the retry follows that task for its own 5 s
    assert start.duration < 30, start.duration
    starts = [r for r in sim.pve.requests if r[0] == "POST" and r[1].endswith("/status/start")]
    assert len(starts) == 1, starts  # never started a second time
