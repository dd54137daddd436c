"""resilient.virt.vm_migrate and hypervisor (drain) between the nodes of a simulated Proxmox VE
cluster (fakepve, with the lab's addition of PVE's QEMU migration, which fakepve does not model:
``lab/pvesim.py``), through real ansible-playbook runs.

The oracle is the test's own proxmoxer session (the node and status of each VM) and the
simulator's record of requests (which migrations were asked, with which parameters). The
simulator refuses a running VM's migration without ``online``, as PVE does.
"""
from urllib.parse import parse_qsl

from playbook_runner import play, run_playbook

MIGRATE = "/api2/json/nodes/{node}/qemu/{vmid}/migrate"


def _where(sim, name):
    [(node, status)] = [(r["node"], r["status"]) for r in sim.oracle.cluster.resources.get(type="vm")
                        if r.get("name") == name]
    return node, status


def _migrations(sim):
    """(path, parameters) of each migration asked for."""
    return [(path, dict(parse_qsl(body.decode() if isinstance(body, bytes) else body)))
            for method, path, body in sim.pve.requests
            if method == "POST" and path.endswith("/migrate")]


def _run(sim, tmp_path, tasks, name, check=False):
    defaults = {"provider": sim.provider, "state_store": "sqlite:///%s" % (tmp_path / "s.db")}
    named = [dict(task, ignore_errors=True) for task in tasks]
    run = run_playbook(tmp_path, [play(named, module_defaults=defaults)], name=name, check=check)
    assert "Traceback" not in run.output, run.output
    return run


def _move(title, vm, target):
    return {"name": title, "resilient.virt.vm_migrate": {"vm": vm, "target": target}}


def test_a_running_vm_moves_online_to_another_node(simulated_pve, tmp_path):
    sim = simulated_pve
    vmid = sim.new_vm("web1", "pve1")
    planned = _run(sim, tmp_path, [_move("plan", "web1", "pve2")], "plan", check=True).task("plan")
    assert not planned.failed and planned["changed"], planned.result
    assert _where(sim, "web1") == ("pve1", "running") and _migrations(sim) == []

    run = _run(sim, tmp_path, [_move("move", "web1", "pve2"), _move("again", "web1", "pve2")],
               "move")
    moved, again = run.task("move"), run.task("again")
    assert not moved.failed and moved["changed"], moved.result
    assert moved["migration"]["mode"] == "live"
    assert moved["vm"]["hypervisor"] == "pve2" and moved["vm"]["state"] == "running"
    assert _where(sim, "web1") == ("pve2", "running")
    [(path, body)] = _migrations(sim)
    assert path == MIGRATE.format(node="pve1", vmid=vmid)
    assert (body.get("target"), str(body.get("online")), str(body.get("with-local-disks"))) == (
        "pve2", "1", "1"), body
    assert not again.failed and not again["changed"], again.result
    assert len(_migrations(sim)) == 1  # the second run asked nothing


def test_a_stopped_vm_moves_offline(simulated_pve, tmp_path):
    sim = simulated_pve
    sim.new_vm("cold1", "pve1", status="stopped")
    moved = _run(sim, tmp_path, [_move("move", "cold1", "pve3")], "cold").task("move")
    assert not moved.failed and moved["migration"]["mode"] == "cold", moved.result
    assert _where(sim, "cold1") == ("pve3", "stopped")
    [(_path, body)] = _migrations(sim)
    assert "online" not in body and body.get("target") == "pve3", body


def test_an_offline_node_is_refused_before_anything_moves(simulated_pve, tmp_path):
    sim = simulated_pve
    sim.new_vm("db1", "pve1")
    sim.call(lambda: sim.pve.set_node_offline("pve3"))
    refused = _run(sim, tmp_path, [_move("move", "db1", "pve3"),
                                   _move("nowhere", "db1", "pve9")], "offline")
    offline, unknown = refused.task("move"), refused.task("nowhere")
    assert offline.failed and offline["error"]["type"] == "Conflict", offline["msg"]
    assert "pve3" in offline["msg"], offline["msg"]
    assert unknown.failed and "pve9" in unknown["msg"] and "pve2" in unknown["msg"], unknown.result
    assert _where(sim, "db1") == ("pve1", "running") and _migrations(sim) == []


def test_a_node_is_drained_onto_the_others(simulated_pve, tmp_path):
    sim = simulated_pve
    for name in ("app1", "app2"):
        sim.new_vm(name, "pve2")
    sim.new_vm("idle1", "pve2", status="stopped")
    drain = {"name": "drain", "resilient.virt.hypervisor": {
        "name": "pve2", "state": "maintenance", "stopped_vms": "move"}}
    drained = _run(sim, tmp_path, [drain], "drain").task("drain")
    assert not drained.failed and drained["changed"], drained.result
    for name, status in (("app1", "running"), ("app2", "running"), ("idle1", "stopped")):
        node, now = _where(sim, name)
        assert node in ("pve1", "pve3") and now == status, (name, node, now)
    assert len(_migrations(sim)) == 3
