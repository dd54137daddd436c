"""Evacuating VMs that have disks, on a lab of three hypervisors of the test's own: hv1 holds a VM
whose qcow2 disk is on the shared pool (data written before the failure) and a VM whose disk is
on hv1's local pool; both hold failover reservations. hv1's libvirtd is killed, hv1 fenced with
the lab's power control (every process of hv1 killed), then resilient.virt.failover_reservation
state=evacuated runs under a real ansible-playbook.

The oracles are the test's own: libvirt-python connections to the reservation's host, the disk's
file in the lab's run directory (its inode before and after), and its data read with qemu-io.
"""
import os

import libvirt
import pytest

from backup_disks import disk_of, holds, make_vm
from lab_domains import started_with_flavor
from playbook_runner import play, run_playbook

pytestmark = pytest.mark.lab

LAB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lab")
CREATOR = "evacdisks"
FO = "resilient.virt.failover_reservation"


@pytest.fixture(scope="module")
def disks_lab(tmp_path_factory, lab_module):
    """hv1..hv3 of a lab of its own (hv1 is fenced here); taken down at the end."""
    the_lab = lab_module.Lab(str(tmp_path_factory.mktemp("evacdisklab")))
    the_lab.up(3, vsphere=False, proxmox=False)
    try:
        yield the_lab
    finally:
        the_lab.down()


def test_a_vm_on_shared_storage_runs_on_its_reservation_with_its_data_a_local_one_is_refused(
        disks_lab, lab_module, tmp_path):
    hv1 = disks_lab.hypervisor("hv1")
    providers = {name: dict(lab_module.provider_config(disks_lab.hypervisor(name)), az="lab")
                 for name in ("hv1", "hv2", "hv3")}
    defaults = {"providers": providers, "state_store": "sqlite://%s" % (tmp_path / "state.db")}
    conn = libvirt.open(hv1.uri)
    try:
        shared_dom, shared_path = make_vm(conn, hv1, "ev-shared", running=False, pool_name="shared", cache="none")
        local_dom, local_path = make_vm(conn, hv1, "ev-local", running=False)
        uuids = {"ev-shared": shared_dom.UUIDString(), "ev-local": local_dom.UUIDString()}
        for dom in (shared_dom, local_dom):
            started_with_flavor(conn, dom)
    finally:
        conn.close()
    on_host = os.path.join(hv1.shared, os.path.basename(shared_path))
    inode = os.stat(on_host).st_ino
    reserve = [{"name": "reserve", FO: {"all_providers": True, "requirements": {"*": 1}, "creator": CREATOR,
                                        "limit_one_new_per_hypervisor": False}}]
    run = run_playbook(tmp_path, [play(reserve, module_defaults=defaults)], name="reserve")
    reserved = run.task("reserve")
    assert run.rc == 0 and reserved["summary"]["vms_covered"] == 2, (reserved["summary"], reserved["vm_status"])
    [target] = [r["host"] for r in reserved["reservations"] if uuids["ev-shared"] in r["allocations"]]
    assert target in ("hv2", "hv3")

    disks_lab.stop("hv1")  # libvirtd dies, its QEMU processes live on until the fence
    evacuate = [
        {"name": "fence", "resilient.virt.hypervisor": {
            "provider": "hv1", "state": "fenced", "grace": 0,
            "fencing": {"type": "lab_only_power", "run_dir": disks_lab.run_dir}}},
        {"name": "evacuate", FO: {"all_providers": True, "state": "evacuated", "failed_hosts": ["hv1"],
                                  "creator": CREATOR, "allow_partial": True}},
    ]
    env = {"RESILIENT_VIRT_PLUGINS": "lab_only_power",
           "PYTHONPATH": os.pathsep.join(filter(None, [LAB_DIR, os.environ.get("PYTHONPATH")]))}
    run = run_playbook(tmp_path, [play(evacuate, module_defaults=defaults)], env=env, name="evacuate")
    assert run.rc == 0, run
    assert run.task("fence")["hypervisor"]["fenced"] is True and hv1.qemu_pids() == []
    moves = {move["name"]: move for move in run.task("evacuate")["evacuation"]["moves"]}

    assert moves["ev-shared"]["action"] == "recreate" and moves["ev-shared"]["to_host"] == target, moves
    [proof] = moves["ev-shared"]["disks"]
    assert proof["path"] == shared_path and proof["pool"] == "shared"
    assert proof["proof"].startswith("a marker made through the target was found through libvirt:")
    target_hv = disks_lab.hypervisor(target)
    conn = libvirt.open(target_hv.uri)
    try:
        dom = conn.lookupByName("ev-shared")
        assert dom.isActive() == 1 and dom.UUIDString() != ""
        assert disk_of(dom) == shared_path  # its own file, not a copy
    finally:
        conn.close()
    assert os.stat(on_host).st_ino == inode
    assert holds(target_hv, shared_path, "0x11", 0, "4M")  # written before the failure
    assert not [name for name in os.listdir(hv1.shared) if name.startswith(".resilient-virt-shared-")]

    failed = moves["ev-local"]
    assert failed["action"] == "failed" and failed["error"]["type"] == "NotSupported", failed
    assert local_path in failed["error"]["message"]
    assert "local storage" in failed["error"]["message"], failed["error"]["message"]
