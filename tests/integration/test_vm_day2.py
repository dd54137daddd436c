"""Day-2 changes to an existing VM through real ansible-playbook runs on one lab hypervisor (hv1):
disks and interfaces hot-added to a running VM, metadata, tags and autostart, a change that waits
for a restart (made once), a disk removed with its volume kept, pause, suspend and resume.

Every outcome is checked against libvirt itself: the running domain's XML, its persistent XML,
its state, its autostart flag and the storage pool's volumes.
"""
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pytest

from playbook_runner import play, run_playbook

HV = "hv1"
VM = "resilient.virt.vm"
RV = "{https://resilient.virt/xmlns/vm/1}"
STOP = {"state": "stopped", "force": True, "shutdown_timeout": "2s"}


class Domain:
    """One domain of the lab hypervisor, read with libvirt-python (not through the collection)."""

    def __init__(self, conn, name):
        self.conn = conn
        self.name = name

    def _dom(self):
        return self.conn.lookupByName(self.name)

    def live(self):
        return ET.fromstring(self._dom().XMLDesc(0))

    def persistent(self):
        return ET.fromstring(self._dom().XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))

    def state(self):
        return self._dom().state()[0]

    def saved(self):
        return bool(self._dom().hasManagedSaveImage(0))

    def autostart(self):
        return bool(self._dom().autostart())


def disks(root):
    return [(d.find("target").get("dev"), d.find("source").get("file"))
            for d in root.findall("devices/disk")]


def nics(root):
    return [(n.find("mac").get("address"), n.find("source").get("network"))
            for n in root.findall("devices/interface")]


def labels(root):
    rv = root.find("metadata/%svm" % RV)
    return (dict((i.get("key"), i.text) for i in rv.findall("%smetadata/%sitem" % (RV, RV))),
            sorted(t.text for t in rv.findall("%stags/%stag" % (RV, RV))))


@pytest.fixture
def hv1(lab):
    """The hypervisor, with an isolated network of the test's own (the lab defines none)."""
    conn = libvirt.open(lab.hypervisor(HV).uri)
    token = uuid.uuid4().hex[:6]
    network = conn.networkDefineXML("<network><name>rv-day2-%s</name><bridge name='rvd%s'/>"
                                    "</network>" % (token, token))
    network.create()
    yield conn, network.name()
    network.destroy()
    network.undefine()
    conn.close()


def _remove(conn, name):
    try:
        dom = conn.lookupByName(name)
    except libvirt.libvirtError:
        return
    if dom.isActive():
        dom.destroy()
    dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)


def _volumes(conn, name):
    return sorted(v.name() for v in conn.storagePoolLookupByName("default").listAllVolumes()
                  if v.name().startswith(name + "-"))


def _run(lab, tmp_path, name, tasks, check=False, step="run"):
    hv = lab.hypervisor(HV)
    defaults = {"provider": {"type": "libvirt", "name": hv.name, "uri": hv.uri,
                             "domain_type": "qemu"},
                "state_store": "sqlite:///%s" % (tmp_path / "state.db"), "name": name}
    run = run_playbook(tmp_path, [play([{"name": title, VM: args, "ignore_errors": True}
                                        for title, args in tasks], module_defaults=defaults)],
                       diff=True, check=check, name=step)
    assert "Traceback" not in run.output, run.output
    return run


def test_day2_changes_on_a_running_vm(lab, hv1, tmp_path):
    conn, network = hv1
    name = "it-day2-%s" % uuid.uuid4().hex[:8]
    vm = Domain(conn, name)
    one_disk = [{"size_gb": 1}]
    two_disks = one_disk + [{"size_gb": 1, "bus": "virtio"}]
    base = {"vcpus": 1, "memory_mb": 64, "disks": one_disk, "interfaces": [{"network": network}],
            "metadata": {"owner": "a", "keep": "k"}, "tags": ["web"]}
    grown = dict(base, disks=two_disks, interfaces=[{"network": network}, {"network": network}],
                 metadata={"owner": "b", "keep": None, "count": 2}, tags=["db", "web"],
                 autostart=True)
    try:
        _run(lab, tmp_path, name, [("create", dict(base, state="running"))], step="create")
        before = ET.tostring(vm.persistent())
        volumes = _volumes(conn, name)
        assert len(volumes) == 1

        check = _run(lab, tmp_path, name, [("grow", dict(grown, state="running"))], check=True,
                     step="check").task("grow")
        assert check["changed"] is True and check["actions"] == ["reconfigure"], check
        assert check["diff"]["after"]["metadata"] == {"owner": "b", "count": "2"}
        assert sorted(check["diff"]["after"]["tags"]) == ["db", "web"]
        assert len(check["diff"]["after"]["disks"]) == 2 and check["diff"]["after"]["autostart"]
        assert ET.tostring(vm.persistent()) == before, "check mode changed the definition"
        assert _volumes(conn, name) == volumes and not vm.autostart()

        run = _run(lab, tmp_path, name, [
            ("grow", dict(grown, state="running")),
            ("grow again", dict(grown, state="running")),
            ("more vcpus", dict(grown, vcpus=2, state="running")),
            ("more vcpus again", dict(grown, vcpus=2, state="running")),
        ], step="grow")
        grow = run.task("grow")
        assert grow["changed"] is True and grow["restart_required"] is False, grow
        live, persistent = vm.live(), vm.persistent()
        # hot-plugged: the running domain has the new disk and interface, as defined
        assert [t for t, _f in disks(live)] == ["vda", "vdb"]
        assert disks(live) == disks(persistent)
        assert nics(live) == nics(persistent) and len(nics(live)) == 2
        assert labels(persistent) == ({"owner": "b", "count": "2"}, ["db", "web"])
        assert labels(live) == labels(persistent)
        assert vm.autostart() is True
        assert len(_volumes(conn, name)) == 2
        again = run.task("grow again")
        assert again["changed"] is False and again["actions"] == [], again

        more = run.task("more vcpus")
        assert more["changed"] is True and more["restart_required"] is True, more
        assert (vm.live().findtext("vcpu"), vm.persistent().findtext("vcpu")) == ("1", "2")
        waiting = run.task("more vcpus again")  # made once: waits for the restart
        assert waiting["changed"] is False and waiting["restart_required"] is True, waiting

        kept = _volumes(conn, name)
        run = _run(lab, tmp_path, name, [
            ("drop disk", dict(grown, vcpus=2, disks=one_disk, state="running")),
            ("resize refused", dict(grown, vcpus=2, disks=[{"size_gb": 2}], state="running")),
            ("stop", dict(STOP)),
            ("start", {"state": "running"}),
        ], step="drop")
        drop = run.task("drop disk")
        assert drop["changed"] is True, drop
        assert [t for t, _f in disks(vm.persistent())] == ["vda"]
        assert _volumes(conn, name) == kept, "a removed disk's volume was deleted"
        removed = [v for v in kept if v not in disks(vm.persistent())[0][1]]
        assert any(removed[-1] in w for w in drop.get("warnings", [])), drop
        refused = run.task("resize refused")
        assert refused.failed and refused["error"]["type"] == "InvalidSpec", refused
        assert "disks[0].size_gb" in refused["msg"]
        started = run.task("start")
        assert started["restart_required"] is False, started
        assert vm.live().findtext("vcpu") == "2" and [t for t, _f in disks(vm.live())] == ["vda"]

        run = _run(lab, tmp_path, name, [
            ("pause", {"state": "paused"}),
            ("pause again", {"state": "paused"}),
            ("suspend", {"state": "suspended"}),
            ("suspend again", {"state": "suspended"}),
            ("resume", {"state": "running"}),
        ], step="power")
        assert run.task("pause")["actions"] == ["pause"]
        assert run.task("pause again")["changed"] is False
        suspended = run.task("suspend")
        assert suspended["actions"] == ["start", "suspend"], suspended
        assert suspended["vm"]["state"] == "suspended"
        assert run.task("suspend again")["changed"] is False
        resumed = run.task("resume")
        assert resumed["actions"] == ["start"] and resumed["vm"]["state"] == "running", resumed
        assert vm.state() == libvirt.VIR_DOMAIN_RUNNING and not vm.saved()
    finally:
        _remove(conn, name)
        for volume in _volumes(conn, name):
            conn.storagePoolLookupByName("default").storageVolLookupByName(volume).delete(0)


def test_suspended_state_is_read_from_libvirt(lab, hv1, tmp_path):
    """A VM suspended outside the collection (virsh managedsave) is reported suspended; stopped
    discards the saved state, and a stopped VM cannot be suspended."""
    conn, _network = hv1
    name = "it-day2s-%s" % uuid.uuid4().hex[:8]
    try:
        _run(lab, tmp_path, name, [("create", {"vcpus": 1, "memory_mb": 64, "state": "running"})],
             step="create")
        conn.lookupByName(name).managedSave(0)
        run = _run(lab, tmp_path, name, [
            ("look", {"state": "suspended"}),
            ("stop", {"state": "stopped"}),
            ("suspend stopped", {"state": "suspended"}),
        ], step="suspended")
        assert run.task("look")["changed"] is False
        stop = run.task("stop")
        assert stop["actions"] == ["power_off"] and stop["vm"]["state"] == "stopped", stop
        assert not conn.lookupByName(name).hasManagedSaveImage(0)
        refused = run.task("suspend stopped")
        assert refused.failed and "state" in refused["msg"], refused
    finally:
        _remove(conn, name)


def test_a_vm_found_by_uuid(lab, hv1, tmp_path):
    """uuid addresses an existing VM (the oracle: libvirt's own UUID of the domain); a wrong name
    with it, or a UUID of no VM, fail naming the field and change nothing."""
    conn, _network = hv1
    name = "it-day2u-%s" % uuid.uuid4().hex[:8]
    other = str(uuid.uuid4())
    try:
        _run(lab, tmp_path, name, [("create", {"vcpus": 1, "memory_mb": 64})], step="create")
        vm_uuid = conn.lookupByName(name).UUIDString()
        tasks = [("grow by uuid", {"uuid": vm_uuid, "name": None, "memory_mb": 96}),
                 ("wrong name", {"uuid": vm_uuid, "name": name + "-x", "memory_mb": 128}),
                 ("unknown uuid", {"uuid": other, "name": None, "state": "running"}),
                 ("absent unknown", {"uuid": other, "name": None, "state": "absent"}),
                 ("delete by uuid", {"uuid": vm_uuid, "name": None, "state": "absent"})]
        run = _run(lab, tmp_path, name, tasks, step="uuid")
        grown = run.task("grow by uuid")
        assert grown["changed"] is True and grown["vm"]["name"] == name, grown
        assert grown["vm"]["uuid"] == vm_uuid and grown["vm"]["memory_mb"] == 96
        wrong = run.task("wrong name")
        assert wrong.failed and wrong["error"]["type"] == "InvalidSpec" and name in wrong["msg"]
        unknown = run.task("unknown uuid")
        assert unknown.failed and "uuid" in unknown["msg"] and other in unknown["msg"], unknown
        assert run.task("absent unknown")["changed"] is False
        deleted = run.task("delete by uuid")
        assert deleted["changed"] is True and deleted["vm"] is None, deleted
        assert name not in [d.name() for d in conn.listAllDomains(0)]
    finally:
        _remove(conn, name)
