"""vm_fleet and vm_info on a simulated three-node Proxmox VE cluster (fakepve,
``pve_simulator.py``) through real ansible-playbook runs, on both execution paths, read back
with a proxmoxer session of the test's own: a fleet spread over the nodes, run again without a
change, one VM dropped from the list and pruned, then the whole fleet pruned."""
from playbook_runner import play, run_playbook

OWNER = "pve-fleet"


def _fleet(names):
    return [{"name": name, "vcpus": 1, "memory_mb": 64, "placement": {"host": node},
             "state": "running" if name.endswith("0") else "stopped", "metadata": {"tier": "app"}}
            for name, node in names]


def _fleet_task(title, vms, **more):
    return {"name": title, "resilient.virt.vm_fleet": dict(owner=OWNER, vms=vms, **more),
            "ignore_errors": True}


def _vms(sim):
    """{name: (node, status, description)} of the cluster's VMs but the template, by the
    oracle."""
    found = {}
    for record in sim.oracle.cluster.resources.get(type="vm"):
        if record.get("template"):
            continue
        config = sim.oracle.nodes(record["node"]).qemu(record["vmid"]).config.get()
        found[record["name"]] = (record["node"], record["status"], config.get("description", ""))
    return found


def test_fleet_over_the_nodes_and_its_prune(simulated_pve, tmp_path):
    sim = simulated_pve
    store = "sqlite:///%s" % (tmp_path / "state.db")
    wanted = [("app-0", "pve1"), ("app-1", "pve2"), ("app-2", "pve3")]
    fleet = [dict(vm, provider="pve") for vm in _fleet(wanted)]
    tasks = [
        _fleet_task("create", fleet),
        _fleet_task("again", fleet),
        {"name": "info", "resilient.virt.vm_info": {"provider": "pve",
                                                    "filters": {"name": "app-*"}},
         "ignore_errors": True},
        _fleet_task("drop one", fleet[:2], prune=True, max_prune=1),
        _fleet_task("prune all", [], prune=True, max_prune="100%"),
    ]
    defaults = {"providers": {"pve": sim.provider}, "state_store": store}
    run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)])
    created = run.task("create")
    assert not created.failed and created["summary"]["created"] == 3, created
    again = run.task("again")
    assert not again.failed and not again["changed"], again
    assert again["summary"]["unchanged"] == 3, again
    info = run.task("info")
    assert not info.failed, info
    assert sorted((vm["name"], vm["hypervisor"], vm["state"]) for vm in info["vms"]) == [
        ("app-0", "pve1", "running"), ("app-1", "pve2", "stopped"), ("app-2", "pve3", "stopped")]
    assert all(vm["metadata"] == {"tier": "app", "resilient_virt_owner": OWNER}
               for vm in info["vms"]), info["vms"]

    dropped = run.task("drop one")
    assert not dropped.failed and dropped["summary"]["pruned"] == 1, dropped.result
    assert [vm["name"] for vm in dropped["vms"] if vm["outcome"] == "pruned"] == ["app-2"]
    pruned = run.task("prune all")
    assert not pruned.failed and pruned["summary"]["pruned"] == 2, pruned
    assert _vms(sim) == {}


def test_fleet_as_the_oracle_sees_it(simulated_pve, tmp_path):
    sim = simulated_pve
    store = "sqlite:///%s" % (tmp_path / "state.db")
    fleet = [dict(vm, provider="pve") for vm in _fleet([("db-0", "pve2"), ("db-1", "pve3")])]
    run = run_playbook(tmp_path, [play([_fleet_task("create", fleet)], module_defaults={
        "providers": {"pve": sim.provider}, "state_store": store})])
    assert not run.task("create").failed, run.task("create")
    found = _vms(sim)
    assert {name: found[name][:2] for name in found} == {
        "db-0": ("pve2", "running"), "db-1": ("pve3", "stopped")}
    assert all(OWNER in description and "tier" in description
               for _node, _status, description in found.values()), found
