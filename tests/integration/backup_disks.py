"""Disks with known data on lab hypervisors, for backup tests: VMs made with libvirt-python,
data written and read back with ``qemu-io``/``qemu-img`` inside the hypervisor's mount namespace
(``nsenter``), where the paths libvirt reports, and the backing files of incremental backups,
are valid. VMs are tiny TCG domains with no OS: they only need to run, so nothing but the test
writes to their disks.
"""
import json
import subprocess
import uuid
import xml.etree.ElementTree as ET

import libvirt

from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import (
    build_domain_xml, validate_spec)

MAC = "52:54:00:5e:00:42"


def remove_prefixed(conn, mark):
    """Remove every domain (with its checkpoints) and every volume of the pools default and
    backups whose name starts with ``mark``."""
    for dom in conn.listAllDomains(0):
        if dom.name().startswith(mark):
            if dom.isActive():
                dom.destroy()
            dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA)
    for pool_name in ("default", "backups"):
        pool = conn.storagePoolLookupByName(pool_name)
        for vol in pool.listAllVolumes(0):
            if vol.name().startswith(mark):
                vol.delete(0)


def in_hv(hv, *command):
    """Run ``command`` inside the hypervisor's mount namespace; its stdout."""
    pid = hv.daemon_pid("libvirtd")
    done = subprocess.run(["nsenter", "-t", str(pid), "-m", "--"] + list(command),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return done.stdout


def write(hv, path, pattern, offset, length):
    in_hv(hv, "qemu-io", "-f", "qcow2", "-c", "write -P %s %s %s" % (pattern, offset, length), path)


def holds(hv, path, pattern, offset, length):
    """True when the image at ``path`` (its chain read through) holds ``pattern`` there."""
    pid = hv.daemon_pid("libvirtd")
    done = subprocess.run(["nsenter", "-t", str(pid), "-m", "--", "qemu-io", "-r", "-U", "-f",
                           "qcow2", "-c", "read -P %s %s %s" % (pattern, offset, length), path],
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode == 0 and "Pattern verification failed" not in done.stdout


def allocated(hv, path):
    """[(start, length)] of the data clusters stored in the image itself (not its backing)."""
    ranges = json.loads(in_hv(hv, "qemu-img", "map", "-U", "--output=json", path))
    return [(r["start"], r["length"]) for r in ranges if r["depth"] == 0 and r["data"]]


def make_vm(conn, hv, name, size_mib=64, running=True, disk_format="qcow2", pool_name="default",
            cache=None):
    """A tiny VM whose disk (a managed volume of pool ``pool_name``, like those ``create`` makes,
    with the driver's ``cache`` mode when given) holds 0x11 in its first 4 MiB; it also has an
    empty cdrom drive (never backed up) and one NIC with MAC address :data:`MAC`."""
    pool = conn.storagePoolLookupByName(pool_name)
    volume = ET.Element("volume")
    ET.SubElement(volume, "name").text = "%s-disk0.%s" % (name, disk_format)
    ET.SubElement(volume, "capacity", unit="MiB").text = str(size_mib)
    target = ET.SubElement(volume, "target")
    ET.SubElement(target, "format", type=disk_format)
    if disk_format == "qcow2":
        ET.SubElement(target, "compat").text = "1.1"
    vol = pool.createXML(ET.tostring(volume, encoding="unicode"), 0)
    in_hv(hv, "qemu-io", "-f", disk_format, "-c", "write -P 0x11 0 4M", vol.path())
    spec = validate_spec({"name": name, "vcpus": 1, "memory_mb": 64,
                          "disks": [{"path": vol.path(), "format": disk_format},
                                    {"device": "cdrom"}]})
    xml = build_domain_xml(spec, "qemu", str(uuid.uuid4()), {0: {
        "pool": pool_name, "name": vol.name(), "path": vol.path(), "size_gb": 1}})
    root = ET.fromstring(xml)
    if cache:
        root.find("devices/disk[@device='disk']/driver").set("cache", cache)
    nic = ET.SubElement(root.find("devices"), "interface", type="user")
    ET.SubElement(nic, "mac", address=MAC)
    ET.SubElement(nic, "model", type="virtio")
    dom = conn.defineXML(ET.tostring(root, encoding="unicode"))
    if running:
        dom.create()
    return dom, vol.path()


def disk_of(dom):
    [path] = [s.get("file") for s in ET.fromstring(dom.XMLDesc(0)).findall(
        "devices/disk[@device='disk']/source")]
    return path


def macs(dom):
    return [m.get("address") for m in ET.fromstring(dom.XMLDesc(0)).findall(
        "devices/interface/mac")]


def checkpoints(dom):
    return sorted(c.getName() for c in dom.listAllCheckpoints(0))


def volume_names(conn, pool, start):
    return sorted(v.name() for v in conn.storagePoolLookupByName(pool).listAllVolumes(0)
                  if v.name().startswith(start))
