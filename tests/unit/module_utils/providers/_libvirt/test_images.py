"""Disks made from base images, storage pools per disk and cloud-init seeds, against libvirt's
in-process test:///default driver (which keeps volume XML, backing stores included, but cannot
upload); each result is read back through libvirt-python, the seed ISO with pycdlib."""
import io
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pycdlib
import pytest
import yaml

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, NotFound
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import (
    domain, images, spec as dom)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
    LibvirtProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.edit import DomainEdit
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import differences

from provider_testing import TEST_POOL

MIB = 1024 ** 2


@pytest.fixture
def provider(libvirt_config):
    prov = LibvirtProvider(libvirt_config)
    yield prov
    prov.close()


@pytest.fixture
def pool(provider):
    """The storage pool; the volumes named it-img-... (the bases) are deleted afterwards."""
    found = provider._connection().storagePoolLookupByName(TEST_POOL)
    yield found
    for vol in found.listAllVolumes():
        if vol.name().startswith("it-img-"):
            vol.delete(0)


def _base(pool, fmt="qcow2", mib=1536, name=None):
    """A base image volume of ``mib`` MiB made with libvirt; its name never says its format."""
    name = name or "it-img-base-%s.img" % uuid.uuid4().hex[:6]
    return pool.createXML("<volume><name>%s</name><capacity unit='MiB'>%d</capacity><target>"
                          "<format type='%s'/></target></volume>" % (name, mib, fmt), 0)


def _names(pool):
    return sorted(pool.listVolumes())


def _xml(conn, path):
    return ET.fromstring(conn.storageVolLookupByPath(path).XMLDesc(0))


def _invalid(call):
    with pytest.raises(InvalidSpec) as info:
        call()
    return dict((e["path"], e["message"]) for e in info.value.details["errors"])


def test_an_overlay_is_a_qcow2_volume_backed_by_the_base_and_delete_keeps_the_base(provider, pool):
    conn = provider._connection()
    base = _base(pool, "raw")  # a raw image: its format is read from libvirt, not guessed
    before = _names(pool)
    vm = provider.create({"name": "it-img-ov", "vcpus": 1, "memory_mb": 64,
                          "disks": [{"base_image": base.path()}]})
    (disk,) = vm["disks"]
    root = _xml(conn, disk["path"])
    assert root.findtext("backingStore/path") == base.path()
    assert root.find("backingStore/format").get("type") == "raw"
    assert root.find("target/format").get("type") == "qcow2" and disk["format"] == "qcow2"
    assert int(root.findtext("capacity")) == 1536 * MIB
    assert (disk["base_image"], disk["clone"], disk["pool"], disk["size_gb"]) == (
        base.path(), "overlay", TEST_POOL, 2)
    assert provider.describe("it-img-ov")["disks"] == vm["disks"]
    # the same disk asked again is no change (idempotence of the vm module)
    assert differences(vm, {"disks": [{"base_image": base.path()}]}) == {}
    provider.delete("it-img-ov")
    assert _names(pool) == before and base.name() in _names(pool)


def test_a_copy_has_no_backing_store_and_grows_to_size_gb(provider, pool):
    conn = provider._connection()
    base = _base(pool)
    vm = provider.create({"name": "it-img-cp", "vcpus": 1, "memory_mb": 64, "disks": [
        {"base_image": "%s/%s" % (TEST_POOL, base.name()), "clone": "copy", "size_gb": 3},
        {"base_image": base.name(), "size_gb": 2}]})
    copy, overlay = vm["disks"]
    root = _xml(conn, copy["path"])
    assert root.find("backingStore") is None or root.findtext("backingStore/path") is None
    assert int(root.findtext("capacity")) == 3 * 1024 * MIB
    assert (copy["clone"], copy["size_gb"]) == ("copy", 3)
    assert _xml(conn, overlay["path"]).findtext("backingStore/path") == base.path()
    provider.delete("it-img-cp")
    assert base.name() in _names(pool)


def test_a_disk_pool_puts_its_volume_there(provider, pool):
    conn = provider._connection()
    other = conn.storagePoolCreateXML("<pool type='dir'><name>it-img-fast</name><target><path>"
                                      "/it-img-fast</path></target></pool>", 0)
    try:
        base = _base(pool)
        vm = provider.create({"name": "it-img-pool", "vcpus": 1, "memory_mb": 64, "disks": [
            {"size_gb": 1, "pool": "it-img-fast"},
            {"base_image": base.path(), "pool": "it-img-fast"}]})
        assert [d["pool"] for d in vm["disks"]] == ["it-img-fast", "it-img-fast"]
        assert len(other.listVolumes()) == 2
        assert _xml(conn, vm["disks"][1]["path"]).findtext("backingStore/path") == base.path()
        provider.delete("it-img-pool")
        assert other.listVolumes() == []
    finally:
        other.destroy()


def test_bad_images_and_pools_are_refused_by_field_before_any_volume(provider, pool):
    conn = provider._connection()
    base = _base(pool)
    inactive = conn.storagePoolDefineXML("<pool type='dir'><name>it-img-off</name><target><path>"
                                         "/it-img-off</path></target></pool>", 0)
    try:
        before = _names(pool)
        disks = [{"size_gb": 1},
                 {"base_image": "/no/such/image.qcow2"},
                 {"base_image": base.path(), "size_gb": 1},
                 {"size_gb": 1, "pool": "it-img-nopool"},
                 {"base_image": "it-img-nopool/x.qcow2"},
                 {"size_gb": 1, "pool": "it-img-off"}]
        found = _invalid(lambda: provider.create({"name": "it-img-bad", "vcpus": 1,
                                                  "memory_mb": 64, "disks": disks}))
        assert set(found) == {"disks[1].base_image", "disks[2].size_gb", "disks[3].pool",
                              "disks[4].base_image", "disks[5].pool"}
        assert "virsh pool-refresh" in found["disks[1].base_image"]
        assert "1.50 GiB" in found["disks[2].size_gb"] and "at least 2" in found["disks[2].size_gb"]
        assert "does not exist" in found["disks[3].pool"]
        assert "not active" in found["disks[5].pool"] and "virsh pool-start" in found["disks[5].pool"]
        assert _names(pool) == before  # not even disks[0]'s volume
        with pytest.raises(NotFound):
            provider.describe("it-img-bad")
    finally:
        inactive.undefine()


def test_a_base_image_must_be_qcow2_or_raw(provider, pool):
    iso = _base(pool, "iso", 1)
    found = _invalid(lambda: provider.create({"name": "it-img-iso", "vcpus": 1, "memory_mb": 64,
                                              "disks": [{"base_image": iso.path()}]}))
    assert "iso volume" in found["disks[0].base_image"]


def test_the_spec_refuses_what_a_base_image_disk_cannot_be():
    found = _invalid(lambda: dom.validate_spec({"name": "v", "vcpus": 1, "memory_mb": 64, "disks": [
        {"base_image": "/b.qcow2", "path": "/p.qcow2"},
        {"size_gb": 1, "clone": "copy"},
        {"path": "/p.qcow2", "pool": "fast"},
        {"base_image": "/b.qcow2", "format": "raw"},
        {"base_image": "/b.iso", "device": "cdrom"},
        {"base_image": "/b.qcow2", "clone": "link"},
        {"base_image": ""}]}))
    assert "exactly one of size_gb" in found["disks[0]"]
    assert "base_image" in found["disks[1].clone"]
    assert "remove pool" in found["disks[2].pool"]
    assert "clone: copy" in found["disks[3].format"]
    assert "path" in found["disks[4].base_image"]
    assert "disks[5].clone" in found and "disks[6].base_image" in found
    spec = dom.validate_spec({"name": "v", "vcpus": 1, "memory_mb": 64, "disks": [
        {"base_image": "/b.raw"}, {"base_image": "/b.raw", "clone": "copy", "format": "raw"}]})
    assert [(d["clone"], d["format"]) for d in spec["disks"]] == [("overlay", "qcow2"),
                                                                  ("copy", "raw")]


def test_cloud_init_values_are_never_in_spec_errors():
    secret = "it-img-S3cret-%s" % uuid.uuid4().hex[:6]
    for user_data in ([secret], 12345678, True):
        bad = dict(user_data=user_data, meta_data=secret, network_config=[secret], other=secret)
        with pytest.raises(InvalidSpec) as info:
            dom.validate_spec({"name": "v", "vcpus": 1, "memory_mb": 64, "cloud_init": bad})
        paths = [e["path"] for e in info.value.details["errors"]]
        assert set(paths) == {"cloud_init.user_data", "cloud_init.meta_data",
                              "cloud_init.network_config", "cloud_init.other"}
        assert secret not in str(info.value) and str(user_data) not in str(info.value)
    # control characters are refused in what goes into the XML, not in the seed's data
    assert dom.validate_spec({"name": "v", "vcpus": 1, "memory_mb": 64,
                              "cloud_init": {"user_data": "#!/bin/sh\x07\n"}})


def test_seed_files_are_cloud_config_yaml_with_default_meta_data():
    user = {"users": [{"name": "deploy", "ssh_authorized_keys": ["ssh-ed25519 AAAA k"]}],
            "packages": ["nginx"]}
    files = images.seed_files({"user_data": user, "network_config": {"version": 2}}, "u-1", "web1")
    assert files["user-data"].startswith(b"#cloud-config\n")
    assert yaml.safe_load(files["user-data"]) == user
    assert yaml.safe_load(files["meta-data"]) == {"instance-id": "u-1", "local-hostname": "web1"}
    assert yaml.safe_load(files["network-config"]) == {"version": 2}
    given = images.seed_files({"user_data": "#!/bin/sh\necho hi\n", "network_config": "version: 1\n",
                               "meta_data": {"local-hostname": "other", "x": 1}}, "u-2", "web2")
    assert given["user-data"] == b"#!/bin/sh\necho hi\n"
    assert given["network-config"] == b"version: 1\n"
    assert yaml.safe_load(given["meta-data"]) == {"instance-id": "u-2", "local-hostname": "other",
                                                  "x": 1}
    assert set(images.seed_files({}, "u", "n")) == {"user-data", "meta-data"}


def test_the_seed_is_an_iso_labelled_cidata_that_cloud_init_can_read():
    files = {"user-data": b"#cloud-config\n{}\n", "meta-data": b"instance-id: i\n",
             "network-config": b"version: 2\n"}
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(images.seed_iso(files)))
    try:
        assert iso.pvd.volume_identifier.decode().strip() == "cidata"
        assert iso.joliet_vd.volume_identifier.decode("utf-16-be").strip() == "cidata"
        for name, data in files.items():
            for where in ({"rr_path": "/" + name}, {"joliet_path": "/" + name}):
                out = io.BytesIO()
                iso.get_file_from_iso_fp(out, **where)
                assert out.getvalue() == data
    finally:
        iso.close()


def _seeded_xml():
    spec = dom.validate_spec({"name": "s", "vcpus": 1, "memory_mb": 64,
                              "disks": [{"base_image": "/b.qcow2"}, {"size_gb": 1, "bus": "sata"}]})
    volumes = {0: {"pool": "p", "name": "s-0", "path": "/p/s-0", "size_gb": 2,
                   "base_image": "/b.qcow2", "clone": "overlay"},
               1: {"pool": "p", "name": "s-1", "path": "/p/s-1", "size_gb": 1}}
    seed = {"pool": "p", "name": "s-cidata.iso", "path": "/p/s-cidata.iso", "size_gb": 1,
            "role": domain.SEED_ROLE}
    return dom.build_domain_xml(spec, "test", None, volumes, None, seed), volumes, seed


def test_the_seed_is_a_recorded_sata_cdrom_that_is_not_one_of_the_disks():
    text, volumes, seed = _seeded_xml()
    cdroms = [d for d in ET.fromstring(text).findall("devices/disk") if d.get("device") == "cdrom"]
    (cdrom,) = cdroms
    assert cdrom.find("source").get("file") == seed["path"]
    assert (cdrom.find("target").get("bus"), cdrom.find("target").get("dev")) == ("sata", "sdb")
    assert cdrom.find("readonly") is not None and cdrom.find("driver").get("type") == "raw"
    assert domain.managed_volumes(text) == [volumes[0], volumes[1], seed]
    parsed = domain.parse_domain_xml(text)
    assert [d["path"] for d in parsed["disks"]] == ["/p/s-0", "/p/s-1"]
    assert (parsed["disks"][0]["base_image"], parsed["disks"][0]["clone"]) == ("/b.qcow2", "overlay")
    assert "base_image" not in parsed["disks"][1] and parsed["disks"][1]["pool"] == "p"


def _edited(text, wanted, volumes=None):
    edit = DomainEdit(text)
    edit.disks(wanted, dom.validate_spec({"name": "s", "vcpus": 1, "memory_mb": 64,
                                          "disks": wanted})["disks"], volumes or {})
    return edit, edit.finish()


def test_day2_disk_changes_leave_the_seed_alone():
    text, _volumes, seed = _seeded_xml()
    grown = [{"base_image": "/b.qcow2"}, {"size_gb": 1, "bus": "sata"}, {"size_gb": 1}]
    added = {"pool": "p", "name": "s-2", "path": "/p/s-2", "size_gb": 1}
    _edit, text = _edited(text, grown, {2: added})  # placed after the seed's cdrom
    sources = [d.find("source").get("file") for d in ET.fromstring(text).findall("devices/disk")]
    assert sources == ["/p/s-0", "/p/s-1", seed["path"], "/p/s-2"]
    assert [d["path"] for d in domain.parse_domain_xml(text)["disks"]] == [
        "/p/s-0", "/p/s-1", "/p/s-2"]
    edit, after = _edited(text, grown[:2])  # the disk added last removed, not the seed
    assert [v["name"] for v in edit.kept] == ["s-2"]
    assert [d.find("source").get("file") for d in ET.fromstring(after).findall(
        "devices/disk")] == ["/p/s-0", "/p/s-1", seed["path"]]
    assert seed in domain.managed_volumes(after)


def test_a_domain_with_image_disks_and_a_seed_validates_against_libvirts_schema(provider):
    text, _volumes, _seed = _seeded_xml()
    dom_ = provider._connection().defineXMLFlags(text, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
    dom_.undefine()


def test_a_failed_seed_upload_leaves_nothing_behind(provider, pool):
    """test:///default cannot upload: the disks' volumes made before are deleted again."""
    base = _base(pool)
    before = _names(pool)
    with pytest.raises(libvirt.libvirtError) as info:
        provider.create({"name": "it-img-seed", "vcpus": 1, "memory_mb": 64,
                         "disks": [{"base_image": base.path()}, {"size_gb": 1}],
                         "cloud_init": {"user_data": "#cloud-config\n{}\n"}})
    assert info.value.get_error_code() == libvirt.VIR_ERR_NO_SUPPORT
    assert _names(pool) == before
    assert "it-img-seed" not in [vm["name"] for vm in provider.list_vms()]


def test_a_missing_seed_pool_is_refused_before_any_volume(libvirt_config):
    prov = LibvirtProvider(dict(libvirt_config, storage_pool="it-img-nopool"))
    try:
        found = _invalid(lambda: prov.create({"name": "it-img-np", "vcpus": 1, "memory_mb": 64,
                                              "cloud_init": {}}))
        assert "cloud_init needs one" in found["provider.storage_pool"]
    finally:
        prov.close()


def test_a_base_image_disk_can_be_added_to_an_existing_vm(provider, pool):
    conn = provider._connection()
    base = _base(pool)
    provider.create({"name": "it-img-add", "vcpus": 1, "memory_mb": 64})
    try:
        vm = provider.reconfigure("it-img-add", disks=[{"base_image": base.path(),
                                                        "clone": "copy"}])
        (disk,) = vm["disks"]
        assert (disk["base_image"], disk["clone"]) == (base.path(), "copy")
        assert conn.storageVolLookupByPath(disk["path"]).info()[1] == 1536 * MIB
    finally:
        provider.delete("it-img-add")
    assert base.name() in _names(pool)
