"""Evacuating a VM whose disk is on the failed hypervisor's local storage by restoring it from its
last backup, on a lab of two hypervisors of the test's own whose providers keep backups in the
lab's shared pool (``backup_pool: shared``). hv1 holds the VM: pattern A written, a backup taken
with resilient.virt.backup (and listed by hv2), pattern B written after it. A first evacuation
killed during the copy is played: the restore prepared on hv2 as the evacuation prepares it, and
volumes of its names left on hv2 holding pattern C. hv1 is stopped and fenced with the lab's
power control, then resilient.virt.failover_reservation state=evacuated runs under a real
ansible-playbook: without the opt-in (refused), with it while the state store keeps no handle of
that restore (the volumes are someone else's: refused, left alone); then, the handle kept in the
store as the killed run kept it, in check mode, with it (it finishes that restore), and again.

The oracles are the test's own: libvirt-python connections to hv2, the restored disk's data read
with qemu-io, the state store file read directly, and the clock around the run for the recovery
point's age.
"""
import os
import time
import xml.etree.ElementTree as ET

import libvirt
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover.backup_restore import restore_record_name
from ansible_collections.resilient.virt.plugins.module_utils._failover.restore_handles import (
    NAMESPACE, RestoreHandles)
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils._state.sqlite import SQLiteStore
from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import open_provider
from backup_disks import disk_of, holds, make_vm, write
from lab_domains import started_with_flavor
from playbook_runner import play, run_playbook

pytestmark = pytest.mark.lab

LAB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lab")
CREATOR = "evacrestore"
FO = "resilient.virt.failover_reservation"
VM = "rb-local"
A, B, C, AT, LENGTH = "0x22", "0x33", "0x44", "8M", "1M"


@pytest.fixture(scope="module")
def restore_lab(tmp_path_factory, lab_module):
    """hv1 and hv2 of a lab of its own (hv1 is fenced here); taken down at the end."""
    the_lab = lab_module.Lab(str(tmp_path_factory.mktemp("evacrestorelab")))
    the_lab.up(2, vsphere=False, proxmox=False)
    try:
        yield the_lab
    finally:
        the_lab.down()


def listed(config, vm):
    """The names of the complete backups of ``vm`` the provider ``config`` lists."""
    provider = open_provider(config, store=MemoryStore("evacrestore"), environ={})
    try:
        return [a["name"] for a in provider.backup("backup_list", vm=vm) if a["complete"]]
    finally:
        provider.close()


def prepared(config, backup):
    """(provider key, handle) of the restore of ``backup`` (a record name) onto the provider
    ``config``, planned as the evacuation plans it."""
    provider = open_provider(config, store=MemoryStore("evacrestore"), environ={})
    try:
        [artifact] = [a for a in provider.backup("backup_list", vm=VM) if a["name"] == backup]
        return provider.key, provider.backup("backup_prepare", request={
            "kind": "restore", "name": restore_record_name(backup), "vm": VM, "backup": artifact,
            "target": VM})
    finally:
        provider.close()


def leave_volumes(hv, handle):
    """The volumes ``handle`` copies into, made on ``hv`` holding pattern C (what a copy cut
    short leaves); their paths."""
    conn = libvirt.open(hv.uri)
    try:
        pool = conn.storagePoolLookupByName(handle["pool"])
        paths = []
        for disk in handle["disks"]:
            root = ET.Element("volume")
            ET.SubElement(root, "name").text = disk["volume"]
            ET.SubElement(root, "capacity", unit="MiB").text = "64"
            ET.SubElement(ET.SubElement(root, "target"), "format", type="qcow2")
            paths.append(pool.createXML(ET.tostring(root, encoding="unicode"), 0).path())
    finally:
        conn.close()
    for path in paths:
        write(hv, path, C, AT, LENGTH)
    return paths


def evacuate(name, **options):
    return {"name": name, FO: dict({"all_providers": True, "state": "evacuated", "failed_hosts": ["hv1"],
                                    "creator": CREATOR, "allow_partial": True}, **options)}


def test_a_vm_on_local_storage_comes_back_from_its_last_backup_only_when_opted_in(
        restore_lab, lab_module, tmp_path):
    hv1, hv2 = restore_lab.hypervisor("hv1"), restore_lab.hypervisor("hv2")
    providers = {name: dict(lab_module.provider_config(restore_lab.hypervisor(name)), az="lab",
                            backup_pool="shared") for name in ("hv1", "hv2")}
    defaults = {"providers": providers, "state_store": "sqlite://%s" % (tmp_path / "state.db")}
    conn = libvirt.open(hv1.uri)
    try:
        dom, local_path = make_vm(conn, hv1, VM, running=False)
        uuid = dom.UUIDString()
        write(hv1, local_path, A, AT, LENGTH)
    finally:
        conn.close()
    take = [{"name": "backup", "resilient.virt.backup": {"provider": "hv1", "vm": VM}}]
    run = run_playbook(tmp_path, [play(take, module_defaults=defaults)], name="backup")
    assert run.rc == 0, run
    backup = run.task("backup")["record"]
    assert backup["phase"] == "Completed", backup
    assert listed(providers["hv2"], VM) == [backup["name"]]  # written by hv1, seen by hv2
    write(hv1, local_path, B, AT, LENGTH)  # after the backup: lost with hv1
    conn = libvirt.open(hv1.uri)
    try:
        started_with_flavor(conn, conn.lookupByName(VM))
    finally:
        conn.close()
    reserve = [{"name": "reserve", FO: {"all_providers": True, "requirements": {"*": 1}, "creator": CREATOR,
                                        "limit_one_new_per_hypervisor": False}}]
    run = run_playbook(tmp_path, [play(reserve, module_defaults=defaults)], name="reserve")
    assert run.rc == 0 and run.task("reserve")["summary"]["vms_covered"] == 1, run.task("reserve")

    # the run killed during the copy: its restore prepared, its volumes begun
    target_key, handle = prepared(providers["hv2"], backup["name"])
    leftovers = leave_volumes(hv2, handle)

    restore_lab.stop("hv1")  # libvirtd dies, its QEMU processes live on until the fence
    opted_in = [{"match": "rb-*"}]
    tasks = [
        {"name": "fence", "resilient.virt.hypervisor": {
            "provider": "hv1", "state": "fenced", "grace": 0,
            "fencing": {"type": "lab_only_power", "run_dir": restore_lab.run_dir}}},
        evacuate("not opted in"),
        evacuate("not its volumes", restore_from_backup=opted_in),
    ]
    env = {"RESILIENT_VIRT_PLUGINS": "lab_only_power",
           "PYTHONPATH": os.pathsep.join(filter(None, [LAB_DIR, os.environ.get("PYTHONPATH")]))}
    run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], env=env, name="evacuate")
    assert run.rc == 0, run
    assert run.task("fence")["hypervisor"]["fenced"] is True and hv1.qemu_pids() == []
    [refused], [foreign] = (run.task(name)["evacuation"]["moves"] for name in ("not opted in", "not its volumes"))
    assert refused["action"] == "failed" and refused["error"]["type"] == "NotSupported", refused
    assert local_path in refused["error"]["message"] and "local storage" in refused["error"]["message"]
    # no handle kept for them: volumes of someone else, named and left as they are
    assert foreign["action"] == "failed" and foreign["error"]["type"] == "Conflict", foreign
    assert all(disk["volume"] in foreign["error"]["message"] for disk in handle["disks"]), foreign
    assert all(holds(hv2, path, C, AT, LENGTH) for path in leftovers)

    store = SQLiteStore(str(tmp_path / "state.db"))
    try:  # kept as the killed run kept it, before it started the copy
        RestoreHandles(store).keep(target_key, handle["name"], VM, handle)
        tasks = [
            dict(evacuate("planned", restore_from_backup=opted_in), check_mode=True),
            evacuate("restored", restore_from_backup=opted_in),
            evacuate("again", restore_from_backup=opted_in),
        ]
        before = time.time()
        run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], env=env, name="resume")
        after = time.time()
        assert run.rc == 0, run
        assert store.items(NAMESPACE) == {}  # the VM runs: nothing left to resume
    finally:
        store.close()
    [planned], [restored], [again] = (run.task(name)["evacuation"]["moves"] for name in (
        "planned", "restored", "again"))
    # check mode chose the backup; the run after it still had the restore to do
    assert planned["action"] == "restore" and planned["backup"] == backup["name"], planned
    assert restored["action"] == "restore" and restored["to_host"] == "hv2", restored
    assert restored["backup"] == backup["name"]
    assert restored["recovery_point"] == backup["artifact"]["created_at"]
    restored_at = parse_time(restored["recovery_point"]) + restored["recovery_point_age_seconds"]
    assert before - 1 <= restored_at <= after + 1, (restored, before, after)
    assert again["action"] == "none" and "backup" not in again, again  # never restored twice
    assert run.task("again")["changed"] is False

    conn = libvirt.open(hv2.uri)
    try:
        dom = conn.lookupByName(VM)
        assert dom.isActive() == 1 and dom.UUIDString() == uuid
        path = disk_of(dom)
    finally:
        conn.close()
    assert path != local_path and path in leftovers  # hv2's own storage, the killed run's volume
    assert holds(hv2, path, "0x11", 0, "4M") and holds(hv2, path, A, AT, LENGTH)
    assert not holds(hv2, path, B, AT, LENGTH) and not holds(hv2, path, C, AT, LENGTH)
