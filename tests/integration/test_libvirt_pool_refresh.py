"""A pool refresh while another call builds a volume of that pool, on a lab hypervisor.

libvirt refuses to refresh a pool while it has asynchronous jobs (a volume being built or
copied): parallel moves to one host hit this. The test copies a large sparse volume into the
pool in a thread of its own, sees libvirt refuse a plain refresh while the copy runs, and then
sees ``refresh_pool`` wait for the copy to end instead of failing.
"""
import threading
import time
import uuid

import libvirt
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import (
    refresh_pool, volume_xml)

pytestmark = pytest.mark.lab

GIB = 1024 ** 3
SIZE = 4 * GIB  # sparse: a copy reads it for a second or more, and stores nothing


def test_a_refresh_waits_for_the_volume_another_call_builds(lab):
    conn = libvirt.open(lab.hypervisor("hv1").uri)
    pool = conn.storagePoolLookupByName("default")
    name = "refresh-%s" % uuid.uuid4().hex[:8]
    source = pool.createXML(volume_xml(name + "-a.img", SIZE, "raw", allocation=0), 0)
    copies = []
    copier = threading.Thread(target=lambda: copies.append(
        pool.createXMLFrom(volume_xml(name + "-b.img", SIZE, "raw", allocation=0), source, 0)))
    try:
        copier.start()
        refused = None
        while copier.is_alive() and refused is None:
            try:
                pool.refresh(0)
            except libvirt.libvirtError as exc:
                refused = exc
            time.sleep(0.01)
        assert refused is not None and "asynchronous jobs running" in str(refused), (
            "libvirt never refused a refresh while the copy ran: %r" % (refused,))
        refresh_pool(pool)  # waits: the copy still runs when it starts
        copier.join()
        assert len(copies) == 1
    finally:
        copier.join()
        for vol in copies + [source]:
            vol.delete(0)
        conn.close()
