"""Evacuating a failed node of a simulated Proxmox VE cluster (fakepve, with the lab's simulation
of PVE's HA manager, which fakepve does not model: ``lab/pvesim_ha.py``) through real
ansible-playbook runs of failover_reservation: reservations planned (``state: present``) while
every node answers, then pve2 set offline (fakepve's own fault) and evacuated.

pve2 holds a VM on shared storage that is not an HA resource, one that is the user's HA resource,
and one with a disk on storage that is not shared; pve1 holds a VM of the user with an HA rule of
the user. The oracle is the test's own proxmoxer session: where each VM runs, and the cluster's
HA resources and rules, which must be the user's as before the evacuation. A recovery stopped
midway (the VM already the collection's HA resource) is finished by the next call.
"""
import uuid
from urllib.parse import unquote

import pytest

import pve_simulator
from playbook_runner import play, run_playbook
from pvesim_ha import with_ha_recovery  # lab/ is on sys.path (conftest.py)

FO = "resilient.virt.failover_reservation"
CREATOR = "pverecover"
USER_COMMENT = "the user's own HA resource"
USER_RULE = {"rule": "user-keep", "type": "node-affinity", "resources": "vm:%d",
             "nodes": "pve1,pve3", "strict": 1, "comment": "the user's own rule"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A simulated three-node cluster of the module, with PVE's HA manager simulated, a storage
    ``shared`` (shared) and VMs on pve2; the node is still online."""
    with pytest.MonkeyPatch.context() as monkeypatch, \
            pve_simulator.started(tmp_path_factory.mktemp("pverecover"), monkeypatch) as sim:
        sim.call(lambda: with_ha_recovery(sim.pve))
        sim.call(lambda: sim.pve.storages.update(shared={
            "type": "dir", "shared": 1, "active": 1, "content": "images", "files": set(),
            "path": "/mnt/pve/shared"}))
        vmids = {}
        for name, node, storage in (("rc-web", "pve2", "shared"), ("rc-db", "pve2", "shared"),
                                    ("rc-local", "pve2", "local-lvm"), ("rc-other", "pve1", "shared")):
            vmid = sim.new_vm(name, node)
            volume = ("%d/vm-%d-disk-0.qcow2" if storage == "shared" else "vm-%d-disk-0") % (
                (vmid, vmid) if storage == "shared" else (vmid,))
            sim.call(lambda v=vmid, s=storage, vol=volume: sim.pve.vm(v).config.update(
                scsi0="%s:%s,size=4G" % (s, vol), smbios1="uuid=%s" % uuid.uuid4(),
                description='resilient.virt metadata: {"flavor":"small"}'))
            vmids[name] = vmid
        sim.oracle.cluster.ha.resources.post(sid="vm:%d" % vmids["rc-db"], state="started",
                                             comment=USER_COMMENT)
        sim.oracle.cluster.ha.resources.post(sid="vm:%d" % vmids["rc-other"], state="started")
        sim.oracle.cluster.ha.rules.post(**dict(USER_RULE, resources="vm:%d" % vmids["rc-other"]))
        sim.vmids = vmids
        yield sim


def _where(sim):
    return dict((r["name"], (r["node"], r["status"])) for r in sim.oracle.cluster.resources.get(type="vm")
                if r.get("name", "").startswith("rc-"))


def _ha(sim):
    """The cluster's HA resources and rules, as the test's own session reads them."""
    return (sorted((r["sid"], r.get("state"), r.get("comment")) for r in sim.oracle.cluster.ha.resources.get()),
            sorted((r["rule"], r.get("resources"), r.get("nodes")) for r in sim.oracle.cluster.ha.rules.get()))


def _ha_changes(sim):
    """(method, path and body) of each change to the HA configuration the simulator was asked."""
    return [(method, unquote("%s %s" % (path, body.decode() if isinstance(body, bytes) else body or "")))
            for method, path, body in sim.pve.requests if method != "GET" and "/cluster/ha/" in path]


def _run(sim, tmp_path, args, name):
    defaults = {"provider": sim.provider, "state_store": "sqlite:///%s" % (tmp_path.parent / "recover.db")}
    task = {"name": name, FO: dict({"creator": CREATOR}, **args)}
    run = run_playbook(tmp_path, [play([task], module_defaults=defaults)], name=name)
    assert "Traceback" not in run.output, run.output
    return run.task(name)


def test_a_failed_nodes_vms_run_on_their_reservations_by_pves_ha_manager(cluster, tmp_path):
    sim = cluster
    planned = _run(sim, tmp_path, {"requirements": {"*": 1}, "limit_one_new_per_hypervisor": False},
                   "plan")
    assert not planned.failed, planned.result
    user_ha = _ha(sim)
    before = len(_ha_changes(sim))
    sim.call(lambda: sim.pve.set_node_offline("pve2"))

    evacuate = {"state": "evacuated", "failed_hosts": ["pve2"], "allow_partial": True}
    evacuated = _run(sim, tmp_path, evacuate, "evacuate")
    assert not evacuated.failed and evacuated["changed"] is True, evacuated.result
    moves = dict((move["name"], move) for move in evacuated["evacuation"]["moves"])
    where = _where(sim)
    assert moves["rc-web"]["action"] == "recover", moves["rc-web"]
    # the user's HA resource: PVE's HA manager may have recovered it onto that node by itself
    assert moves["rc-db"]["action"] in ("recover", "none"), moves["rc-db"]
    for name in ("rc-web", "rc-db"):
        assert moves[name]["to_host"] in ("pve1", "pve3"), moves[name]
        assert where[name] == (moves[name]["to_host"], "running"), (name, where)
    assert _ha(sim) == user_ha  # the user's resources (rc-db kept its own) and rule, nothing else

    refused = moves["rc-local"]
    assert refused["action"] == "failed" and refused["error"]["type"] == "Conflict", refused
    assert "local-lvm:vm-%d-disk-0" % sim.vmids["rc-local"] in refused["error"]["message"], refused
    assert "backup" in refused["error"]["message"], refused
    assert where["rc-local"] == ("pve2", "unknown") and where["rc-other"] == ("pve1", "running")
    asked = _ha_changes(sim)[before:]
    assert asked and not [what for _method, what in asked if "vm:%d" % sim.vmids["rc-local"] in what], asked

    again = _run(sim, tmp_path, evacuate, "again")
    assert not again["changed"], again.result
    moves_again = dict((move["name"], move) for move in again["evacuation"]["moves"])
    assert all(moves_again[name]["action"] == "none" for name in ("rc-web", "rc-db")), moves_again
    assert _where(sim) == where and _ha(sim) == user_ha
    assert len(_ha_changes(sim)) == before + len(asked)  # the rerun changed no HA setting


def test_a_recovery_stopped_midway_is_finished_by_the_next(cluster, guarded_provider):
    """A run killed after it made the VM the collection's HA resource (state stopped): PVE's HA
    manager has since moved the stopped VM's configuration onto a node of its choice, and the
    collection's rule names an earlier target. The next recover finishes the move onto its
    target and gives HA back, also for another VM whose recovery left its rule behind."""
    from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.recover import (
        OWN_COMMENT)

    sim = cluster
    user_ha = _ha(sim)
    vmid = sim.new_vm("rc-half", "pve2", status="stopped")
    sim.call(lambda: sim.pve.vm(vmid).config.update(scsi0="shared:%d/vm-%d-disk-0.qcow2,size=4G" % (vmid, vmid)))
    sim.call(lambda: sim.pve.set_node_offline("pve2"))
    sim.oracle.cluster.ha.resources.post(sid="vm:%d" % vmid, state="stopped", comment=OWN_COMMENT)
    node, status = _where(sim)["rc-half"]
    assert status == "stopped" and node != "pve2"  # the HA manager's own recovery, stopped
    target = "pve3" if node == "pve1" else "pve1"
    sim.oracle.cluster.ha.rules.post(rule="resilient-virt-recover-%d" % vmid, type="node-affinity",
                                     resources="vm:%d" % vmid, nodes=node, strict=1)  # an earlier target
    web = sim.vmids["rc-web"]  # and a rule a run left behind for a VM that runs where it pins it
    sim.oracle.cluster.ha.resources.post(sid="vm:%d" % web, state="started", comment=OWN_COMMENT)
    sim.oracle.cluster.ha.rules.post(rule="resilient-virt-recover-%d" % web, type="node-affinity",
                                     resources="vm:%d" % web, nodes=_where(sim)["rc-web"][0], strict=1)

    vm = guarded_provider(sim.provider).recover("rc-half", target)
    assert vm["hypervisor"] == target and vm["state"] == "running", vm
    assert _where(sim)["rc-half"] == (target, "running") and _ha(sim) == user_ha
