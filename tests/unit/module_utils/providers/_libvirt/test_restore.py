"""The domain XML a libvirt restore defines (a pure function of the saved definition)."""
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    parse_domain_xml)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.restore import (
    _restored_xml)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import (
    vm_element)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import OWNER_KEY


def saved_definition(metadata):
    domain = ET.Element("domain", type="qemu")
    ET.SubElement(domain, "name").text = "web1"
    ET.SubElement(domain, "uuid").text = "6f1c1f54-8b0e-4b8e-9a55-3c3f2c1d0a01"
    ET.SubElement(domain, "memory", unit="MiB").text = "64"
    ET.SubElement(domain, "vcpu").text = "1"
    os_el = ET.SubElement(domain, "os")
    ET.SubElement(os_el, "type", arch="x86_64").text = "hvm"
    ET.SubElement(domain, "devices")
    ET.SubElement(domain, "metadata").append(vm_element(["web"], metadata, []))
    return ET.tostring(domain, encoding="unicode")


@pytest.mark.parametrize("same_vm, target, kept", [
    (False, "web1-copy", {"team": "a"}),
    (True, "web1", {"team": "a", OWNER_KEY: "web"}),
])
def test_a_restore_to_a_new_vm_drops_the_fleet_owner_marker(same_vm, target, kept):
    """A copy was not created by the fleet that owns the source, so it must not carry its
    marker (a prune of that fleet would delete it); the VM itself keeps it."""
    definition = saved_definition({"team": "a", OWNER_KEY: "web"})
    handle = {"target": target, "same_vm": same_vm, "name": "rec1", "backup": "b1"}
    restored = parse_domain_xml(_restored_xml(definition, handle, {}, None))
    assert restored["name"] == target and restored["tags"] == ["web"]
    assert restored["metadata"] == kept
