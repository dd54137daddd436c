"""A node in maintenance on a simulated three-node Proxmox VE cluster (fakepve, with the lab's
addition of PVE's HA node maintenance, which fakepve does not model: ``lab/pvesim.py``), through
real ansible-playbook and ansible-inventory runs: vm_info and the inventory keep answering, with
a warning naming the node, whether the node still answers (HA maintenance) or was shut down for
it (offline too); the hypervisor's state is ``maintenance``. A cluster without HA resources is
not asked for the HA manager's status. The simulator's record of requests is the oracle.
"""
from inventory_runner import run_inventory
from playbook_runner import play, run_playbook

KEY = "proxmox:pve"
HA_STATUS = "/api2/json/cluster/ha/status/manager_status"


def _vm_info(sim, tmp_path, name):
    run = run_playbook(tmp_path, [play([{"name": "list", "resilient.virt.vm_info": {},
                                         "ignore_errors": True}], module_defaults={
        "provider": sim.provider, "state_store": "sqlite:///%s" % (tmp_path / "state.db")})],
        name=name)
    return run.task("list")


def _ha_status_reads(sim):
    return len([r for r in sim.pve.requests if r[0] == "GET" and r[1] == HA_STATUS])


def test_node_in_maintenance_is_named_and_its_vms_listed(simulated_pve, tmp_path):
    sim = simulated_pve
    sim.new_vm("kept1", "pve2")
    sim.new_vm("near1", "pve3")
    sim.call(lambda: sim.pve.maintenance.add("pve2"))
    quiet = _vm_info(sim, tmp_path, "no-ha")  # no HA resource: the HA manager is not asked
    assert not quiet.failed and _ha_status_reads(sim) == 0, quiet
    assert not [w for w in quiet.get("warnings", []) if "maintenance" in w], quiet

    sim.new_vm("ha1", "pve1", ha_state="started")
    listed = _vm_info(sim, tmp_path, "ha")
    assert not listed.failed, listed
    assert {vm["name"]: vm["state"] for vm in listed["vms"]}["kept1"] == "running", listed
    named = [w for w in listed["warnings"] if w.startswith("node pve2 of %s is in maintenance" % KEY)]
    assert len(named) == 1 and not [w for w in listed["warnings"] if "pve3" in w], listed
    assert _ha_status_reads(sim) == 1

    source = {"providers": {"pve": sim.provider}, "include_vms": True, "timeout": "30s",
              "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    inventory = run_inventory(tmp_path, source)
    assert inventory.rc == 0, inventory
    assert "provider pve: node pve2 of %s is in maintenance" % KEY in " ".join(
        inventory.stderr.split()), inventory
    assert inventory.hostvars["pve2"]["resilient_virt_state"] == "maintenance"
    assert inventory.hostvars["pve3"]["resilient_virt_state"] == "connected"
    assert inventory.hostvars["kept1"]["resilient_virt_power_state"] == "running"

    sim.call(lambda: sim.pve.set_node_offline("pve2"))  # shut down for its maintenance
    down = _vm_info(sim, tmp_path, "down")
    assert not down.failed, down
    assert {vm["name"]: vm["state"] for vm in down["vms"]}["kept1"] == "unknown", down
    assert [w for w in down["warnings"] if "node pve2 of %s is offline" % KEY in w], down
    assert [w for w in down["warnings"] if "node pve2 of %s is in maintenance" % KEY in w], down
