"""Domains on lab hypervisors, made and removed through libvirt-python directly (not the collection)."""
import xml.etree.ElementTree as ET

import libvirt

from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    qualified)


def remove_domain(uri, name):
    """Stop and undefine domain ``name`` on ``uri`` if it is there; a gone domain is fine."""
    conn = libvirt.open(uri)
    try:
        dom = conn.lookupByName(name)
        if dom.isActive():
            dom.destroy()
        dom.undefine()
    except libvirt.libvirtError as err:
        if err.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
            raise
    finally:
        conn.close()


def started_with_flavor(conn, dom):
    """Define the stopped domain again with the metadata flavor that makes it need a failover
    reservation, and without its user-mode NIC (the collection's specs name a network or a
    bridge), and start it."""
    root = ET.fromstring(dom.XMLDesc(0))
    devices = root.find("devices")
    for nic in devices.findall("interface"):
        devices.remove(nic)
    items = root.find("metadata/" + qualified("vm") + "/" + qualified("metadata"))
    ET.SubElement(items, qualified("item"), key="flavor").text = "small"
    dom = conn.defineXML(ET.tostring(root, encoding="unicode"))
    dom.create()
    return dom
