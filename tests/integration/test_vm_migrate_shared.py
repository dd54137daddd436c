"""resilient.virt.vm_migrate of VMs whose disk is on the lab's shared storage (the pool ``shared``:
one directory at the same path in every lab hypervisor, as NFS gives a real fleet).

The test's own oracle: the disk's file in the lab's run directory (its inode before and after),
its data read with ``qemu-io``, and libvirt-python connections of the test's own to both
hypervisors. A running VM whose disk bypasses the page cache moves live without its disk being
copied or deleted; one whose disk keeps the default cache is refused before anything moves; a
stopped VM moves cold, its disk left where it is. No marker file of the sharing proof is left.
"""
import os
import uuid

import libvirt
import pytest
from backup_disks import holds, make_vm, remove_prefixed
from playbook_runner import play, run_playbook

pytestmark = pytest.mark.lab

MARKER_PREFIX = ".resilient-virt-shared-"


@pytest.fixture
def two_hvs(lab):
    """(hv1, hv2, conn1, conn2, prefix): the test's own connections; its VMs removed after."""
    hv1, hv2 = lab.hypervisor("hv1"), lab.hypervisor("hv2")
    conn1, conn2 = libvirt.open(hv1.uri), libvirt.open(hv2.uri)
    prefix = "mig-sh-%s-" % uuid.uuid4().hex[:6]
    yield hv1, hv2, conn1, conn2, prefix
    for conn in (conn1, conn2):
        remove_prefixed(conn, prefix)
    for vol in conn1.storagePoolLookupByName("shared").listAllVolumes(0):
        if vol.name().startswith(prefix):
            vol.delete(0)
    conn1.close()
    conn2.close()


def _move(tmp_path, hv1, hv2, name, title="move"):
    providers = {"hv1": {"type": "libvirt", "name": "hv1", "uri": hv1.uri, "az": "az1"},
                 "hv2": {"type": "libvirt", "name": "hv2", "uri": hv2.uri, "az": "az1"}}
    tasks = [{"name": title, "ignore_errors": True,
              "resilient.virt.vm_migrate": {"vm": name, "target": "hv2"}}]
    defaults = {"providers": providers, "provider": "hv1",
                "state_store": "sqlite://%s" % (tmp_path / "s.db")}
    run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], name=title)
    assert "Traceback" not in run.output, run.output
    return run.task(title)


def _on_host(lab, path):
    """The file of the shared disk ``path`` as this machine sees it (the lab's run directory)."""
    return os.path.join(lab.hypervisor("hv1").shared, os.path.basename(path))


def _no_marker(lab):
    return not [f for f in os.listdir(lab.hypervisor("hv1").shared) if f.startswith(MARKER_PREFIX)]


def test_a_running_vm_moves_live_and_keeps_its_shared_disk(tmp_path, two_hvs, lab):
    hv1, hv2, conn1, conn2, prefix = two_hvs
    name = prefix + "live"
    path = make_vm(conn1, hv1, name, size_mib=16, pool_name="shared", cache="none")[1]
    inode = os.stat(_on_host(lab, path)).st_ino
    moved = _move(tmp_path, hv1, hv2, name)
    assert not moved.failed and moved["changed"], moved.result
    assert moved["migration"]["mode"] == "live"
    assert (moved["migration"]["copied_disks"], moved["migration"]["shared_disks"]) == ([], [path])
    moved_dom = conn2.lookupByName(name)
    assert moved_dom.state() == [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_MIGRATED]
    assert [name] == [d.name() for d in conn2.listAllDomains(0) if d.name() == name]
    assert name not in [d.name() for d in conn1.listAllDomains(0)]
    assert os.stat(_on_host(lab, path)).st_ino == inode  # the same file, neither copied nor removed
    assert holds(hv2, path, "0x11", 0, 4 * 1024 * 1024)
    assert _no_marker(lab)
    again = _move(tmp_path, hv1, hv2, name, title="again")
    assert not again.failed and not again["changed"], again.result


def test_a_shared_disk_that_keeps_the_page_cache_is_not_moved_live(tmp_path, two_hvs, lab):
    hv1, hv2, conn1, conn2, prefix = two_hvs
    name = prefix + "cached"
    make_vm(conn1, hv1, name, size_mib=16, pool_name="shared")
    refused = _move(tmp_path, hv1, hv2, name)
    assert refused.failed and refused["error"]["type"] == "Conflict", refused.result
    assert "cache" in refused["msg"] and "vda" in refused["msg"], refused["msg"]
    assert conn1.lookupByName(name).isActive()
    assert name not in [d.name() for d in conn2.listAllDomains(0)]
    assert _no_marker(lab)


def test_a_stopped_vm_moves_cold_and_keeps_its_shared_disk(tmp_path, two_hvs, lab):
    hv1, hv2, conn1, conn2, prefix = two_hvs
    name = prefix + "cold"
    path = make_vm(conn1, hv1, name, size_mib=16, running=False, pool_name="shared")[1]
    inode = os.stat(_on_host(lab, path)).st_ino
    moved = _move(tmp_path, hv1, hv2, name)
    assert not moved.failed and moved["migration"]["mode"] == "cold", moved.result
    assert moved["migration"]["shared_disks"] == [path]
    moved_dom = conn2.lookupByName(name)
    assert not moved_dom.isActive() and moved_dom.isPersistent()
    assert name not in [d.name() for d in conn1.listAllDomains(0)]
    assert os.stat(_on_host(lab, path)).st_ino == inode
    assert holds(hv2, path, "0x11", 0, 4 * 1024 * 1024)
