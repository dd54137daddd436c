"""Fault injector (a test plugin): a VM is deleted while the inventory reads the VMs.

Loaded through ``RESILIENT_VIRT_PLUGINS=vanish_plugin`` (with this directory on
``PYTHONPATH``). When :data:`VANISH_ENV` is ``URI NAME``, the first VM listing arms a
one-shot trap on libvirt's ``virDomain.XMLDesc``: just before the definition of domain NAME is
read, NAME is destroyed and undefined on URI through a connection of its own. The read then
meets a domain that is really gone, as when someone deletes a VM during a scan.
"""
import os

import pluggy

VANISH_ENV = "RESILIENT_VIRT_TEST_VANISH"
hookimpl = pluggy.HookimplMarker("resilient_virt")
_armed = []


@hookimpl
def resilient_virt_before_call(operation):
    target = os.environ.get(VANISH_ENV)
    if operation not in ("list_vms", "list_vm_summaries") or not target or _armed:
        return
    _armed.append(True)
    import libvirt
    from lab_domains import remove_domain

    uri, name = target.split(" ", 1)
    read = libvirt.virDomain.XMLDesc

    def xml_desc(dom, flags=0):
        if dom.name() == name and _armed[-1]:
            _armed.append(False)
            remove_domain(uri, name)
        return read(dom, flags)

    libvirt.virDomain.XMLDesc = xml_desc
