"""Fault injector (a test plugin): a VM is deleted while the inventory reads the VMs.

Loaded through ``RESILIENT_VIRT_PLUGINS=vanish_plugin`` (with this directory on
``PYTHONPATH``). When :data:`VANISH_ENV` is ``URI NAME``, loading it sets a one-shot trap on
libvirt's ``virDomain.XMLDesc``: just before the definition of domain NAME is read, NAME is
destroyed and undefined on URI through a connection of its own. The read then meets a domain
that is really gone, as when someone deletes a VM during a scan. The trap is set when the plugin
loads, before any provider is asked, because providers are listed in threads of their own.
"""
import os

VANISH_ENV = "RESILIENT_VIRT_TEST_VANISH"


def _set_trap(uri, name):
    import libvirt
    from lab_domains import remove_domain

    read = libvirt.virDomain.XMLDesc
    fired = []

    def xml_desc(dom, flags=0):
        if not fired and dom.name() == name:
            fired.append(True)
            remove_domain(uri, name)
        return read(dom, flags)

    libvirt.virDomain.XMLDesc = xml_desc


if os.environ.get(VANISH_ENV):
    _set_trap(*os.environ[VANISH_ENV].split(" ", 1))
