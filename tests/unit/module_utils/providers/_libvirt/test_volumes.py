"""The XML of a new storage volume."""
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import volume_xml


def test_volume_xml_is_a_volume_of_the_given_size_and_format():
    root = ET.fromstring(volume_xml("v&1", 3, "qcow2", unit="GiB", allocation=None))
    assert root.findtext("name") == "v&1"
    assert (root.findtext("capacity"), root.find("capacity").get("unit")) == ("3", "GiB")
    assert root.find("target/format").get("type") == "qcow2"
    assert root.findtext("target/compat") == "1.1"  # qcow2 v3: running backups need it
    assert ET.fromstring(volume_xml("r", 1, "raw", unit="GiB", allocation=None)).find("target/compat") is None
