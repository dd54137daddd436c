"""What the proxmox provider does under the faults a Proxmox VE cluster shows, through real
ansible-playbook runs against a PVE API simulator (fakepve) with faults injected: a VM held by a
backup that ends a few seconds later (retried, ends ok), a login ticket that expired (renewed,
the task ends ok), a node that is offline (Unavailable, the other VMs still listed and a
warning naming the node), a task that hangs (Timeout within the time limits given), a running
VM that is an HA resource (taken out of HA before it is deleted, and deleted once the HA
manager has stopped it).
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
    figures = start["resilience"][KEY]  # described from the cluster's entry, then 3 tries to start
    assert start["error"]["retryable"] and (figures["failed_calls"], figures["failures"]) == (1, 3), start
    listed = run.task("list")
    assert not listed.failed, listed
    states = dict((vm["name"], vm["state"]) for vm in listed["vms"])
    assert states["far1"] == "unknown" and states["near1"] == "stopped", states
    named = [w for w in listed["warnings"] if w.startswith("node pve2 of %s is offline" % KEY)]
    assert len(named) == 1 and not [w for w in listed["warnings"] if "pve3" in w], listed


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


def test_ha_resource_leaves_ha_before_it_is_deleted(simulated_pve, tmp_path):
    """community.proxmox#60: an HA-managed VM. The simulator answers a stop of it as PVE does, a
    request to the HA manager whose task ends before the VM stops (here 1 s later)."""
    sim = simulated_pve
    vmid = _new_vm(sim, "ha1", node="pve2", status="running")

    def ha_managed():
        sim.pve.vm(vmid).ha_state = "started"
        sim.pve.time_scale = 0.1  # the HA manager acts ha_delay (10) PVE seconds later
    sim.call(ha_managed)
    run = _run(sim, tmp_path, [{"name": "delete", "resilient.virt.vm": {
        "name": "ha1", "state": "absent"}, "ignore_errors": True}])
    delete = run.task("delete")
    assert not delete.failed and delete["changed"], delete
    assert "ha1" not in [r["name"] for r in sim.oracle.cluster.resources.get(type="vm")]
    asked = [(method, path) for method, path, _body in sim.pve.requests if method != "GET"]
    out_of_ha = ("DELETE", "/api2/json/cluster/ha/resources/vm:%d" % vmid)
    destroy = ("DELETE", "/api2/json/nodes/pve2/qemu/%d" % vmid)
    assert out_of_ha in asked and destroy in asked, asked
    assert asked.index(out_of_ha) < asked.index(destroy), asked
