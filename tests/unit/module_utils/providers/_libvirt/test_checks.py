"""What a create or a change refers to on the host is checked before anything is written
(``checks.py``), against libvirt's in-process test:///default driver: its network "default"
(active), its host interface "eth1" and its storage pool "default-pool" (directory /default-pool).
"""
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
    LibvirtProvider)

from provider_testing import TEST_POOL


@pytest.fixture
def provider(libvirt_config):
    prov = LibvirtProvider(libvirt_config)
    conn = prov._connection()
    network = conn.networkDefineXML("<network><name>unit-off</name><bridge name='unitoff'/>"
                                    "</network>")  # defined, never started
    yield prov
    network.undefine()
    for name in ("chk", "chk-stopped"):
        try:
            dom = conn.lookupByName(name)
        except Exception:  # noqa: BLE001 - not made by this test
            continue
        if dom.isActive():
            dom.destroy()
        dom.undefine()
    prov.close()


def _paths(info):
    return [e["path"] for e in info.value.details["errors"]]


def _volumes(provider):
    return sorted(provider._connection().storagePoolLookupByName(TEST_POOL).listVolumes())


def test_a_create_refers_only_to_what_the_host_has(provider):
    conn = provider._connection()
    before = _volumes(provider)
    spec = {"name": "chk", "vcpus": 1, "memory_mb": 64,
            "disks": [{"size_gb": 1}, {"path": "/default-pool/none.qcow2"},
                      {"path": "/elsewhere/unchecked.qcow2"}],
            "interfaces": [{"network": "default"}, {"network": "nonet"}, {"network": "unit-off"},
                           {"bridge": "eth1"}, {"bridge": "nobr0"}]}
    with pytest.raises(InvalidSpec) as info:
        provider.create(spec)
    assert _paths(info) == ["disks[1].path", "interfaces[1].network", "interfaces[2].network",
                            "interfaces[4].bridge"]
    message = str(info.value)
    assert message.startswith("the VM was not created: ")
    assert "default, unit-off (inactive)" in message and "virsh net-start unit-off" in message
    assert "virsh vol-list --details default-pool" in message
    assert "chk" not in [d.name() for d in conn.listAllDomains(0)]
    assert _volumes(provider) == before


def test_a_change_refers_only_to_what_the_host_has(provider):
    provider.create({"name": "chk", "vcpus": 1, "memory_mb": 64,
                     "interfaces": [{"network": "default"}]})
    provider.power("chk", "on")
    dom = provider._connection().lookupByName("chk")
    before, live = dom.XMLDesc(2), dom.XMLDesc(0)  # 2: VIR_DOMAIN_XML_INACTIVE
    volumes = _volumes(provider)
    with pytest.raises(InvalidSpec) as info:
        provider.reconfigure("chk", memory_mb=128, disks=[{"size_gb": 1, "pool": "nopool"}],
                             interfaces=[{"network": "nonet"}])
    assert _paths(info) == ["disks[0].pool", "interfaces[0].network"]
    assert str(info.value).startswith("VM 'chk' was not changed: ")
    assert (dom.XMLDesc(2), dom.XMLDesc(0)) == (before, live) and _volumes(provider) == volumes


def test_a_stopped_vm_changes_to_an_existing_network(provider):
    provider.create({"name": "chk-stopped", "vcpus": 1, "memory_mb": 64,
                     "interfaces": [{"network": "default"}]})
    with pytest.raises(InvalidSpec) as info:
        provider.reconfigure("chk-stopped", interfaces=[{"network": "default"},
                                                        {"bridge": "nobr0"}])
    assert _paths(info) == ["interfaces[1].bridge"]
    vm = provider.reconfigure("chk-stopped", interfaces=[{"network": "default"},
                                                         {"bridge": "eth1"}])
    assert [(n.get("network"), n.get("bridge")) for n in vm["interfaces"]] == [
        ("default", None), (None, "eth1")]
    root = ET.fromstring(provider._connection().lookupByName("chk-stopped").XMLDesc(2))
    assert [n.get("type") for n in root.findall("devices/interface")] == ["network", "bridge"]
