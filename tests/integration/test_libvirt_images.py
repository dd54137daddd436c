"""Disks made from base images and cloud-init seeds, through real ansible-playbook runs on one lab
hypervisor (hv1): an overlay VM, a copy VM, a VM with a seed, what deleting them leaves, and bad
input failing cleanly.

The base image is a small qcow2 volume the test makes itself with libvirt. Every outcome is
checked against libvirt and the files themselves: the volume XML (backing store, capacity),
``qemu-img info --output=json`` on the image file (the hypervisor's /var/lib/libvirt is
lab/run/hv1/lib on this machine), the domain XML, and the seed ISO downloaded through a libvirt
stream and read with pycdlib. The user data holds a marker that must never show in the output of
``ansible-playbook -vvv``.
"""
import io
import json
import subprocess
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pycdlib
import pytest
import yaml

from playbook_runner import play, run_playbook

HV = "hv1"
VM = "resilient.virt.vm"
POOLS = ("default", "backups")
POOL_DIRS = {"/var/lib/libvirt/images/": ("lib", "images"),
             "/var/lib/libvirt/backups/": ("lib", "backups")}
BASE_MIB = 64


@pytest.fixture
def hv1(lab):
    """(connection, token, base image volume): a 64 MiB qcow2 base made with libvirt; every
    domain and volume named it-img-<token>... is removed afterwards."""
    conn = libvirt.open(lab.hypervisor(HV).uri)
    token = "it-img-%s" % uuid.uuid4().hex[:6]
    pool = conn.storagePoolLookupByName("default")
    base = pool.createXML(
        "<volume><name>%s-base.qcow2</name><capacity unit='MiB'>%d</capacity><target>"
        "<format type='qcow2'/></target></volume>" % (token, BASE_MIB), 0)
    yield conn, token, base
    for dom in conn.listAllDomains(0):
        if dom.name().startswith(token):
            if dom.isActive():
                dom.destroy()
            dom.undefine()
    for vol in _volumes(conn, token):
        vol.delete(0)
    conn.close()


def _volumes(conn, token):
    found = []
    for name in POOLS:
        pool = conn.storagePoolLookupByName(name)
        pool.refresh(0)
        found.extend(v for v in pool.listAllVolumes() if v.name().startswith(token))
    return found


def _names(conn, token):
    return sorted(v.name() for v in _volumes(conn, token))


def _host_file(lab, path):
    """Where the hypervisor's file ``path`` lies on this machine."""
    for prefix, parts in POOL_DIRS.items():
        if path.startswith(prefix):
            return lab.hypervisor(HV).path(*(parts + (path[len(prefix):],)))
    raise AssertionError("%s is in no pool of the lab" % path)


def _qemu_img(lab, path):
    # -U: a running VM holds a write lock on its image; this only reads the header
    out = subprocess.run(["qemu-img", "info", "-U", "--output=json", _host_file(lab, path)],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def _disks(conn, name):
    """(device, bus, source) of every disk of the persistent domain ``name``."""
    root = ET.fromstring(conn.lookupByName(name).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
    return [(d.get("device"), d.find("target").get("bus"), d.find("source").get("file"))
            for d in root.findall("devices/disk")]


def _run(lab, tmp_path, tasks, step, **kwargs):
    hv = lab.hypervisor(HV)
    defaults = {"provider": {"type": "libvirt", "name": hv.name, "uri": hv.uri,
                             "domain_type": "qemu"},
                "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    run = run_playbook(tmp_path, [play([dict(name=title, ignore_errors=True, **{VM: args})
                                        for title, args in tasks], module_defaults=defaults)],
                       name=step, **kwargs)
    assert "Traceback" not in run.output, run.output
    return run


def _vm(name, **spec):
    return dict({"name": name, "vcpus": 1, "memory_mb": 64}, **spec)


def test_overlay_and_copy_vms_from_a_base_image(lab, hv1, tmp_path):
    conn, token, base = hv1
    overlay, copy = token + "-overlay", token + "-copy"
    overlay_disks = [{"base_image": base.path()}, {"size_gb": 1, "pool": "backups"}]
    copy_disks = [{"base_image": "default/" + base.name(), "clone": "copy", "size_gb": 1}]
    run = _run(lab, tmp_path, [
        ("overlay", _vm(overlay, disks=overlay_disks, state="running")),
        ("copy", _vm(copy, disks=copy_disks)),
        ("overlay again", _vm(overlay, disks=overlay_disks, state="running")),
        ("copy again", _vm(copy, disks=copy_disks)),
    ], "create")
    made = run.task("overlay")
    assert made["changed"] is True and made["vm"]["state"] == "running", made
    assert [run.task(t)["changed"] for t in ("copy", "overlay again", "copy again")] == [
        True, False, False]

    (_dev, _bus, top), (_dev2, _bus2, second) = _disks(conn, overlay)
    vol = conn.storageVolLookupByPath(top)
    root = ET.fromstring(vol.XMLDesc(0))
    assert root.findtext("backingStore/path") == base.path()
    assert root.find("backingStore/format").get("type") == "qcow2"
    assert root.find("target/format").get("type") == "qcow2"
    info = _qemu_img(lab, top)
    assert (info["format"], info["backing-filename"], info["backing-filename-format"]) == (
        "qcow2", base.path(), "qcow2")
    assert info["virtual-size"] == BASE_MIB * 1024 ** 2
    assert conn.storageVolLookupByPath(second).storagePoolLookupByVolume().name() == "backups"
    shown = made["vm"]["disks"]
    assert (shown[0]["base_image"], shown[0]["clone"], shown[0]["pool"]) == (
        base.path(), "overlay", "default")
    assert shown[1]["pool"] == "backups" and "base_image" not in shown[1]

    ((_dev, _bus, copied),) = _disks(conn, copy)
    info = _qemu_img(lab, copied)
    assert "backing-filename" not in info and info["format"] == "qcow2"
    assert info["virtual-size"] == 1024 ** 3  # size_gb: larger than the base
    assert ET.fromstring(conn.storageVolLookupByPath(copied).XMLDesc(0)).find(
        "backingStore/path") is None

    before = _names(conn, token)
    assert len(before) == 4  # base, overlay, its second disk, copy
    run = _run(lab, tmp_path, [("delete overlay", {"name": overlay, "state": "absent"}),
                               ("delete copy", {"name": copy, "state": "absent"})], "delete")
    assert run.task("delete overlay")["changed"] and run.task("delete copy")["changed"]
    assert _names(conn, token) == [base.name()]  # the volumes gone, the base kept
    assert _qemu_img(lab, base.path())["format"] == "qcow2"


def _iso_files(conn, path):
    """The files of the ISO volume at ``path``, downloaded through a libvirt stream, read with
    pycdlib: ({Rock Ridge name: bytes}, volume label)."""
    vol = conn.storageVolLookupByPath(path)
    stream = conn.newStream(0)
    vol.download(stream, 0, 0, 0)
    chunks = []
    while True:
        chunk = stream.recv(256 * 1024)
        if not chunk:
            break
        chunks.append(chunk)
    stream.finish()
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(b"".join(chunks)))
    try:
        files = {}
        for child in iso.list_children(rr_path="/"):
            if child.is_file():
                name = child.rock_ridge.name().decode()
                out = io.BytesIO()
                iso.get_file_from_iso_fp(out, rr_path="/" + name)
                files[name] = out.getvalue()
        return files, iso.pvd.volume_identifier.decode().strip()
    finally:
        iso.close()


def test_a_vm_with_a_cloud_init_seed(lab, hv1, tmp_path):
    conn, token, base = hv1
    name = token + "-seed"
    marker = "it-img-S3cret-%s" % uuid.uuid4().hex[:10]
    # under keys whose names do not say secret: only no_log keeps the marker hidden
    user_data = {"users": [{"name": "deploy", "ssh_authorized_keys": ["ssh-ed25519 " + marker]}],
                 "write_files": [{"path": "/etc/marker", "content": marker}],
                 "packages": ["nginx"]}
    network = {"version": 2, "ethernets": {"eth0": {"dhcp4": True}}}
    task = _vm(name, disks=[{"base_image": base.path()}], state="running",
               cloud_init={"user_data": "{{ user_data }}", "meta_data": {"zone": "lab"},
                           "network_config": network})
    run = _run(lab, tmp_path, [("seeded", task), ("seeded again", task)], "seed",
               extra_vars={"user_data": user_data}, args=("-vvv",))
    assert marker not in run.output, run.output[max(0, run.output.find(marker) - 2000):][:3000]
    assert "a module process runs the task" not in run.output  # the controller's worker ran it
    seeded = run.task("seeded")
    assert seeded["changed"] is True and seeded["vm"]["state"] == "running", seeded
    assert run.task("seeded again")["changed"] is False
    assert seeded["invocation"]["module_args"]["cloud_init"]["user_data"]["write_files"][0][
        "content"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert len(seeded["vm"]["disks"]) == 1  # the seed is not one of the VM's disks

    disks = _disks(conn, name)
    assert [(d, b) for d, b, _p in disks] == [("disk", "virtio"), ("cdrom", "sata")]
    seed_path = disks[1][2]
    dom = ET.fromstring(conn.lookupByName(name).XMLDesc(0))
    (cdrom,) = [d for d in dom.findall("devices/disk") if d.get("device") == "cdrom"]
    assert cdrom.find("driver").get("type") == "raw" and cdrom.find("readonly") is not None
    # libvirt's own probe of the file, on the pool's refresh: an ISO image
    root = ET.fromstring(conn.storageVolLookupByPath(seed_path).XMLDesc(0))
    assert root.find("target/format").get("type") == "iso"
    assert conn.storageVolLookupByPath(seed_path).storagePoolLookupByVolume().name() == "default"
    files, label = _iso_files(conn, seed_path)
    assert label == "cidata"
    assert sorted(files) == ["meta-data", "network-config", "user-data"]
    assert files["user-data"].startswith(b"#cloud-config\n")
    assert yaml.safe_load(files["user-data"]) == user_data
    assert yaml.safe_load(files["meta-data"]) == {
        "instance-id": conn.lookupByName(name).UUIDString(), "local-hostname": name,
        "zone": "lab"}
    assert yaml.safe_load(files["network-config"]) == network

    # what a user sees: the default callback with -vvv, the task as a module process this time
    human = _run(lab, tmp_path, [("seeded", task)], "seed-human",
                 extra_vars={"user_data": user_data}, args=("-vvv",),
                 env={"ANSIBLE_STDOUT_CALLBACK": "default", "RESILIENT_VIRT_IN_PROCESS": "false"})
    assert human.rc == 0 and "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in human.output, human.output
    assert "AnsiballZ_vm.py" in human.output  # it did run as a module process
    assert marker not in human.output

    _run(lab, tmp_path, [("delete", {"name": name, "state": "absent"})], "delete")
    assert _names(conn, token) == [base.name()]  # overlay and seed gone, the base kept


def test_bad_input_fails_by_field_and_leaves_nothing(lab, hv1, tmp_path):
    conn, token, base = hv1
    before = _names(conn, token)
    name = token + "-bad"
    run = _run(lab, tmp_path, [
        ("missing base", _vm(name, disks=[{"size_gb": 1},
                                          {"base_image": "/var/lib/libvirt/images/%s-no.qcow2"
                                                         % token}])),
        ("unknown pool", _vm(name, disks=[{"base_image": base.path(), "pool": token + "-none"}],
                             cloud_init={"user_data": "#cloud-config\n{}\n"})),
        ("pool for a path", _vm(name, disks=[{"path": base.path(), "pool": "default"}])),
    ], "bad")
    expected = {"missing base": "disks[1].base_image", "unknown pool": "disks[0].pool",
                "pool for a path": "disks[0].pool"}
    for title, field in expected.items():
        failed = run.task(title)
        assert failed.failed and failed["error"]["type"] == "InvalidSpec", failed
        assert field in failed["msg"] and [e["path"] for e in failed["error"]["details"]["errors"]] \
            == [field], failed
    assert "virsh pool-refresh" in run.task("missing base")["msg"]
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(name)
    assert _names(conn, token) == before


def test_a_size_below_the_base_image_is_refused(lab, hv1, tmp_path):
    conn, token, _base = hv1
    big = conn.storagePoolLookupByName("default").createXML(
        "<volume><name>%s-big.qcow2</name><capacity unit='GiB'>3</capacity><target>"
        "<format type='qcow2'/></target></volume>" % token, 0)
    before = _names(conn, token)
    name = token + "-small"
    run = _run(lab, tmp_path, [("too small", _vm(name, disks=[
        {"size_gb": 1}, {"base_image": big.path(), "size_gb": 2}],
        cloud_init={"user_data": "#cloud-config\n{}\n"}))], "small")
    failed = run.task("too small")
    assert failed.failed and failed["error"]["type"] == "InvalidSpec", failed
    assert [e["path"] for e in failed["error"]["details"]["errors"]] == ["disks[1].size_gb"]
    assert "give at least 3" in failed["msg"]
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByName(name)
    assert _names(conn, token) == before
