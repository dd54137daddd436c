"""What a VM refers to on the host is checked before anything is written, through real
ansible-playbook runs on one lab hypervisor (hv1): networks (they exist and are active),
bridges, storage pools and images in a pool's directory, on a create and on a change of a running
VM; and a change that the running VM refuses after its definition was written is undone, so the
corrected task works.

The domains are defined, started and read with libvirt-python (not through the collection): the
persistent XML, the running domain's interfaces, disks and memory, and the pool's volumes.
"""
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pytest

from playbook_runner import play, run_playbook

HV = "hv1"
VM = "resilient.virt.vm"
SMALL = {"vcpus": 1, "memory_mb": 64}
MAC = "52:54:00:5a:01:01"


@pytest.fixture
def hv1(lab):
    """(connection, token, networks): an active network ``a`` and ``b``, an inactive ``off``,
    and ``missing``, a name no network has; every domain and volume named <token>... and the
    networks are removed afterwards."""
    conn = libvirt.open(lab.hypervisor(HV).uri)
    token = "it-chk-%s" % uuid.uuid4().hex[:6]
    made = []
    names = {}
    for key in ("a", "b", "off"):
        short = "%s%s" % (token[-6:], key)
        network = conn.networkDefineXML("<network><name>%s-%s</name><bridge name='rvc%s'/>"
                                        "</network>" % (token, key, short))
        if key != "off":
            network.create()
        made.append(network)
        names[key] = network.name()
    names["missing"] = token + "-nonet"
    try:
        yield conn, token, names
    finally:
        for dom in conn.listAllDomains(0):
            if dom.name().startswith(token):
                if dom.isActive():
                    dom.destroy()
                dom.undefine()
        for vol in _volumes(conn, token):
            vol.delete(0)
        for network in made:
            if network.isActive():
                network.destroy()
            network.undefine()
        conn.close()


def _volumes(conn, token):
    pool = conn.storagePoolLookupByName("default")
    pool.refresh(0)
    return [v for v in pool.listAllVolumes() if v.name().startswith(token)]


def _running_vm(conn, domain_xml, name, network):
    """A diskless 64 MiB domain with one interface on ``network``, defined and started with
    libvirt-python; with ACPI, which hot-plugging into its PCI bus needs."""
    root = ET.fromstring(domain_xml(name))
    ET.SubElement(ET.SubElement(root, "features"), "acpi")
    nic = ET.SubElement(root.find("devices"), "interface", type="network")
    ET.SubElement(nic, "mac", address=MAC)
    ET.SubElement(nic, "source", network=network)
    ET.SubElement(nic, "model", type="virtio")
    dom = conn.defineXML(ET.tostring(root, encoding="unicode"))
    dom.create()
    return dom


def _persistent(dom):
    return dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)


def _nics(text):
    """(MAC, type, network or bridge) of every interface of the domain XML ``text``."""
    return [(n.find("mac").get("address"), n.get("type"),
             n.find("source").get("network") or n.find("source").get("bridge"))
            for n in ET.fromstring(text).findall("devices/interface")]


def _live(dom):
    """What the running domain has: interfaces, disk sources and current memory (KiB)."""
    root = ET.fromstring(dom.XMLDesc(0))
    return (_nics(dom.XMLDesc(0)),
            [d.find("source").get("file") for d in root.findall("devices/disk")],
            root.findtext("currentMemory"))


def _run(lab, tmp_path, tasks, step):
    hv = lab.hypervisor(HV)
    defaults = {"provider": {"type": "libvirt", "name": hv.name, "uri": hv.uri,
                             "domain_type": "qemu"},
                "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    run = run_playbook(tmp_path, [play([dict(name=title, ignore_errors=True, **{VM: args})
                                        for title, args in tasks], module_defaults=defaults)],
                       name=step)
    assert "Traceback" not in run.output, run.output
    return run


def _paths(result):
    assert result.failed and result["error"]["type"] == "InvalidSpec", result
    return sorted(e["path"] for e in result["error"]["details"]["errors"])


def test_a_change_to_what_the_host_lacks_changes_nothing_and_the_corrected_one_works(
        lab, hv1, domain_xml, tmp_path):
    conn, token, nets = hv1
    name = token + "-vm"
    dom = _running_vm(conn, domain_xml, name, nets["a"])
    before, live = _persistent(dom), _live(dom)

    def change(**spec):
        return dict(spec, name=name, state="running")

    run = _run(lab, tmp_path, [
        ("add on a missing network", change(interfaces=[{"network": nets["a"]},
                                                        {"network": nets["missing"]}])),
        ("move to a missing network", change(interfaces=[{"network": nets["missing"]}])),
        ("the same again", change(interfaces=[{"network": nets["missing"]}])),
        ("inactive network", change(interfaces=[{"network": nets["off"]}])),
        ("missing bridge", change(interfaces=[{"bridge": token[-8:] + "nobr"}])),
        ("missing pool and network", change(disks=[{"size_gb": 1, "pool": token + "-nopool"}],
                                            interfaces=[{"network": nets["missing"]}])),
    ], "refused")
    assert _paths(run.task("add on a missing network")) == ["interfaces[1].network"]
    for title in ("move to a missing network", "the same again", "inactive network"):
        assert _paths(run.task(title)) == ["interfaces[0].network"], title
    assert _paths(run.task("missing bridge")) == ["interfaces[0].bridge"]
    assert _paths(run.task("missing pool and network")) == [
        "disks[0].pool", "interfaces[0].network"]
    missing = run.task("move to a missing network")["msg"]
    assert nets["missing"] in missing and nets["a"] in missing and nets["b"] in missing, missing
    assert "net-start" in run.task("inactive network")["msg"]
    assert _persistent(dom) == before, "a refused change was written to the definition"
    assert _live(dom) == live, "a refused change reached the running domain"
    assert not _volumes(conn, token)

    run = _run(lab, tmp_path, [
        ("corrected", change(interfaces=[{"network": nets["b"]}, {"network": nets["a"]}])),
        ("corrected again", change(interfaces=[{"network": nets["b"]}, {"network": nets["a"]}])),
    ], "corrected")
    corrected = run.task("corrected")
    assert not corrected.failed and corrected["changed"] is True, corrected
    assert corrected["restart_required"] is False, corrected
    persistent = _nics(_persistent(dom))
    assert [(kind, source) for _mac, kind, source in persistent] == [
        ("network", nets["b"]), ("network", nets["a"])]
    assert persistent[0][0] == MAC
    assert _live(dom)[0] == persistent
    assert run.task("corrected again")["changed"] is False


def test_a_create_with_what_the_host_lacks_defines_nothing(lab, hv1, tmp_path):
    conn, token, nets = hv1
    bridge = ET.fromstring(conn.networkLookupByName(nets["a"]).XMLDesc(0)).find(
        "bridge").get("name")  # a bridge of the host, made by libvirt for the network
    names = dict((title, "%s-%d" % (token, index)) for index, title in enumerate((
        "missing network", "only defined", "inactive network", "missing bridge",
        "missing image in a pool", "missing pool and network")))

    def vm(title, state="running", **spec):
        return (title, dict(SMALL, name=names[title], state=state, **spec))

    run = _run(lab, tmp_path, [
        vm("missing network", disks=[{"size_gb": 1}],
           interfaces=[{"network": nets["missing"]}]),
        vm("only defined", state="present",
           interfaces=[{"network": nets["a"]}, {"network": nets["missing"]}]),
        vm("inactive network", interfaces=[{"network": nets["off"]}]),
        vm("missing bridge", interfaces=[{"bridge": token[-8:] + "nobr"}]),
        vm("missing image in a pool",
           disks=[{"path": "/var/lib/libvirt/images/%s-none.qcow2" % token}]),
        vm("missing pool and network", disks=[{"size_gb": 1, "pool": token + "-nopool"}],
           interfaces=[{"network": nets["missing"]}]),
        ("existing bridge", dict(SMALL, name=token + "-br", state="present",
                                 interfaces=[{"bridge": bridge}])),
    ], "create")
    made = run.task("existing bridge")
    assert not made.failed and made["changed"] is True, made
    assert _nics(conn.lookupByName(token + "-br").XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))[0][
        1:] == ("bridge", bridge)
    expected = {"missing network": ["interfaces[0].network"],
                "only defined": ["interfaces[1].network"],
                "inactive network": ["interfaces[0].network"],
                "missing bridge": ["interfaces[0].bridge"],
                "missing image in a pool": ["disks[0].path"],
                "missing pool and network": ["disks[0].pool", "interfaces[0].network"]}
    for title, paths in expected.items():
        assert _paths(run.task(title)) == paths, title
    assert "virsh net-list" in run.task("missing network")["msg"]
    existing = set(d.name() for d in conn.listAllDomains(0))
    assert not existing & set(names.values()), "a refused VM was defined"
    assert not _volumes(conn, token), "a refused VM left a volume"


def test_a_change_the_running_vm_refuses_is_undone(lab, hv1, domain_xml, tmp_path):
    """An image outside every storage pool cannot be checked through libvirt: the running
    domain refuses it after the definition was written, and the whole change is undone."""
    conn, token, nets = hv1
    name = token + "-undo"
    dom = _running_vm(conn, domain_xml, name, nets["a"])
    before, live = _persistent(dom), _live(dom)
    absent = "/%s-nodir/disk.raw" % token
    run = _run(lab, tmp_path, [
        ("refused live", {"name": name, "state": "running", "memory_mb": 48,
                          "disks": [{"path": absent}]}),
    ], "refused")
    refused = run.task("refused live")
    assert refused.failed and absent in refused["msg"], refused
    assert "the change was taken back" in refused["msg"], refused
    assert _persistent(dom) == before, "the definition kept a change the VM refused"
    assert _live(dom) == live

    run = _run(lab, tmp_path, [
        ("corrected", {"name": name, "state": "running", "memory_mb": 48}),
    ], "corrected")
    corrected = run.task("corrected")
    assert corrected["changed"] is True and corrected["vm"]["memory_mb"] == 48, corrected
    root = ET.fromstring(_persistent(dom))
    assert root.findtext("memory") == str(48 * 1024) and not root.findall("devices/disk")
