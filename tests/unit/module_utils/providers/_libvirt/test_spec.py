"""VM spec validation and the domain XML written from it, read back (no hypervisor needed)."""
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import domain
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import spec as dom
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.edit import DomainEdit

BASE = {"name": "vm1", "vcpus": 1, "memory_mb": 64}


def invalid(spec):
    with pytest.raises(InvalidSpec) as info:
        dom.validate_spec(spec)
    return info.value


def errors_of(spec):
    return dict((e["path"], e["message"]) for e in invalid(spec).details["errors"])


def test_diskless_spec_is_valid_and_builds_a_qemu_hvm_domain():
    spec = dom.validate_spec(BASE)
    root = ET.fromstring(dom.build_domain_xml(spec))
    assert root.get("type") == "qemu"
    assert root.findtext("os/type") == "hvm"
    assert root.findall("devices/disk") == []
    assert [b.get("dev") for b in root.findall("os/boot")] == ["hd"]
    assert ET.fromstring(dom.build_domain_xml(spec, domain_type="kvm")).get("type") == "kvm"


def test_every_bad_field_is_reported_by_path():
    spec = {
        "name": "a/b", "vcpus": 0, "memory_mb": 8, "colour": "red",
        "disks": [{"size_gb": -1}, {"device": "cdrom", "bus": "virtio", "size_gb": 2}, {},
                  {"size_gb": 1, "path": "/x.img"}, {"path": "relative.img"}],
        "interfaces": [{"network": "a", "bridge": "b", "mac": "zz"}, {"model": "ne2k"}],
        "boot": ["hd", "floppy"], "tags": ["ok", "ok"], "metadata": {"k": ["list"]},
    }
    err, found = invalid(spec), errors_of(spec)
    assert found["disks[0].size_gb"] == "-1 is less than the minimum of 1"
    assert "disks[0].size_gb: -1 is less than the minimum of 1" in str(err)
    assert found["vcpus"] == "0 is less than the minimum of 1"
    assert found["memory_mb"] == "8 is less than the minimum of 16"
    assert "unknown field" in found["colour"] and "memory_mb" in found["colour"]
    assert "'/'" in found["name"]
    assert "cdrom" in found["disks[1].size_gb"] and "virtio" in found["disks[1].bus"]
    assert "exactly one of size_gb" in found["disks[2]"]
    assert "exactly one of size_gb" in found["disks[3]"]
    assert "disks[4].path" in found
    assert "network or bridge" in found["interfaces[0]"] and "interfaces[1]" in found
    assert "MAC address" in found["interfaces[0].mac"]
    assert "interfaces[1].model" in found
    assert "boot[1]" in found and "tags" in found and "metadata.k" in found


def test_a_typo_is_caught_and_required_fields_named():
    found = errors_of({"name": "vm1", "vcpus": 1, "memroy_mb": 64, "disks": [{"sizegb": 10}]})
    assert "unknown field" in found["memroy_mb"]
    assert found["memory_mb"] == "is required"
    assert "size_gb" in found["disks[0].sizegb"]


def test_none_values_count_as_unset():
    spec = dom.validate_spec(dict(BASE, disks=None, tags=None,
                                  interfaces=[{"network": "default", "mac": None}]))
    assert spec["disks"] == [] and spec["tags"] == []
    assert spec["interfaces"] == [{"network": "default", "model": "virtio"}]


@pytest.mark.parametrize("name", ["x" * 248, "\u00e9" * 124, "", "bad\x01name", "tab\tname",
                                  "a/b", ".", ".."])
def test_bad_names_are_rejected(name):
    found = errors_of(dict(BASE, name=name))
    assert "name" in found


def test_a_name_with_xml_characters_is_stored_verbatim_never_injected():
    name = 'a&b<c>"'
    text = dom.build_domain_xml(dom.validate_spec(dict(BASE, name=name, tags=["<t>"],
                                                       metadata={"k&": "</metadata>"})))
    plain = dom.build_domain_xml(dom.validate_spec(dict(BASE, name="n", tags=["t"],
                                                        metadata={"k": "v"})))
    assert "a&amp;b&lt;c&gt;" in text and "<c>" not in text
    tags = [e.tag for e in ET.fromstring(text).iter()]
    assert tags == [e.tag for e in ET.fromstring(plain).iter()]
    parsed = domain.parse_domain_xml(text)
    assert parsed["name"] == name
    assert parsed["tags"] == ["<t>"] and parsed["metadata"] == {"k&": "</metadata>"}
    assert dom.validate_spec(dict(BASE, name="x" * 247))["name"] == "x" * 247


def test_control_characters_anywhere_are_rejected():
    found = errors_of(dict(BASE, tags=["a\x00"], metadata={"k": "v\x1b"}))
    assert set(found) == {"tags[0]", "metadata.k"}


def test_devices_boot_order_and_metadata_round_trip():
    spec = dom.validate_spec(dict(
        BASE, boot=["network", "hd"], tags=["web", "prod"], metadata={"owner": "a", "n": 3},
        disks=[{"path": "/img/a.qcow2"}, {"path": "/img/b.raw", "bus": "sata"},
               {"path": "/iso/x.iso", "device": "cdrom"}, {"size_gb": 5}],
        interfaces=[{"bridge": "br0", "mac": "52:54:00:AA:BB:CC"},
                    {"network": "default", "model": "e1000"}]))
    volume = {"pool": "p", "name": "vol", "path": "/pool/vol.qcow2", "size_gb": 5}
    text = dom.build_domain_xml(spec, uuid="6c3b5e0e-9f53-4a3e-9df5-0f3b5c1f2f10",
                                volumes={3: volume})
    vm = domain.parse_domain_xml(text)
    assert vm["uuid"] == "6c3b5e0e-9f53-4a3e-9df5-0f3b5c1f2f10"
    assert vm["boot"] == ["network", "hd"]
    assert vm["tags"] == ["web", "prod"] and vm["metadata"] == {"owner": "a", "n": "3"}
    assert [(d["target"], d["bus"], d["format"], d["device"], d["path"]) for d in vm["disks"]] == [
        ("vda", "virtio", "qcow2", "disk", "/img/a.qcow2"),
        ("sda", "sata", "raw", "disk", "/img/b.raw"),
        ("sdb", "sata", "raw", "cdrom", "/iso/x.iso"),
        ("vdb", "virtio", "qcow2", "disk", "/pool/vol.qcow2")]
    assert vm["disks"][3]["size_gb"] == 5 and "size_gb" not in vm["disks"][0]
    assert vm["interfaces"] == [{"bridge": "br0", "mac": "52:54:00:aa:bb:cc", "model": "virtio"},
                                {"network": "default", "mac": None, "model": "e1000"}]
    assert domain.managed_volumes(text) == [volume]
    root = ET.fromstring(text)
    assert root.find("metadata/{%s}vm" % domain.NAMESPACE) is not None


def _resized(text, **sizes):
    edit = DomainEdit(text)
    edit.resources(**sizes)
    return domain.parse_domain_xml(edit.finish())


def test_resources_change_only_cpu_and_memory():
    text = dom.build_domain_xml(dom.validate_spec(dict(BASE, tags=["keep"])))
    text = text.replace('<vcpu placement="static">1', '<vcpu placement="static" current="1">1')
    changed = _resized(text, vcpus=3, memory_mb=512)
    assert (changed["vcpus"], changed["memory_mb"], changed["tags"]) == (3, 512, ["keep"])
    only_cpu = _resized(text, vcpus=2)
    assert (only_cpu["vcpus"], only_cpu["memory_mb"]) == (2, 64)


def test_many_disks_get_distinct_targets():
    spec = dom.validate_spec(dict(BASE, disks=[{"path": "/d%d.raw" % i} for i in range(28)]))
    targets = [d["target"] for d in domain.parse_domain_xml(dom.build_domain_xml(spec))["disks"]]
    assert len(set(targets)) == 28 and targets[25:] == ["vdz", "vdaa", "vdab"]


@pytest.mark.parametrize("key, value, fix", [
    ("placement", {"cluster": "C0"}, "disks[].pool"), ("template", "debian12", "disks[].base_image"),
    ("clone", "overlay", "disks[].clone")])
def test_vsphere_only_fields_are_not_supported_with_the_libvirt_fix(key, value, fix):
    from ansible_collections.resilient.virt.plugins.module_utils.errors import NotSupported

    with pytest.raises(NotSupported) as info:
        dom.validate_spec({"name": "x", "vcpus": 1, "memory_mb": 64, key: value})
    assert key in info.value.message and fix in info.value.message
