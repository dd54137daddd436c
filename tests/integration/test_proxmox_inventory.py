"""The hypervisors inventory on a simulated three-node Proxmox VE cluster (fakepve,
``pve_simulator.py``) through real ``ansible-inventory`` runs: the nodes and every VM come from
one ``/cluster/resources`` request whatever the number of VMs, and a node that is offline is a
disconnected hypervisor whose VMs are ``unknown`` with a warning naming it, not a failed
inventory; ``vm_details`` reads the metadata kept in each VM's configuration. The
simulator's own record of the requests it answered is the oracle."""
from inventory_runner import run_inventory

P = "resilient_virt_"
VMS = 30  # VMs added to the simulated cluster, beside its template


def _add_vms(sim):
    def add():
        for index in range(VMS):
            node = ("pve1", "pve2", "pve3")[index % 3]
            sim.pve.add_vm(200 + index, "inv-%02d" % index, node=node,
                           status="running" if index % 2 else "stopped",
                           config={"memory": 256, "cores": 2, "tags": "web;prod",
                                   "description": 'resilient.virt metadata: {"tier":"web"}'})
    sim.call(add)


def _requests(sim):
    return [(method, path) for method, path, _body in sim.pve.requests]


def test_one_cluster_request_lists_every_vm(simulated_pve, tmp_path):
    sim = simulated_pve
    _add_vms(sim)
    source = {"providers": {"pve": sim.provider}, "include_vms": True, "timeout": "30s",
              "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    before = len(sim.pve.requests)
    run = run_inventory(tmp_path, source)
    assert run.rc == 0, run
    asked = _requests(sim)[before:]
    api = [(method, path) for method, path in asked if not path.endswith("/access/ticket")]
    assert api == [("GET", "/api2/json/cluster/resources")], asked

    assert run.hosts("hypervisors") == ["pve1", "pve2", "pve3"], run.data
    vms = sorted(host for host, values in run.hostvars.items() if values.get(P + "kind") == "vm")
    assert vms == sorted(["tpl"] + ["inv-%02d" % i for i in range(VMS)]), vms
    one = run.hostvars["inv-01"]
    assert (one[P + "hypervisor"], one[P + "power_state"], one[P + "vcpus"],
            one[P + "memory_mb"], one[P + "tags"]) == ("pve2", "running", 2, 256, ["prod", "web"])
    assert run.hostvars["inv-00"][P + "power_state"] == "stopped"
    assert run.hostvars["pve1"][P + "vm_count"] == 11  # ten and the template
    assert one[P + "metadata"] == {}  # only the VM's configuration holds it

    detailed = run_inventory(tmp_path, dict(source, vm_details=True))
    assert detailed.rc == 0, detailed
    assert detailed.hostvars["inv-01"][P + "metadata"] == {"tier": "web"}


def test_offline_node_does_not_fail_the_inventory(simulated_pve, tmp_path):
    sim = simulated_pve
    _add_vms(sim)
    sim.call(lambda: sim.pve.set_node_offline("pve2"))
    source = {"providers": {"pve": sim.provider}, "include_vms": True, "timeout": "30s",
              "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    run = run_inventory(tmp_path, source)
    assert run.rc == 0, run
    assert "provider pve: node pve2 of proxmox:pve is offline" in " ".join(run.stderr.split()), run
    answers = run.all_vars[P + "provider_answers"]["pve"]
    assert answers["ok"] and [w for w in answers["warnings"] if "node pve2 " in w], answers
    assert run.hostvars["pve2"][P + "state"] == "disconnected", run.hostvars["pve2"]
    assert run.hostvars["pve1"][P + "state"] == "connected"
    assert run.hostvars["inv-01"][P + "power_state"] == "unknown"  # on pve2
    assert run.hostvars["inv-03"][P + "power_state"] == "running"  # on pve1
    assert len([h for h, v in run.hostvars.items() if v.get(P + "kind") == "vm"]) == VMS + 1
