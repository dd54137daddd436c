"""Backups of the libvirt provider on a lab hypervisor, through the hooks and the policy.

Every call goes through ``open_provider`` and ``GuardedProvider.backup``, as the collection makes
it. The oracle is what the test itself wrote into a VM's disk with ``qemu-io`` (a byte pattern
at an offset) and reads back with ``qemu-io``/``qemu-img`` from the backup and restored images;
those tools run inside the hypervisor's mount namespace (``nsenter``), where the paths libvirt
reports (and the backing files of incremental backups) are valid. VMs are tiny TCG domains with
no OS: they only need to run, so nothing but the test writes to their disks.
"""
import json
import os
import signal
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

import libvirt
import pytest
from backup_disks import (
    MAC, allocated, checkpoints, disk_of, holds, in_hv, macs, make_vm, remove_prefixed,
    volume_names, write)

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotFound, NotSupported)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    managed_volumes, qualified)

HV = "hv2"
MIB = 1024 * 1024
WAIT = 60.0
SLOWED_MIB = 1536  # data a backup job cannot copy between its start and the test slowing it


# -- fixtures -----------------------------------------------------------------------------------
@pytest.fixture
def hv(lab):
    return lab.hypervisor(HV)


@pytest.fixture
def conn(hv):
    """The test's own libvirt connection (the oracle's, not the provider's)."""
    connection = libvirt.open(hv.uri)
    yield connection
    connection.close()


@pytest.fixture
def open_guarded(hv, guarded_provider):
    """``open_guarded(**options)``: a new GuardedProvider (its own connection), closed at the end."""
    config = {"type": "libvirt", "name": HV, "uri": hv.uri, "domain_type": "qemu"}
    return lambda **options: guarded_provider(dict(config, **options))


@pytest.fixture
def guarded(open_guarded):
    return open_guarded()


@pytest.fixture
def prefix(conn):
    """A name prefix of this test; every domain and volume named with it is removed at the end."""
    mark = "bk%s" % uuid.uuid4().hex[:8]
    yield mark
    remove_prefixed(conn, mark)


def wait(guarded, handle, timeout=WAIT):
    """Poll ``handle`` until it is not running; the last answer."""
    end = time.monotonic() + timeout
    while True:
        status = guarded.backup("backup_poll", handle=handle)
        if status["state"] != "running" or time.monotonic() > end:
            return status
        time.sleep(0.05)


def backup(guarded, name, vm, parent=None):
    request = {"kind": "backup", "name": name, "vm": vm, "incremental": parent is not None,
               "parent": parent}
    handle = guarded.backup("backup_prepare", request=request)
    assert guarded.backup("backup_prepare", request=request) == handle  # same request, same plan
    json.dumps(handle)
    assert guarded.backup("backup_start", handle=handle) == handle
    return handle, wait(guarded, handle)


def restore(guarded, name, artifact, target):
    request = {"kind": "restore", "name": name, "vm": artifact["vm"], "backup": artifact,
               "target": target}
    handle = guarded.backup("backup_prepare", request=request)
    guarded.backup("backup_start", handle=handle)
    status = wait(guarded, handle)
    assert status["state"] == "completed" and status["vm"] == target, status
    assert guarded.backup("backup_start", handle=handle) == handle  # done: nothing again
    return handle


def stop_and_write(hv, dom, path, pattern, offset, length):
    """Change the disk's data the way LAB.md says works: stopped, with qemu-io, then start."""
    dom.destroy()
    write(hv, path, pattern, offset, length)
    dom.create()


# -- the tests ----------------------------------------------------------------------------------
def test_full_and_incremental_backups_restore_to_what_was_written(guarded, open_guarded, conn,
                                                                  hv, prefix):
    vm = prefix + "-vm"
    dom, disk = make_vm(conn, hv, vm)

    began = time.monotonic()
    handle, status = backup(guarded, prefix + "-full", vm)
    took = time.monotonic() - began
    assert status["state"] == "completed", status
    full = status["artifact"]
    assert took < 30, took
    assert full["name"] == prefix + "-full" and full["vm"] == vm and full["complete"] is True
    assert full["incremental"] is False and full["parent"] is None
    assert full["location"]["pool"] == "backups" and full["size_bytes"] > 4 * MIB
    assert full["created_at"].endswith("Z") and "definition" not in full
    assert checkpoints(dom) == [prefix + "-full"]
    [volume] = full["location"]["volumes"]
    assert volume["target"] == "vda" and volume["capacity_bytes"] == 64 * MIB
    assert holds(hv, volume["path"], "0x11", 0, "4M") and holds(hv, volume["path"], 0, "4M", "60M")
    # a new process (a new provider and connection) that only has the handle sees the same
    assert open_guarded().backup("backup_poll", handle=handle) == status
    assert guarded.backup("backup_start", handle=handle) == handle  # finished: nothing again
    assert checkpoints(dom) == [prefix + "-full"]
    # the marker is what says complete: without it the poll writes it again from libvirt's state,
    # and one cut short (zeros) is never taken for a complete backup
    pool = conn.storagePoolLookupByName("backups")
    pool.storageVolLookupByName(prefix + "-full.json").delete(0)
    pool.createXML("<volume><name>%s-full.json</name><capacity>4096</capacity><target>"
                   "<format type='raw'/></target></volume>" % prefix, 0)
    assert open_guarded().backup("backup_poll", handle=handle) == status

    stop_and_write(hv, dom, disk, "0x22", "8M", "1M")
    handle, status = backup(guarded, prefix + "-incr", vm, parent=full)
    assert status["state"] == "completed", status
    incr = status["artifact"]
    assert incr["incremental"] is True and incr["parent"] == prefix + "-full"
    assert checkpoints(dom) == sorted([prefix + "-full", prefix + "-incr"])
    [volume] = incr["location"]["volumes"]
    # the incremental image stores only the clusters written since the full backup...
    assert allocated(hv, volume["path"]) == [(8 * MIB, MIB)]
    # ...and reads through to its parent for the others
    for pattern, offset, length in (("0x11", 0, "4M"), (0, "4M", "4M"), ("0x22", "8M", "1M"),
                                    (0, "9M", "55M")):
        assert holds(hv, volume["path"], pattern, offset, length), (pattern, offset)

    restore(guarded, prefix + "-r1", full, prefix + "-from-full")
    restore(guarded, prefix + "-r2", incr, prefix + "-from-incr")
    first, second = conn.lookupByName(prefix + "-from-full"), conn.lookupByName(prefix + "-from-incr")
    for restored in (first, second):
        assert not restored.isActive()  # left stopped
        assert restored.UUIDString() != dom.UUIDString()
        assert macs(restored) and MAC not in macs(restored)  # libvirt made a new one
        info = json.loads(in_hv(hv, "qemu-img", "info", "--output=json", disk_of(restored)))
        assert "backing-filename" not in info and info["format-specific"]["data"]["compat"] == "1.1"
    assert holds(hv, disk_of(first), "0x11", 0, "4M") and holds(hv, disk_of(first), 0, "4M", "60M")
    assert holds(hv, disk_of(second), "0x11", 0, "4M") and holds(hv, disk_of(second), 0, "4M", "4M")
    assert holds(hv, disk_of(second), "0x22", "8M", "1M")
    assert holds(hv, disk_of(second), 0, "9M", "55M")
    in_hv(hv, "qemu-img", "compare", "-U", disk_of(second), disk)  # the VM's disk now
    # the restored disks belong to their VM: deleting it removes them
    path = disk_of(second)
    assert [v["path"] for v in managed_volumes(second.XMLDesc(0))] == [path]
    guarded.delete(prefix + "-from-incr")
    assert path.rsplit("/", 1)[1] not in volume_names(conn, "default", prefix)


def test_a_stopped_vm_is_copied_and_an_incremental_request_makes_a_full_copy(guarded, open_guarded,
                                                                             conn, hv, prefix):
    vm = prefix + "-vm"
    dom, disk = make_vm(conn, hv, vm, running=False)
    handle, status = backup(guarded, prefix + "-copy", vm)
    assert handle["mode"] == "copy" and status["state"] == "completed", status
    first = status["artifact"]
    assert first["incremental"] is False and first["checkpoint"] is None and status["warnings"] == []
    assert checkpoints(dom) == [] and not dom.isActive()

    write(hv, disk, "0x33", "16M", "2M")
    handle, status = backup(guarded, prefix + "-copy2", vm, parent=first)
    assert status["state"] == "completed", status
    second = status["artifact"]
    assert second["incremental"] is False and second["parent"] is None
    assert len(status["warnings"]) == 1 and "full copy" in status["warnings"][0]
    assert open_guarded().backup("backup_poll", handle=handle) == status
    [volume] = second["location"]["volumes"]
    info = json.loads(in_hv(hv, "qemu-img", "info", "--output=json", volume["path"]))
    assert "backing-filename" not in info  # a whole copy
    in_hv(hv, "qemu-img", "compare", volume["path"], disk)

    restore(guarded, prefix + "-r", first, prefix + "-back")
    back = disk_of(conn.lookupByName(prefix + "-back"))
    assert holds(hv, back, "0x11", 0, "4M") and holds(hv, back, 0, "4M", "60M")


def test_a_new_process_follows_a_backup_whose_starter_was_killed(open_guarded, conn, hv, prefix,
                                                                 tmp_path):
    """A child process plans and starts a backup, hands over the handle and is killed with
    SIGKILL while the job runs (throttled); a new provider polls it to its end."""
    vm = prefix + "-vm"
    dom, disk = make_vm(conn, hv, vm, size_mib=512, running=False)
    write(hv, disk, "0x44", 0, "512M")
    dom.create()
    script = (
        "import json, sys, time\n"
        "from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings\n"
        "from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store\n"
        "from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import open_provider\n"
        "import libvirt\n"
        "config = json.loads(sys.argv[1])\n"
        "guarded = open_provider(config, resolve_settings({}, environ={}), open_store(sys.argv[4], environ={}), "
        "environ={})\n"
        "handle = guarded.backup('backup_prepare', request={'kind': 'backup', 'name': sys.argv[2], "
        "'vm': sys.argv[3], 'incremental': False, 'parent': None})\n"
        "guarded.backup('backup_start', handle=handle)\n"
        "libvirt.open(config['uri']).lookupByName(sys.argv[3]).blockJobSetSpeed('vda', 1, 0)\n"
        "print(json.dumps(handle), flush=True)\n"
        "time.sleep(600)\n")
    from paths import COLLECTIONS

    config = {"type": "libvirt", "name": HV, "uri": hv.uri, "domain_type": "qemu"}
    store = "sqlite:///%s" % (tmp_path / "child.db")
    child = subprocess.Popen([sys.executable, "-c", script, json.dumps(config), prefix + "-b", vm, store],
                             stdout=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONPATH=COLLECTIONS))
    try:
        handle = json.loads(child.stdout.readline())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    adopter = open_guarded()
    status = adopter.backup("backup_poll", handle=handle)
    assert status["state"] == "running" and 0 <= status["progress"] < 100, status
    assert volume_names(conn, "backups", prefix) == [prefix + "-b.vda.qcow2"]  # no marker yet
    dom.blockJobSetSpeed("vda", 0, 0)  # unthrottled
    status = wait(adopter, handle)
    assert status["state"] == "completed", status
    assert volume_names(conn, "backups", prefix) == [prefix + "-b.json", prefix + "-b.vda.qcow2"]
    [volume] = status["artifact"]["location"]["volumes"]
    in_hv(hv, "qemu-img", "compare", "-U", volume["path"], disk)
    assert open_guarded().backup("backup_poll", handle=handle) == status


def test_a_backup_is_completed_only_once_qemu_has_let_go_of_its_volumes(open_guarded, conn, hv,
                                                                        prefix):
    """libvirt reports a push job completed before QEMU has closed the target images (and
    written their qcow2 metadata): the poll that writes the marker waits for the domain. QEMU is
    stopped once the job has ended; the poll may not say completed until it runs again."""
    vm = prefix + "-vm"
    dom, disk = make_vm(conn, hv, vm, running=False)
    write(hv, disk, "0x66", 0, "64M")
    dom.create()
    guarded = open_guarded()
    handle = guarded.backup("backup_prepare", request={
        "kind": "backup", "name": prefix + "-b", "vm": vm, "incremental": False, "parent": None})
    guarded.backup("backup_start", handle=handle)
    end = time.monotonic() + WAIT
    while dom.jobStats(libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED | libvirt.VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED
                       ).get("type") != libvirt.VIR_DOMAIN_JOB_COMPLETED:
        assert time.monotonic() < end, "the backup job did not end"
        time.sleep(0.05)
    dom.blockInfo("vda")  # the test's own wait: libvirt's cleanup after the job is over
    qemu = hv.qemu_pid(vm)
    polls = ThreadPoolExecutor(max_workers=1)
    os.kill(qemu, signal.SIGSTOP)
    try:
        poll = polls.submit(open_guarded().backup, "backup_poll", handle=handle)
        with pytest.raises(TimeoutError):
            poll.result(timeout=3)
        assert volume_names(conn, "backups", prefix) == [prefix + "-b.vda.qcow2"]  # no marker
    finally:
        os.kill(qemu, signal.SIGCONT)
    status = poll.result(timeout=WAIT)
    polls.shutdown()
    assert status["state"] == "completed", status
    [volume] = status["artifact"]["location"]["volumes"]
    in_hv(hv, "qemu-img", "compare", "-U", volume["path"], disk)


def test_cancel_aborts_the_job_and_removes_what_it_made(guarded, conn, hv, prefix):
    vm = prefix + "-vm"
    dom, disk = make_vm(conn, hv, vm, size_mib=SLOWED_MIB, running=False)
    write(hv, disk, "0x55", 0, "%dM" % SLOWED_MIB)
    dom.create()
    request = {"kind": "backup", "name": prefix + "-b", "vm": vm, "incremental": False,
               "parent": None}
    handle = guarded.backup("backup_prepare", request=request)
    guarded.backup("backup_start", handle=handle)
    dom.blockJobSetSpeed("vda", 1, 0)  # 1 MiB/s: the job outlives the test's checks
    status = guarded.backup("backup_poll", handle=handle)
    assert status["state"] == "running", status
    assert guarded.backup("backup_start", handle=handle) == handle  # it runs: not again
    assert checkpoints(dom) == [prefix + "-b"]
    assert volume_names(conn, "backups", prefix) == [prefix + "-b.vda.qcow2"]

    assert guarded.backup("backup_cancel", handle=handle) is True
    assert dom.jobInfo()[0] == libvirt.VIR_DOMAIN_JOB_NONE
    assert checkpoints(dom) == [] and volume_names(conn, "backups", prefix) == []
    assert guarded.backup("backup_poll", handle=handle)["state"] == "missing"
    assert guarded.backup("backup_cancel", handle=handle) is True  # idempotent
    assert dom.isActive()


def test_a_job_that_fails_is_reported_and_leaves_no_checkpoint(guarded, conn, hv, prefix):
    vm = prefix + "-vm"
    dom, disk = make_vm(conn, hv, vm, size_mib=SLOWED_MIB, running=False)
    write(hv, disk, "0x77", 0, "%dM" % SLOWED_MIB)
    dom.create()
    request = {"kind": "backup", "name": prefix + "-b", "vm": vm, "incremental": False,
               "parent": None}
    handle = guarded.backup("backup_prepare", request=request)
    guarded.backup("backup_start", handle=handle)
    dom.blockJobSetSpeed("vda", 1, 0)
    dom.destroy()  # the VM dies under the job
    status = guarded.backup("backup_poll", handle=handle)
    assert status["state"] == "failed" and "stopped" in status["message"], status
    assert checkpoints(dom) == []  # no incremental backup can build on it
    [left] = [a for a in guarded.backup("backup_list", vm=None) if a["name"] == prefix + "-b"]
    assert left["complete"] is False
    assert guarded.backup("backup_cancel", handle=handle) is True
    assert volume_names(conn, "backups", prefix) == []


def test_list_and_delete(guarded, conn, hv, prefix):
    vm = prefix + "-vm"
    dom, disk = make_vm(conn, hv, vm)
    full = backup(guarded, prefix + "-a", vm)[1]["artifact"]
    incr = backup(guarded, prefix + "-b", vm, parent=full)[1]["artifact"]
    # a leftover: a disk volume without a marker (an attempt killed before its job began)
    pool = conn.storagePoolLookupByName("backups")
    pool.createXML("<volume><name>%s-c.vda.qcow2</name><capacity>1048576</capacity><target>"
                   "<format type='qcow2'/></target></volume>" % prefix, 0)
    pool.createXML("<volume><name>%s-c.json</name><capacity>4096</capacity><target>"
                   "<format type='raw'/></target></volume>" % prefix, 0)  # a marker cut short

    listed = dict((a["name"], a) for a in guarded.backup("backup_list", vm=None)
                  if a["name"].startswith(prefix))
    assert sorted(listed) == [prefix + "-a", prefix + "-b", prefix + "-c"]
    assert listed[prefix + "-a"] == full and listed[prefix + "-b"] == incr
    assert listed[prefix + "-c"]["complete"] is False and listed[prefix + "-c"]["vm"] is None
    of_vm = [a["name"] for a in guarded.backup("backup_list", vm=vm)]
    assert sorted(of_vm) == [prefix + "-a", prefix + "-b"]

    with pytest.raises(Conflict, match=prefix + "-b"):
        guarded.backup("backup_delete", artifact=full)  # the incremental one builds on it
    assert guarded.backup("backup_delete", artifact=incr) is True
    assert checkpoints(dom) == [prefix + "-a"]
    assert guarded.backup("backup_delete", artifact=full) is True
    assert guarded.backup("backup_delete", artifact=full) is True  # gone already
    assert guarded.backup("backup_delete", artifact=listed[prefix + "-c"]) is True
    assert checkpoints(dom) == [] and volume_names(conn, "backups", prefix) == []
    assert guarded.backup("backup_list", vm=vm) == []
    # with its parent's checkpoint gone, an incremental backup needs a full one first
    with pytest.raises(Conflict, match="full backup"):
        guarded.backup("backup_prepare", request={"kind": "backup", "name": prefix + "-d", "vm": vm,
                                                  "incremental": True, "parent": incr})


def test_restore_onto_the_same_stopped_vm(guarded, conn, hv, prefix):
    vm = prefix + "-vm"
    dom, disk = make_vm(conn, hv, vm)
    full = backup(guarded, prefix + "-a", vm)[1]["artifact"]
    stop_and_write(hv, dom, disk, "0x22", "8M", "1M")
    incr = backup(guarded, prefix + "-i", vm, parent=full)[1]["artifact"]
    request = {"kind": "restore", "name": prefix + "-r", "vm": vm, "backup": incr, "target": vm}
    with pytest.raises(Conflict, match="running"):
        guarded.backup("backup_prepare", request=request)
    dom.destroy()
    write(hv, disk, "0x66", 0, "16M")  # what the restore must undo
    before = dom.UUIDString()

    restore(guarded, prefix + "-r", incr, vm)
    dom = conn.lookupByName(vm)
    assert not dom.isActive() and dom.UUIDString() == before and macs(dom) == [MAC]
    restored = disk_of(dom)
    assert restored != disk and restored.startswith("/var/lib/libvirt/images/")
    for pattern, offset, length in (("0x11", 0, "4M"), (0, "4M", "4M"), ("0x22", "8M", "1M"),
                                    (0, "9M", "55M")):
        assert holds(hv, restored, pattern, offset, length), (pattern, offset)
    # the old managed volume is gone, the new one is managed; the old checkpoint is dropped
    assert volume_names(conn, "default", prefix) == [restored.rsplit("/", 1)[1]]
    assert [v["path"] for v in managed_volumes(dom.XMLDesc(0))] == [restored]
    mark = ET.fromstring(dom.XMLDesc(0)).find("metadata/%s/%s" % (qualified("vm"), qualified("restored")))
    assert mark.get("record") == prefix + "-r" and mark.get("backup") == prefix + "-i"
    assert checkpoints(dom) == []  # their bitmaps are not in the restored image
    # the restored VM runs and is backed up again; the old chain cannot be continued
    dom.create()
    with pytest.raises(Conflict, match="full backup"):
        guarded.backup("backup_prepare", request={"kind": "backup", "name": prefix + "-b", "vm": vm,
                                                  "incremental": True, "parent": full})
    status = backup(guarded, prefix + "-c", vm)[1]
    assert status["state"] == "completed" and checkpoints(dom) == [prefix + "-c"]


def test_what_cannot_be_backed_up_is_refused_with_the_fix(guarded, open_guarded, conn, hv, prefix):
    def prepare(provider=guarded, **fields):
        request = dict({"kind": "backup", "name": prefix + "-x", "vm": prefix + "-vm",
                        "incremental": False, "parent": None}, **fields)
        return provider.backup("backup_prepare", request=request)

    with pytest.raises(NotFound):
        prepare(vm=prefix + "-nothere")
    with pytest.raises(InvalidSpec, match="name"):
        prepare(name="a/b")
    make_vm(conn, hv, prefix + "-vm", disk_format="raw")
    with pytest.raises(NotSupported, match="vda.*qcow2 v3"):
        prepare()
    with pytest.raises(InvalidSpec, match="provider.backup_pool.*virsh pool-define-as"):
        prepare(provider=open_guarded(backup_pool=prefix + "-nopool"))
    assert volume_names(conn, "backups", prefix) == []  # prepare changes nothing


def test_restores_of_a_vm_from_an_image_with_a_seed(guarded, conn, prefix):
    """A VM whose disk is an overlay on a base image and which has a cloud-init seed: restored
    onto itself, it keeps its seed and the record of where its disk came from; restored as a new
    VM, it gets no seed (the source's, with the source's identity, deleted with it) and its disk
    is recorded as a copy of the base image's data. Oracle: libvirt's own XML of the domains."""
    rv = "{https://resilient.virt/xmlns/vm/1}"
    base = conn.storagePoolLookupByName("default").createXML(
        "<volume><name>%s-base.qcow2</name><capacity unit='MiB'>64</capacity><target>"
        "<format type='qcow2'/><compat>1.1</compat></target></volume>" % prefix, 0).path()
    vm = prefix + "-img"
    guarded.create({"name": vm, "vcpus": 1, "memory_mb": 64, "disks": [{"base_image": base}],
                    "cloud_init": {"user_data": {"hostname": "x"}}})

    def records(name):
        root = ET.fromstring(conn.lookupByName(name).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
        return root, dict((v.get("path"), dict(v.attrib)) for v in root.iter(rv + "volume"))

    root, saved = records(vm)
    seed = next(path for path, v in saved.items() if v.get("role"))
    _handle, status = backup(guarded, prefix + "-b", vm)
    assert status["state"] == "completed", status
    artifact = status["artifact"]

    restore(guarded, prefix + "-same", artifact, vm)
    root, kept = records(vm)
    cdroms = [d.find("source").get("file") for d in root.findall("devices/disk")
              if d.get("device") == "cdrom"]
    assert cdroms == [seed] and kept[seed]["role"] == saved[seed]["role"]
    disk = [v for v in kept.values() if not v.get("role")]
    assert [(v.get("base_image"), v.get("clone")) for v in disk] == [(base, "copy")]
    described = guarded.describe(vm)
    assert [d.get("base_image") for d in described["disks"]] == [base]  # the seed is no disk

    restore(guarded, prefix + "-new", artifact, prefix + "-copy")
    root, made = records(prefix + "-copy")
    assert [d.get("device") for d in root.findall("devices/disk")] == ["disk"]
    assert seed not in made and [(v.get("base_image"), v.get("clone")) for v in made.values()] \
        == [(base, "copy")]
