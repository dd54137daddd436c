"""A production libvirt domain, through real ansible-playbook runs on the lab hypervisor hv1:
the domain type and CPU mode chosen from the hypervisor's capabilities, the console, the guest
agent's channel, graphics, and the XML escape hatch, validated before anything is created.

What the hypervisor offers and what was defined are read with libvirt-python and parsed here,
independently of the collection's own code.
"""
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pytest

from playbook_runner import play, run_playbook

HV = "hv1"
VM = "resilient.virt.vm"
SMALL = {"vcpus": 1, "memory_mb": 64}
RNG = "<rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>"
CLOCK = "<clock offset='localtime'/>"


def _unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


@pytest.fixture
def conn(lab):
    connection = libvirt.open(lab.hypervisor(HV).uri)
    yield connection
    connection.close()


def _offered(conn):
    """(host arch, domain types offered for its hvm guests), read from virConnectGetCapabilities."""
    root = ET.fromstring(conn.getCapabilities())
    arch = root.findtext("host/cpu/arch")
    types = [d.get("type") for guest in root.findall("guest")
             if guest.findtext("os_type") == "hvm" and guest.find("arch").get("name") == arch
             for d in guest.find("arch").findall("domain")]
    return arch, types


def _supported_cpu_modes(conn, arch, domain_type):
    root = ET.fromstring(conn.getDomainCapabilities(None, arch, None, domain_type, 0))
    return [m.get("name") for m in root.findall("cpu/mode") if m.get("supported") == "yes"]


def _domain(conn, name):
    return ET.fromstring(conn.lookupByName(name).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))


def _remove(conn, names):
    for name in names:
        try:
            dom = conn.lookupByName(name)
        except libvirt.libvirtError:
            continue
        if dom.isActive():
            dom.destroy()
        dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM)
        for vol in conn.storagePoolLookupByName("default").listAllVolumes():
            if vol.name().startswith(name):
                vol.delete()


def _run(lab, tmp_path, tasks, provider):
    defaults = {"state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    hv = lab.hypervisor(HV)
    provider = dict({"type": "libvirt", "name": hv.name, "uri": hv.uri}, **provider)
    run = run_playbook(tmp_path, [play(tasks, module_defaults=dict(defaults, provider=provider))])
    assert "Traceback" not in run.output
    return run


def test_the_domain_type_and_cpu_mode_come_from_the_hypervisor(lab, conn, tmp_path):
    """No domain_type given: kvm where the capabilities offer it, else qemu with a warning;
    host-model where the domain capabilities support it. The VM is only defined: whether this
    machine's KVM can run it is not what is tested."""
    name = _unique("dom-auto")
    try:
        run = _run(lab, tmp_path, [{"name": "auto", VM: dict(SMALL, name=name)}], {})
        assert run.rc == 0, run.describe()
        arch, offered = _offered(conn)
        expected = "kvm" if "kvm" in offered else "qemu"
        root = _domain(conn, name)
        assert root.get("type") == expected
        result = run.task("auto")
        assert result["vm"]["domain_type"] == expected and result["ready"] is True
        warned = [w for w in result.get("warnings", []) if "offers no KVM" in w]
        assert bool(warned) == (expected == "qemu"), result.get("warnings")
        cpu = root.find("cpu")
        if "host-model" in _supported_cpu_modes(conn, arch, expected):
            assert cpu is not None and cpu.get("mode") == "host-model"
        else:
            assert cpu is None or cpu.get("mode") is None
        devices = root.find("devices")
        assert devices.find("serial[@type='pty']") is not None
        assert devices.find("console[@type='pty']/target").get("type") == "serial"
        agent = devices.find("channel[@type='unix']/target")
        assert (agent.get("type"), agent.get("name")) == ("virtio", "org.qemu.guest_agent.0")
        assert devices.find("graphics") is None
    finally:
        _remove(conn, [name])


def test_chosen_settings_and_the_xml_escape_hatch_reach_a_running_domain(lab, conn, tmp_path):
    name = _unique("dom-set")
    spec = dict(SMALL, name=name, state="running", libvirt={
        "cpu_mode": "maximum", "console": False, "guest_agent": False, "graphics": "vnc",
        "xml": [RNG, CLOCK]})
    try:
        run = _run(lab, tmp_path, [{"name": "create", VM: spec}, {"name": "again", VM: spec}],
                   {"domain_type": "qemu"})
        assert run.rc == 0, run.describe()
        created = run.task("create")
        assert created["changed"] is True and created["vm"]["state"] == "running"
        assert not [w for w in created.get("warnings", []) if "KVM" in w], "qemu was chosen"
        assert run.task("again")["changed"] is False
        assert conn.lookupByName(name).isActive()
        root = _domain(conn, name)
        assert root.get("type") == "qemu" and root.find("cpu").get("mode") == "maximum"
        devices = root.find("devices")
        assert devices.find("rng[@model='virtio']/backend").text == "/dev/urandom"
        assert root.find("clock").get("offset") == "localtime"
        assert len(root.findall("clock")) == 1
        graphics = devices.find("graphics[@type='vnc']")
        assert graphics is not None and graphics.find("listen").get("address") == "127.0.0.1"
        assert devices.find("channel") is None and devices.find("console") is None
    finally:
        _remove(conn, [name])


def test_wrong_settings_name_their_field_and_create_nothing(lab, conn, tmp_path):
    names = dict((title, _unique("dom-bad")) for title in (
        "malformed", "spec element", "schema", "cpu mode", "vsphere"))
    pool = conn.storagePoolLookupByName("default")
    volumes = sorted(v.name() for v in pool.listAllVolumes())
    arch, offered = _offered(conn)
    unsupported = [mode for mode in ("host-passthrough", "host-model", "maximum")
                   if mode not in _supported_cpu_modes(conn, arch, "qemu")]
    tasks = [
        {"name": "malformed", VM: dict(SMALL, name=names["malformed"],
                                       libvirt={"xml": [RNG, "<rng model='virtio'>"]})},
        {"name": "spec element", VM: dict(SMALL, name=names["spec element"],
                                          libvirt={"xml": ["<memory unit='GiB'>4</memory>"]})},
        {"name": "schema", VM: dict(SMALL, name=names["schema"], disks=[{"size_gb": 1}],
                                    libvirt={"xml": ["<rng model='no-such-model'/>"]})},
    ]
    if unsupported:
        tasks.append({"name": "cpu mode", VM: dict(SMALL, name=names["cpu mode"],
                                                   libvirt={"cpu_mode": unsupported[0]})})
    tasks = [dict(task, ignore_errors=True) for task in tasks]
    try:
        run = _run(lab, tmp_path, tasks, {"domain_type": "qemu"})
        expected = {"malformed": "libvirt.xml[1]", "spec element": "libvirt.xml[0]",
                    "schema": "libvirt.xml"}
        if unsupported:
            expected["cpu mode"] = "libvirt.cpu_mode"
        for title, path in expected.items():
            result = run.task(title)
            assert result.failed and result["error"]["type"] == "InvalidSpec", result
            assert [e["path"] for e in result["error"]["details"]["errors"]] == [path], result
        assert "is set by the VM spec itself" in run.task("spec element")["msg"]
        assert "libvirt's schema" in run.task("schema")["msg"]
        if unsupported:
            assert unsupported[0] in run.task("cpu mode")["msg"]
        existing = set(d.name() for d in conn.listAllDomains(0))
        assert not existing & set(names.values()), "a refused VM was defined"
        assert sorted(v.name() for v in pool.listAllVolumes()) == volumes, "a volume was left"
    finally:
        _remove(conn, list(names.values()))


def test_another_provider_refuses_the_libvirt_settings(vsphere, tmp_path):
    name = _unique("dom-vc")
    run = run_playbook(tmp_path, [play([{"name": "vsphere", "ignore_errors": True, VM: dict(
        SMALL, name=name, provider=vsphere, libvirt={"graphics": "vnc"},
        state_store="sqlite:///%s" % (tmp_path / "state.db"))}])])
    result = run.task("vsphere")
    assert result.failed and result["error"]["type"] == "InvalidSpec", result
    assert [e["path"] for e in result["error"]["details"]["errors"]] == ["libvirt"], result
