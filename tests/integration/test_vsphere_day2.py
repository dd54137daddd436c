"""Day-2 on the vSphere simulator: changes of existing VMs (metadata, tags, disks, NICs,
suspend) and guest information from VMware Tools.

The oracles are of the test's own: pyVmomi reads (simulator_session.Simulator: devices, custom
attributes, guest information, tasks, the datastore browser) and raw REST reads of the tags
(rest_session.Rest).
"""
import threading
import time
import uuid

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotSupported, VirtError, classify)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import (
    VSphereProvider)

from playbook_runner import play, run_playbook
from rest_session import Rest
from own_simulator import BIN_DIR, vcsim
from simulator_session import Simulator
from soap_only import soap_only_simulator

DATASTORE = "LocalDS_0"
TOOLS_VM, BARE_VM = "DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1"  # the first VM of a cluster runs Tools


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("vcsim"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR)
    yield settings
    vcsim.stop(run_dir)


@pytest.fixture(scope="module")
def oracle(sim):
    session = Simulator(sim)
    yield session
    session.close()


@pytest.fixture(scope="module")
def rest(sim):
    return Rest(sim)


@pytest.fixture
def provider(sim):
    p = VSphereProvider(dict(sim, timeout="10s", task_timeout="30s"))
    yield p
    p.close()


@pytest.fixture
def vm(provider, oracle):
    """A new stopped VM with one 1 GB disk and one NIC on "VM Network": its name."""
    name = "day2-%s" % uuid.uuid4().hex[:6]
    provider.create({"name": name, "vcpus": 1, "memory_mb": 64, "disks": [{"size_gb": 1}],
                     "interfaces": [{"network": "VM Network"}]})
    yield name
    oracle.remove(name)


def fails(fn, *args, **kwargs):
    """The classified error raised by ``fn`` (fails the test when it succeeds)."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - classified below, as GuardedProvider does
        classifier = getattr(getattr(fn, "__self__", None), "classify_error", None)
        return classify(exc, (classifier,) if classifier else ())
    pytest.fail("%s succeeded" % getattr(fn, "__name__", fn))


def attributes(oracle, ref):
    """The VM's custom attributes with a value, by name (the last value set counts)."""
    names = dict((f.key, f.name) for f in oracle.content.customFieldsManager.field)
    values = {}
    for item in ref.customValue:
        values[names[item.key]] = item.value
    return dict((k, v) for k, v in values.items() if v)


def devices(ref, kind):
    from pyVmomi import vim

    return [d for d in ref.config.hardware.device
            if isinstance(d, getattr(vim.vm.device, kind))]


def portgroup_key(oracle, name):
    from pyVmomi import vim

    view = oracle.content.viewManager.CreateContainerView(
        oracle.content.rootFolder, [vim.dvs.DistributedVirtualPortgroup], True)
    try:
        return next(pg.key for pg in view.view if pg.name == name)
    finally:
        view.Destroy()


def datastore_files(oracle, folder):
    """Names of the .vmdk files in ``folder`` of the datastore, by its browser."""
    from pyVmomi import vim

    view = oracle.content.viewManager.CreateContainerView(
        oracle.content.rootFolder, [vim.Datastore], True)
    try:
        store = next(ds for ds in view.view if ds.name == DATASTORE)
    finally:
        view.Destroy()
    task = store.browser.SearchDatastore_Task(
        datastorePath="[%s] %s" % (DATASTORE, folder),
        searchSpec=vim.host.DatastoreBrowser.SearchSpec(matchPattern=["*.vmdk"]))
    end = time.monotonic() + 10
    while str(task.info.state) not in ("success", "error"):
        assert time.monotonic() < end
        time.sleep(0.05)
    assert str(task.info.state) == "success", task.info.error
    return sorted(f.path for f in task.info.result.file)


def test_vsphere_declares_what_it_reconfigures():
    assert VSphereProvider.reconfigurable == frozenset(
        ("vcpus", "memory_mb", "metadata", "tags", "disks", "interfaces", "placement"))


def test_metadata_set_changed_and_removed(provider, oracle, vm):
    ref = oracle.vm(vm)
    got = provider.reconfigure(vm, metadata={"owner": "team-a", "tier": "1"})
    assert attributes(oracle, ref) == {"owner": "team-a", "tier": "1"}
    assert got["metadata"] == {"owner": "team-a", "tier": "1"}
    got = provider.reconfigure(vm, metadata={"owner": "team-b", "tier": None, "gone": None})
    assert attributes(oracle, ref) == {"owner": "team-b"}
    assert got["metadata"] == {"owner": "team-b"} == provider.describe(vm)["metadata"]


def test_a_new_attribute_set_on_two_vms_at_once(sim, provider, oracle, vm):
    """Two tasks that both find a custom attribute missing both define it: the one vSphere answers
    DuplicateName uses the other's definition instead of failing."""
    other = "day2-%s" % uuid.uuid4().hex[:6]
    provider.create({"name": other, "vcpus": 1, "memory_mb": 64})
    name = "race-%s" % uuid.uuid4().hex[:6]
    providers = [VSphereProvider(dict(sim, timeout="10s", task_timeout="30s")) for dummy in range(2)]
    start = threading.Barrier(2)
    outcomes = {}

    def set_it(p, target):
        start.wait()
        try:
            outcomes[target] = p.reconfigure(target, metadata={name: target})["metadata"]
        except VirtError as err:
            outcomes[target] = err

    threads = [threading.Thread(target=set_it, args=(p, target)) for p, target in zip(providers, (vm, other))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for p in providers:
            p.close()
        provider.delete(other)
    assert outcomes == {vm: {name: vm}, other: {name: other}}, outcomes
    defined = [f for f in oracle.content.customFieldsManager.field if f.name == name]
    assert len(defined) == 1, defined


def test_tags_set_and_changed(provider, oracle, rest, vm):
    moid = oracle.vm(vm)._moId
    got = provider.reconfigure(vm, tags=["web", "prod"])
    assert rest.tags_on(moid) == {"resilient.virt": ["prod", "web"]}
    assert got["tags"] == ["prod", "web"]
    got = provider.reconfigure(vm, tags=["prod", "db"])
    assert rest.tags_on(moid) == {"resilient.virt": ["db", "prod"]}
    assert provider.describe(vm)["tags"] == ["db", "prod"]
    listed = provider.list_vms({"tags": ["db"]})
    assert [v["name"] for v in listed] == [vm] and listed[0]["tags"] == ["db", "prod"]
    assert provider.list_vm_summaries({"name": vm})[0]["tags"] == ["db", "prod"]
    provider.reconfigure(vm, tags=[])
    assert rest.tags_on(moid) == {}


def test_create_with_tags(provider, oracle, rest):
    name = "day2-tags-%s" % uuid.uuid4().hex[:6]
    try:
        got = provider.create({"name": name, "vcpus": 1, "memory_mb": 64, "tags": ["b", "a"]})
        assert got["tags"] == ["a", "b"]
        assert rest.tags_on(oracle.vm(name)._moId) == {"resilient.virt": ["a", "b"]}
    finally:
        oracle.remove(name)


def test_disk_and_nic_added_then_removed_keeping_the_disk_file(provider, oracle, vm):
    ref = oracle.vm(vm)
    disk = {"size_gb": 1}
    nic = {"network": "VM Network"}
    got = provider.reconfigure(vm, disks=[disk, {"size_gb": 2, "thin": True}],
                               interfaces=[nic, {"network": "DC0_DVPG0", "model": "e1000"}])
    disks, nics = devices(ref, "VirtualDisk"), devices(ref, "VirtualEthernetCard")
    assert [d.capacityInKB for d in disks] == [1 << 20, 2 << 20]
    assert [type(n).__name__ for n in nics] == ["vim.vm.device.VirtualVmxnet3",
                                                "vim.vm.device.VirtualE1000"]
    assert nics[1].backing.port.portgroupKey == portgroup_key(oracle, "DC0_DVPG0")
    assert [d["size_gb"] for d in got["disks"]] == [1.0, 2.0]
    added = disks[1].backing.fileName
    assert added.rsplit("/", 1)[1] in datastore_files(oracle, vm)
    warnings = list(provider.warnings)

    got = provider.reconfigure(vm, disks=[disk], interfaces=[nic])
    assert [d.capacityInKB for d in devices(ref, "VirtualDisk")] == [1 << 20]
    assert [n.key for n in devices(ref, "VirtualEthernetCard")] == [nics[0].key]
    assert len(got["disks"]) == 1 and len(got["interfaces"]) == 1
    assert added.rsplit("/", 1)[1] in datastore_files(oracle, vm)  # the file is kept
    new = provider.warnings[len(warnings):]
    assert len(new) == 1 and added in new[0] and "kept" in new[0] and vm in new[0]


def test_a_disk_is_added_to_a_vm_without_a_controller(provider, oracle):
    name = "day2-bare-%s" % uuid.uuid4().hex[:6]
    try:
        provider.create({"name": name, "vcpus": 1, "memory_mb": 64})
        assert not devices(oracle.vm(name), "VirtualSCSIController")
        provider.reconfigure(name, disks=[{"size_gb": 1}])
        ref = oracle.vm(name)
        (controller,) = devices(ref, "VirtualSCSIController")
        assert [d.controllerKey for d in devices(ref, "VirtualDisk")] == [controller.key]
    finally:
        oracle.remove(name)


def test_nic_network_changed_in_place(provider, oracle, vm):
    ref = oracle.vm(vm)
    (before,) = devices(ref, "VirtualEthernetCard")
    got = provider.reconfigure(vm, interfaces=[{"network": "DC0_DVPG0", "model": "vmxnet3",
                                                "mac": before.macAddress.upper()}])
    (after,) = devices(ref, "VirtualEthernetCard")
    assert (after.key, after.macAddress) == (before.key, before.macAddress)
    assert after.backing.port.portgroupKey == portgroup_key(oracle, "DC0_DVPG0")
    assert got["interfaces"][0]["network"] == "DC0_DVPG0"


def test_a_second_reconfigure_with_the_same_values_changes_nothing(provider, oracle, rest, vm):
    ref = oracle.vm(vm)
    wanted = dict(vcpus=2, memory_mb=128, metadata={"owner": "a", "team": "x"}, tags=["web"],
                  disks=[{"size_gb": 1}, {"size_gb": 1}],
                  interfaces=[{"network": "DC0_DVPG0"}])
    first = provider.reconfigure(vm, **wanted)
    tasks, tags = oracle.tasks_on(ref), rest.tags_on(ref._moId)
    fields = len(ref.customValue)  # the simulator keeps one entry per attribute ever set
    second = provider.reconfigure(vm, **wanted)
    assert oracle.tasks_on(ref) == tasks  # no reconfiguration task ran
    assert rest.tags_on(ref._moId) == tags == {"resilient.virt": ["web"]}
    assert len(ref.customValue) == fields  # no attribute set again
    assert second == dict(first, changed=False)
    assert (oracle.state(ref)["vcpus"], oracle.state(ref)["memory_mb"]) == (2, 128)
    # only what differs is applied: one attribute, no hardware task
    third = provider.reconfigure(vm, **dict(wanted, metadata={"owner": "b", "team": "x"}))
    assert oracle.tasks_on(ref) == tasks and len(ref.customValue) == fields + 1
    assert third["metadata"] == {"owner": "b", "team": "x"} == attributes(oracle, ref)


def test_bad_changes_are_refused_by_field_and_change_nothing(provider, oracle, vm):
    ref = oracle.vm(vm)
    tasks = oracle.tasks_on(ref)
    err = fails(provider.reconfigure, vm, disks=[{"size_gb": 5}])
    assert isinstance(err, InvalidSpec)
    assert [e["path"] for e in err.details["errors"]] == ["disks[0].size_gb"]
    assert "list the new disk after the existing ones" in err.message
    err = fails(provider.reconfigure, vm, interfaces=[{"network": "VM Network", "model": "e1000",
                                                       "mac": "00:50:56:00:00:99"}])
    assert sorted(e["path"] for e in err.details["errors"]) == [
        "interfaces[0].mac", "interfaces[0].model"]
    err = fails(provider.reconfigure, vm, vcpus=0, metadata={"owner": ""},
                disks=[{"size_gb": 1, "bus": "ide"}], tags=["", "x"])
    assert isinstance(err, InvalidSpec)
    assert sorted(e["path"] for e in err.details["errors"]) == [
        "disks[0].bus", "metadata.owner", "tags[0]", "vcpus"]
    assert "null to remove" in err.message
    err = fails(provider.reconfigure, vm,
                interfaces=[{"network": "VM Network"}, {"network": "no-such-net"}])
    assert isinstance(err, InvalidSpec) and "interfaces[1].network" in err.message
    err = fails(provider.reconfigure, vm, autostart=True)
    assert isinstance(err, NotSupported) and "autostart" in err.message
    assert oracle.tasks_on(ref) == tasks
    assert len(devices(ref, "VirtualEthernetCard")) == 1 and attributes(oracle, ref) == {}


def test_a_running_vm_without_hot_plug_refuses_vcpus_and_memory_and_changes_nothing(
        provider, oracle, rest, vm):
    ref = oracle.vm(vm)
    provider.power(vm, "on")
    tasks = oracle.tasks_on(ref)
    err = fails(provider.reconfigure, vm, vcpus=2, memory_mb=32, metadata={"x": "1"},
                tags=["t"])
    assert isinstance(err, Conflict) and "power it off" in err.message
    assert "vcpus" in err.message and "memory_mb" in err.message
    assert oracle.tasks_on(ref) == tasks and oracle.state(ref)["vcpus"] == 1
    assert attributes(oracle, ref) == {} and rest.tags_on(ref._moId) == {}
    got = provider.reconfigure(vm, disks=[{"size_gb": 1}, {"size_gb": 1}])  # devices: live
    assert got["state"] == "running" and len(devices(ref, "VirtualDisk")) == 2


def test_a_running_vm_with_hot_add_takes_more_vcpus_and_memory_live(provider, oracle, vm):
    from pyVmomi import vim

    ref = oracle.vm(vm)
    task = ref.ReconfigVM_Task(spec=vim.vm.ConfigSpec(cpuHotAddEnabled=True,
                                                      memoryHotAddEnabled=True))
    while str(task.info.state) not in ("success", "error"):
        time.sleep(0.05)
    provider.power(vm, "on")
    got = provider.reconfigure(vm, vcpus=2, memory_mb=128)
    assert got["state"] == "running" and oracle.state(ref) == {
        "power": "poweredOn", "vcpus": 2, "memory_mb": 128}
    err = fails(provider.reconfigure, vm, vcpus=1)  # CPU hot remove is still off
    assert isinstance(err, Conflict) and "hot remove" in err.message
    err = fails(provider.reconfigure, vm, memory_mb=64)
    assert isinstance(err, Conflict) and "cannot shrink" in err.message
    assert oracle.state(ref) == {"power": "poweredOn", "vcpus": 2, "memory_mb": 128}


def test_suspend_then_power_on(provider, oracle, vm):
    ref = oracle.vm(vm)
    err = fails(provider.power, vm, "suspend")
    assert isinstance(err, Conflict) and "power it on first" in err.message
    provider.power(vm, "on")
    got = provider.power(vm, "suspend")
    assert oracle.state(ref)["power"] == "suspended"
    assert got["state"] == "suspended" and got["changed"] is True
    assert [v["state"] for v in provider.list_vms({"name": vm})] == ["suspended"]
    tasks = oracle.tasks_on(ref)
    again = provider.power(vm, "suspend")
    assert again["changed"] is False and oracle.tasks_on(ref) == tasks
    err = fails(provider.reconfigure, vm, vcpus=2)
    assert isinstance(err, Conflict) and "suspended" in err.message
    assert provider.power(vm, "on")["state"] == "running"
    assert oracle.state(ref)["power"] == "poweredOn"


def test_pause_is_not_supported(provider, oracle, vm):
    ref = oracle.vm(vm)
    provider.power(vm, "on")
    tasks = oracle.tasks_on(ref)
    err = fails(provider.power, vm, "pause")
    assert isinstance(err, NotSupported) and not err.retryable
    assert "cannot pause" in err.message and "suspend" in err.message
    assert oracle.tasks_on(ref) == tasks and oracle.state(ref)["power"] == "poweredOn"


def test_through_the_guarded_provider(sim, oracle, guarded_provider, vm):
    guarded = guarded_provider(dict(sim, timeout="10s"))
    err = fails(guarded.reconfigure, vm, autostart=True)
    assert isinstance(err, NotSupported) and "autostart" in err.message
    got = guarded.reconfigure(vm, tags=["g"], metadata={"k": "v"})
    assert (got["tags"], got["metadata"]) == (["g"], {"k": "v"})
    assert attributes(oracle, oracle.vm(vm)) == {"k": "v"}


@pytest.fixture
def soap_only(tmp_path):
    with soap_only_simulator(tmp_path) as settings:
        yield settings


def test_an_endpoint_without_the_rest_api_has_no_tags(soap_only):
    p = VSphereProvider(dict(soap_only, timeout="5s"))
    oracle = Simulator(soap_only)
    name = "day2-esx-%s" % uuid.uuid4().hex[:6]
    try:
        existing = p.list_vms()[0]
        assert existing["tags"] == [] and p.describe(existing["name"])["tags"] == []
        assert p.reconfigure(existing["name"], tags=[])["tags"] == []  # nothing to change
        for call in (lambda: p.reconfigure(existing["name"], tags=["web"]),
                     lambda: p.create({"name": name, "vcpus": 1, "memory_mb": 64,
                                       "tags": ["web"]})):
            err = fails(call)
            assert isinstance(err, NotSupported) and "tags need vCenter" in err.message
            assert "provider.host" in err.message
        assert oracle.vm(name) is None  # refused before anything was created
        assert isinstance(err, VirtError)
    finally:
        oracle.remove(name)
        oracle.close()
        p.close()


# -- guest information (VMware Tools) -------------------------------------------------------------
def reported(oracle, name):
    """What VMware Tools report of VM ``name``, read by pyVmomi: (guest dict, addresses by MAC,
    primary address)."""
    info = oracle.vm(name).guest
    state = info.toolsRunningStatus
    guest = {"agent": state == "guestToolsRunning", "agent_state": state,
             "os": info.guestFullName, "hostname": info.hostName}
    by_mac = dict((nic.macAddress.lower(), list(nic.ipAddress)) for nic in info.net or [])
    return guest, by_mac, info.ipAddress


def test_guest_information_from_vmware_tools(provider, oracle):
    guest, by_mac, primary = reported(oracle, TOOLS_VM)
    assert guest["agent"] and guest["os"] and guest["hostname"] and primary  # the lab's Tools VM
    vm = provider.describe(TOOLS_VM)
    assert vm["guest"] == guest
    assert vm["addresses"][0] == primary
    assert vm["interfaces"]
    for nic in vm["interfaces"]:
        assert nic["addresses"] == by_mac[nic["mac"].lower()] != []
        assert nic["address_source"] == "tools"
    assert [v["guest"] for v in provider.list_vms({"name": TOOLS_VM})] == [guest]
    assert provider.list_vm_summaries({"name": TOOLS_VM})[0]["guest"] == guest
    first = vm["interfaces"][0]
    try:  # a second NIC, to which the guest gave no address: matched by MAC, it has none
        vm = provider.reconfigure(TOOLS_VM, interfaces=[{"network": first["network"]},
                                                        {"network": "VM Network"}])
        guest, by_mac, primary = reported(oracle, TOOLS_VM)
        assert len(by_mac) == 2 and by_mac[vm["interfaces"][1]["mac"].lower()] == []
        assert [(n["addresses"], n["address_source"]) for n in vm["interfaces"]] == [
            (first["addresses"], "tools"), ([], None)]
    finally:
        provider.reconfigure(TOOLS_VM, interfaces=[{"network": first["network"]}])

    guest, by_mac, primary = reported(oracle, BARE_VM)  # no Tools: nothing reported
    vm = provider.describe(BARE_VM)
    assert vm["guest"] == guest == {"agent": False, "agent_state": guest["agent_state"],
                                    "os": None, "hostname": None}
    assert vm["addresses"] == [] and primary is None
    assert [(n["addresses"], n["address_source"]) for n in vm["interfaces"]] == [([], None)]


def test_guest_information_follows_the_power_state(provider, oracle):
    try:
        provider.power(TOOLS_VM, "off")
        guest, by_mac, primary = reported(oracle, TOOLS_VM)
        assert guest["agent"] is False and guest["agent_state"] == "guestToolsNotRunning"
        vm = provider.describe(TOOLS_VM)
        assert vm["guest"] == guest and vm["addresses"] == [] and primary is None
        assert [n["address_source"] for n in vm["interfaces"]] == [None]
    finally:
        provider.power(TOOLS_VM, "on")
    guest, by_mac, primary = reported(oracle, TOOLS_VM)
    assert guest["agent"] is True and provider.describe(TOOLS_VM)["guest"] == guest


def test_vm_info_shows_the_guest_information(sim, oracle, tmp_path):
    guest, by_mac, primary = reported(oracle, TOOLS_VM)
    defaults = {"provider": dict(sim, name="vcsim-guest"),
                "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    run = run_playbook(tmp_path, [play([
        {"name": "one", "resilient.virt.vm_info": {"name": TOOLS_VM}},
        {"name": "all", "resilient.virt.vm_info": {"filters": {"name": "DC0_C0_*"}}},
    ], module_defaults=defaults)], name="guest")
    assert run.rc == 0, run
    (one,) = run.task("one")["vms"]
    assert one["guest"] == guest and one["addresses"][0] == primary
    assert [(n["addresses"], n["address_source"]) for n in one["interfaces"]] == [
        (by_mac[n["mac"].lower()], "tools") for n in one["interfaces"]]
    listed = dict((vm["name"], vm["guest"]) for vm in run.task("all")["vms"])
    assert listed[TOOLS_VM] == guest and listed[BARE_VM]["agent"] is False


def test_find_names_the_vm_of_a_uuid(provider, oracle, vm):
    uuid = oracle.vm(vm).config.instanceUuid
    path = oracle.path(oracle.vm(vm))
    assert provider.find(uuid) == path and provider.describe(path)["uuid"] == uuid
    err = fails(provider.find, "00000000-0000-0000-0000-000000000000")
    assert err.type == "NotFound"


def test_duplicate_names_are_told_apart_by_uuid_and_path(provider, oracle, vm):
    """Two VMs with one name (the second in a folder the test makes with pyVmomi): the name
    alone is a Conflict naming the fix; the uuid finds each one's path, and a change through
    that path reaches that VM only."""
    from pyVmomi import vim

    first = oracle.vm(vm)
    folder = first.parent.CreateFolder("dup-%s" % uuid.uuid4().hex[:6])
    try:
        spec = vim.vm.RelocateSpec(pool=first.resourcePool)
        task = first.CloneVM_Task(folder=folder, name=vm, spec=vim.vm.CloneSpec(location=spec))
        while str(task.info.state) not in ("success", "error"):
            time.sleep(0.05)
        second = task.info.result
        err = fails(provider.describe, vm)
        assert err.type == "Conflict" and "uuid" in err.message
        found = provider.find(second.config.instanceUuid)
        assert found == oracle.path(second) and found.startswith(oracle.path(folder))
        changed = provider.reconfigure(found, memory_mb=128)
        assert changed["uuid"] == second.config.instanceUuid and changed["memory_mb"] == 128
        assert (first.config.hardware.memoryMB, second.config.hardware.memoryMB) == (64, 128)
    finally:
        for ref in oracle.vms_named(vm):
            if ref.parent == folder:
                task = ref.Destroy_Task()
                while str(task.info.state) not in ("success", "error"):
                    time.sleep(0.05)
        folder.Destroy_Task()
