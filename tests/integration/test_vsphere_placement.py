"""Placement, relocation and clones on the vSphere simulator (two datacenters, two clusters of
three hosts each, two datastores per datacenter).

The oracle is a pyVmomi session of the test's own (simulator_session.Simulator): where a VM is
(its host, the host's cluster, its resource pool, its folder and the datastore of its
configuration file, each read through the parents of the objects), its hardware, custom
attributes, the files of datastore folders and the simulator's tasks; tags by raw REST reads.
"""
import time
import uuid

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, NotSupported, Timeout, classify)
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    differences)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import (
    VSphereProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl

from rest_session import Rest
from own_simulator import BIN_DIR, vcsim
from simulator_session import Simulator, _wait


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("vcsim"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, datacenters=2, datastores=2)
    yield settings
    vcsim.stop(run_dir)


@pytest.fixture(scope="module")
def oracle(sim):
    session = Simulator(sim)
    yield session
    session.close()


@pytest.fixture
def provider(sim):
    p = VSphereProvider(dict(sim, timeout="10s", task_timeout="30s"))
    yield p
    p.close()


@pytest.fixture
def names(oracle):
    """new_name(prefix) gives a unique VM name; every VM so named is removed at the end."""
    made = []

    def new_name(prefix="pl"):
        made.append("%s-%s" % (prefix, uuid.uuid4().hex[:6]))
        return made[-1]
    yield new_name
    for name in made:
        oracle.remove(name)


def datacenter(oracle, name="DC0"):
    return next(dc for dc in oracle.content.rootFolder.childEntity if dc.name == name)


@pytest.fixture
def folder(oracle):
    """A VM folder of DC0 made by the test: (name, its inventory path)."""
    name = "team-%s" % uuid.uuid4().hex[:6]
    made = datacenter(oracle).vmFolder.CreateFolder(name)
    yield name, "/DC0/vm/" + name
    _wait(made.Destroy_Task(), "remove folder " + name)


def datastore(oracle, name, dc="DC0"):
    return next(ds for ds in datacenter(oracle, dc).datastore if ds.name == name)


def fails(fn, *args, **kwargs):
    """The classified error raised by ``fn`` (fails the test when it succeeds)."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - classified below, as GuardedProvider does
        owner = getattr(fn, "__self__", None)
        return classify(exc, (owner.classify_error,) if owner is not None else ())
    pytest.fail("%s succeeded" % getattr(fn, "__name__", fn))


def paths(err):
    return sorted(e["path"] for e in err.details["errors"])


def hosts_listing(oracle, ref):
    """Names of the hosts whose VM list holds ``ref``."""
    from pyVmomi import vim

    view = oracle.content.viewManager.CreateContainerView(oracle.content.rootFolder,
                                                          [vim.HostSystem], True)
    try:
        return sorted(host.name for host in view.view if ref in host.vm)
    finally:
        view.Destroy()


# -- where VMs are ----------------------------------------------------------------------------
def test_vm_dicts_show_where_the_vm_is(provider, oracle):
    for name in ("DC0_C0_RP0_VM0", "DC1_C1_RP0_VM1"):
        expected = oracle.placement(oracle.vm(name))
        assert provider.describe(name)["placement"] == expected
        assert [vm["placement"] for vm in provider.list_vms({"name": name})] == [expected]
        assert provider.list_vm_summaries({"name": name})[0]["placement"] == expected
    assert expected["datacenter"] == "DC1" and expected["cluster"] == "DC1_C1"


def soap_calls(provider):
    """The names of the SOAP methods ``provider`` calls from now on, in order: its own
    connection to the simulator, with a counter in front of the stub's InvokeMethod."""
    stub, calls = provider._connection().si._stub, []
    invoke = stub.InvokeMethod

    def counted(mo, info, args, outerStub=None):
        calls.append(info.wsdlName)
        return invoke(mo, info, args, outerStub)

    stub.InvokeMethod = counted
    return calls


def test_a_listing_reads_the_vms_and_where_they_are_in_one_query(sim, oracle, folder, names):
    """A VM listing is one PropertyCollector call (plus its container view, the first time): the
    folders and resource pools that placement names come with the VMs; tags are read as before
    (their REST session opens while the SOAP query runs)."""
    name = names()
    maker = VSphereProvider(dict(sim, timeout="10s", task_timeout="30s"))
    try:
        maker.create({"name": name, "vcpus": 1, "memory_mb": 64, "tags": ["web"],
                      "placement": {"cluster": "DC0_C1", "folder": folder[0]}})
    finally:
        maker.close()
    p = VSphereProvider(dict(sim, timeout="10s"))
    try:
        p.list_hypervisors()  # logs in, reads the hosts and the custom field names
        calls = soap_calls(p)
        vms = p.list_vm_summaries()
        assert calls == ["CreateContainerView", "RetrievePropertiesEx"]
        del calls[:]
        assert p.list_vm_summaries({"name": name})[0]["placement"]["folder"] == folder[1]
        assert calls == ["RetrievePropertiesEx"]
    finally:
        p.close()
    assert len(vms) > 8
    for vm in vms:
        assert vm["placement"] == oracle.placement(oracle.vm(vm["name"])), vm["name"]
    made = next(vm for vm in vms if vm["name"] == name)
    assert made["placement"]["folder"] == folder[1] and made["tags"] == ["web"]


# -- create -----------------------------------------------------------------------------------
def test_create_placed_on_a_cluster_host_folder_and_datastore(provider, oracle, folder, names):
    name = names()
    folder_name, folder_path = folder
    vm = provider.create({"name": name, "vcpus": 1, "memory_mb": 64, "disks": [{"size_gb": 1}],
                          "placement": {"cluster": "DC0_C1", "host": "DC0_C1_H2",
                                        "folder": folder_name, "datastore": "LocalDS_1"}})
    ref = oracle.vm(name)
    where = oracle.placement(ref)
    assert where == {"datacenter": "DC0", "cluster": "DC0_C1", "host": "DC0_C1_H2",
                     "resource_pool": "/DC0/host/DC0_C1/Resources", "folder": folder_path,
                     "datastore": "LocalDS_1"}
    assert vm["placement"] == where
    assert "%s.vmx" % name in oracle.files(datastore(oracle, "LocalDS_1"), name)
    assert oracle.files(datastore(oracle, "LocalDS_0"), name) == []
    assert hosts_listing(oracle, ref) == ["DC0_C1_H2"]
    # the placement read back is a spec that compares equal: nothing to do, no task
    assert differences(vm, {"placement": vm["placement"]}) == {}
    tasks = oracle.tasks_on(ref)
    assert provider.reconfigure(name, placement=vm["placement"])["placement"] == where
    assert oracle.tasks_on(ref) == tasks


def test_create_in_a_resource_pool_by_name_and_in_another_datacenter(provider, oracle, names):
    from pyVmomi import vim

    cluster = next(c for c in datacenter(oracle).hostFolder.childEntity if c.name == "DC0_C0")
    pool_name = "web-%s" % uuid.uuid4().hex[:6]
    pool = cluster.resourcePool.CreateResourcePool(pool_name, vim.ResourceConfigSpec(
        cpuAllocation=vim.ResourceAllocationInfo(reservation=0, limit=-1, expandableReservation=True,
                                                 shares=vim.SharesInfo(level="normal")),
        memoryAllocation=vim.ResourceAllocationInfo(reservation=0, limit=-1,
                                                    expandableReservation=True,
                                                    shares=vim.SharesInfo(level="normal"))))
    try:
        name, other = names(), names()
        vm = provider.create({"name": name, "vcpus": 1, "memory_mb": 64,
                              "placement": {"resource_pool": pool_name}})
        where = oracle.placement(oracle.vm(name))
        assert oracle.vm(name).resourcePool == pool
        assert where["cluster"] == "DC0_C0" and where["resource_pool"] == \
            "/DC0/host/DC0_C0/Resources/" + pool_name
        assert vm["placement"] == where
        vm = provider.create({"name": other, "vcpus": 1, "memory_mb": 64,
                              "placement": {"datacenter": "DC1", "datastore": "LocalDS_1"}})
        where = oracle.placement(oracle.vm(other))
        assert where["datacenter"] == "DC1" and where["folder"] == "/DC1/vm"
        assert where["datastore"] == "LocalDS_1" and vm["placement"] == where
    finally:
        for ref in list(pool.vm):
            oracle.remove(ref.name)
        _wait(pool.Destroy_Task(), "remove pool")


def test_bad_placement_is_refused_by_field_and_creates_nothing(provider, oracle, names):
    name = names()
    base = {"name": name, "vcpus": 1, "memory_mb": 64}
    err = fails(provider.create, dict(base, placement={
        "cluster": "no-cluster", "host": "no-host", "resource_pool": "no-pool",
        "folder": "/DC0/vm/no-folder"}))
    assert isinstance(err, InvalidSpec)
    assert paths(err) == ["placement.cluster", "placement.folder", "placement.host",
                          "placement.resource_pool"]
    assert "DC0_C0" in err.message and "/DC0/vm" in err.message  # what exists is listed
    checks = [({"datacenter": "DC9"}, "placement.datacenter"),
              ({"cluster": "DC0_C0", "host": "DC0_C1_H0"}, "placement.host"),
              ({"host": "DC0_C0_H0", "datastore": "no-ds"}, "placement.datastore"),
              ({"datacenter": "DC1", "cluster": "DC0_C0"}, "placement.cluster"),
              ({"rack": "r1"}, "placement.rack")]
    for placement, path in checks:
        err = fails(provider.create, dict(base, placement=placement))
        assert isinstance(err, InvalidSpec) and paths(err) == [path], (placement, err)
    err = fails(provider.create, dict(base, hypervisor="DC0_C0_H0",
                                      placement={"host": "DC0_C0_H1"}))
    assert paths(err) == ["placement.host"] and "hypervisor" in err.message
    assert oracle.vm(name) is None


# -- relocation -------------------------------------------------------------------------------
def test_relocate_to_another_host_folder_and_datastore(provider, oracle, folder, names):
    from pyVmomi import vim

    name = names()
    folder_name, folder_path = folder
    provider.create({"name": name, "vcpus": 1, "memory_mb": 64, "disks": [{"size_gb": 1}],
                     "placement": {"host": "DC0_C0_H0", "datastore": "LocalDS_0"}})
    provider.power(name, "on")
    ref = oracle.vm(name)
    tasks = oracle.tasks_on(ref)
    target = next(f for f in datacenter(oracle).vmFolder.childEntity if f.name == folder_name)
    wanted = {"host": "DC0_C1_H1", "folder": folder_path, "datastore": "LocalDS_1"}
    moved = provider.reconfigure(name, placement=wanted)
    where = oracle.placement(ref)
    assert where == {"datacenter": "DC0", "cluster": "DC0_C1", "host": "DC0_C1_H1",
                     "resource_pool": "/DC0/host/DC0_C1/Resources", "folder": folder_path,
                     "datastore": "LocalDS_1"}
    assert moved["placement"] == where and moved["state"] == "running"
    assert [kind for _key, kind in oracle.tasks_on(ref) - tasks] == ["VirtualMachine.relocateVm"]
    assert [kind for _key, kind in oracle.tasks_on(target)] == ["Folder.moveIntoFolder"]
    disk = next(d for d in ref.config.hardware.device if isinstance(d, vim.vm.device.VirtualDisk))
    assert disk.backing.fileName.startswith("[LocalDS_1] ")
    assert "%s.vmx" % name in oracle.files(datastore(oracle, "LocalDS_1"), name)
    assert oracle.files(datastore(oracle, "LocalDS_0"), name) == []
    assert hosts_listing(oracle, ref) == ["DC0_C1_H1"]

    # the same placement again, or the folder relative to the VM folder: nothing moves
    tasks = oracle.tasks_on(ref) | oracle.tasks_on(target)
    assert provider.reconfigure(name, placement=wanted)["placement"] == where
    again = provider.reconfigure(name, placement={"folder": folder_name, "cluster": "DC0_C1"})
    assert again["changed"] is False and again["placement"] == where
    assert oracle.tasks_on(ref) | oracle.tasks_on(target) == tasks

    # a cluster only: the VM goes to a host of it, its resource pool follows
    back = provider.reconfigure(name, placement={"cluster": "DC0_C0"})
    assert oracle.placement(ref)["cluster"] == "DC0_C0" == back["placement"]["cluster"]
    assert oracle.placement(ref)["resource_pool"] == "/DC0/host/DC0_C0/Resources"
    assert oracle.placement(ref)["datastore"] == "LocalDS_1"  # not asked: not moved


def test_bad_relocation_is_refused_and_moves_nothing(provider, oracle, names):
    name = names()
    provider.create({"name": name, "vcpus": 1, "memory_mb": 64})
    ref = oracle.vm(name)
    where, tasks = oracle.placement(ref), oracle.tasks_on(ref)
    err = fails(provider.reconfigure, name, placement={"cluster": "nope", "folder": "/DC0/vm/x"})
    assert isinstance(err, InvalidSpec)
    assert paths(err) == ["placement.cluster", "placement.folder"]
    err = fails(provider.reconfigure, name, placement={"datacenter": "DC1"})
    assert isinstance(err, NotSupported) and "template" in err.message
    err = fails(provider.reconfigure, name, placement={"cluster": "DC1_C0"})  # not in DC0
    assert isinstance(err, InvalidSpec) and paths(err) == ["placement.cluster"]
    assert oracle.placement(ref) == where and oracle.tasks_on(ref) == tasks


def test_migrate_keeps_the_storage_and_names_the_hypervisor(provider, oracle, names):
    name = names()
    provider.create({"name": name, "vcpus": 1, "memory_mb": 64,
                     "placement": {"host": "DC0_C0_H0", "datastore": "LocalDS_1"}})
    moved = provider.migrate(name, "DC0_C1_H2")
    assert oracle.placement(oracle.vm(name))["host"] == moved["hypervisor"] == "DC0_C1_H2"
    assert oracle.placement(oracle.vm(name))["datastore"] == "LocalDS_1"
    err = fails(provider.migrate, name, "no-such-host")
    assert isinstance(err, InvalidSpec) and paths(err) == ["hypervisor"]


@pytest.fixture
def slow_sim(tmp_path):
    """A simulator whose relocations, reconfigurations and custom attribute writes each take
    3 s to answer (a slow vCenter)."""
    run_dir = str(tmp_path / "slow")
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=0, method_delay=(
        "RelocateVM_Task=3000,ReconfigVM_Task=3000,SetField=3000"))
    yield settings
    vcsim.stop(run_dir)


class Attempts:
    """A plugin that records the attempts of every operation that reach the provider."""

    def __init__(self):
        self.calls = []

    @hookimpl
    def resilient_virt_before_call(self, operation, arguments):
        self.calls.append(operation)


def test_a_retried_relocation_finds_the_vm_moved(slow_sim, tmp_path):
    """The first attempt is abandoned after 1.5 s while the relocation goes on; the retry (3 s
    later) looks first, finds the VM on the new host, and does not move it again."""
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
        resolve_settings)
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
    from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
        open_provider)

    attempts = Attempts()
    oracle = Simulator(slow_sim)
    settings = resolve_settings({"timeout_mutating": "1.5s", "base_delay": "3s",
                                 "max_attempts": 3, "failure_threshold": 10}, environ={})
    guarded = open_provider(dict(slow_sim, timeout="10s"), settings,
                            open_store("sqlite:///%s" % (tmp_path / "state.db"), environ={}),
                            plugins=[attempts], environ={})
    name = "retry-%s" % uuid.uuid4().hex[:6]
    try:
        guarded.create({"name": name, "vcpus": 1, "memory_mb": 64,
                        "placement": {"host": "DC0_C0_H0"}})
        ref = oracle.vm(name)
        tasks = oracle.tasks_on(ref)
        began = time.monotonic()
        moved = guarded.reconfigure(name, placement={"host": "DC0_C1_H0"})
        assert time.monotonic() - began > 3  # the first attempt was abandoned
        assert moved["placement"]["host"] == "DC0_C1_H0" == oracle.placement(ref)["host"]
        assert attempts.calls.count("reconfigure") == 1  # the retry looked, and stopped there
        assert sorted(kind for _key, kind in oracle.tasks_on(ref) - tasks) == [
            "VirtualMachine.relocateVm"]
    finally:
        guarded.close()
        oracle.remove(name)
        oracle.close()


# -- clones -----------------------------------------------------------------------------------
def attributes(oracle, ref):
    names = dict((f.key, f.name) for f in oracle.content.customFieldsManager.field)
    return dict((names[item.key], item.value) for item in ref.customValue if item.value)


def devices(ref, kind):
    from pyVmomi import vim

    return [d for d in ref.config.hardware.device if isinstance(d, getattr(vim.vm.device, kind))]


@pytest.fixture
def template(provider, oracle, folder, names):
    """A template the test makes: a VM (2 vCPUs, 256 MB, a 1 GB disk, a NIC on VM Network)
    marked as a template by pyVmomi, in the test's folder; (name, inventory path)."""
    name = names("tpl")
    provider.create({"name": name, "vcpus": 2, "memory_mb": 256, "disks": [{"size_gb": 1}],
                     "interfaces": [{"network": "VM Network"}],
                     "placement": {"host": "DC0_C0_H0", "folder": folder[0]}})
    oracle.vm(name).MarkAsTemplate()
    assert oracle.vm(name).config.template
    return name, "%s/%s" % (folder[1], name)


def test_clone_from_a_template(provider, oracle, template, folder, names, sim):
    name = names("clone")
    source = oracle.vm(template[0])
    before = (source.config.hardware.numCPU, source.config.hardware.memoryMB,
              [d.capacityInKB for d in devices(source, "VirtualDisk")])
    vm = provider.create({
        "name": name, "template": template[1], "memory_mb": 512,
        "disks": [{"size_gb": 1}, {"size_gb": 2}], "interfaces": [{"network": "DC0_DVPG0"}],
        "metadata": {"owner": "team-a"}, "tags": ["web"],
        "placement": {"cluster": "DC0_C1", "folder": folder[1], "datastore": "LocalDS_1"},
        "customization": {"hostname": "web-clone", "domain": "example.com"}})
    ref = oracle.vm(name)
    assert not ref.config.template and str(ref.runtime.powerState) == "poweredOff"
    assert (ref.config.hardware.numCPU, ref.config.hardware.memoryMB) == (2, 512)
    assert [d.capacityInKB for d in devices(ref, "VirtualDisk")] == [1 << 20, 2 << 20]
    (nic,) = devices(ref, "VirtualEthernetCard")
    assert nic.backing.port.portgroupKey == next(
        pg.key for pg in datacenter(oracle).network if pg.name == "DC0_DVPG0")
    where = oracle.placement(ref)
    assert (where["cluster"], where["folder"], where["datastore"]) == (
        "DC0_C1", folder[1], "LocalDS_1")
    assert hosts_listing(oracle, ref) == [where["host"]]
    assert attributes(oracle, ref) == {"owner": "team-a"}
    assert Rest(sim).tags_on(ref._moId) == {"resilient.virt": ["web"]}
    assert (vm["placement"], vm["metadata"], vm["tags"], vm["vcpus"]) == (
        where, {"owner": "team-a"}, ["web"], 2)
    # the customization waits for the first start, which applies it (the host name)
    assert ref.config.tools.pendingCustomization
    provider.power(name, "on")
    assert ref.guest.hostName == "web-clone"
    assert oracle.vm(template[0]).config.template  # the template is left as it was
    assert (source.config.hardware.numCPU, source.config.hardware.memoryMB,
            [d.capacityInKB for d in devices(source, "VirtualDisk")]) == before


def test_clone_from_a_vm_takes_its_hardware(provider, oracle, names):
    source, name = names("src"), names("clone")
    provider.create({"name": source, "vcpus": 2, "memory_mb": 128, "disks": [{"size_gb": 1}],
                     "interfaces": [{"network": "VM Network"}], "metadata": {"k": "v"}})
    provider.power(source, "on")
    vm = provider.create({"name": name, "template": source})
    ref, src = oracle.vm(name), oracle.vm(source)
    assert (ref.config.hardware.numCPU, ref.config.hardware.memoryMB) == (2, 128)
    assert [d.capacityInKB for d in devices(ref, "VirtualDisk")] == [1 << 20]
    assert len(devices(ref, "VirtualEthernetCard")) == 1
    assert vm["placement"] == oracle.placement(ref) and vm["state"] == "stopped"
    assert str(src.runtime.powerState) == "poweredOn"


def test_bad_clones_are_refused_before_anything_is_made(provider, oracle, template, names):
    name = names("clone")
    tasks = oracle.tasks_on(oracle.vm(template[0]))
    err = fails(provider.create, {"name": name, "template": "no-such-template"})
    assert isinstance(err, InvalidSpec) and paths(err) == ["template"]
    err = fails(provider.create, {"name": name, "template": "/DC0/vm/nowhere/" + template[0]})
    assert paths(err) == ["template"] and "nowhere" in err.message
    for spec, path in (({"disks": [{"size_gb": 5}]}, "disks[0].size_gb"),
                       ({"interfaces": [{"network": "no-net"}]}, "interfaces[0].network"),
                       ({"guest_id": "otherGuest"}, "guest_id"),
                       ({"placement": {"folder": "nope"}}, "placement.folder")):
        err = fails(provider.create, dict(spec, name=name, template=template[0]))
        assert isinstance(err, InvalidSpec) and paths(err) == [path], (spec, err)
    err = fails(provider.create, {"name": name, "vcpus": 1, "memory_mb": 64,
                                  "customization": {"hostname": "x"}})
    assert paths(err) == ["customization"] and "template" in err.message
    err = fails(provider.create, {"name": "not_a_host_name", "template": template[0],
                                  "customization": {}})
    assert paths(err) == ["customization.hostname"]
    err = fails(provider.create, {"name": name})
    assert paths(err) == ["memory_mb", "vcpus"]
    assert oracle.vm(name) is None and oracle.vm("not_a_host_name") is None
    assert oracle.tasks_on(oracle.vm(template[0])) == tasks  # no clone was started


def test_a_create_or_clone_that_fails_midway_leaves_no_vm(slow_sim):
    """vCenter answers the reconfiguration of a new clone, and the custom attributes of a new VM,
    later than the provider waits (timeout 1 s): the VM made is deleted again."""
    oracle = Simulator(slow_sim)
    p = VSphereProvider(dict(slow_sim, timeout="1s"))
    name, source = "half-%s" % uuid.uuid4().hex[:6], "src-%s" % uuid.uuid4().hex[:6]
    try:
        err = fails(p.create, {"name": name, "vcpus": 1, "memory_mb": 64,
                               "metadata": {"k": "v"}})
        assert isinstance(err, Timeout)
        assert oracle.vm(name) is None
        p.create({"name": source, "vcpus": 1, "memory_mb": 64})
        err = fails(p.create, {"name": name, "template": source, "memory_mb": 128})
        assert isinstance(err, Timeout)
        assert oracle.vm(name) is None and oracle.vm(source) is not None
        assert not p.warnings or all(name not in w for w in p.warnings)
    finally:
        time.sleep(3)  # the slowed calls end before the VMs go
        oracle.remove(name)
        oracle.remove(source)
        oracle.close()
        p.close()


# -- through the vm module ----------------------------------------------------------------------
def test_vm_module_places_moves_and_clones(sim, oracle, folder, names, tmp_path):
    from playbook_runner import play, run_playbook

    name, clone = names("mod"), names("modclone")
    defaults = {"provider": dict(sim, name="vcsim-place"),
                "state_store": "sqlite:///%s" % (tmp_path / "state.db")}

    def run(step, arguments, check=False):
        task = {"name": step, "resilient.virt.vm": arguments}
        done = run_playbook(tmp_path, [play([task], module_defaults=defaults)], check=check,
                            diff=True, name=step)
        assert done.rc == 0, done
        return done.task(step)

    placed = {"name": name, "vcpus": 1, "memory_mb": 64, "placement": {
        "cluster": "DC0_C1", "folder": folder[1], "datastore": "LocalDS_1"}}
    made = run("create", placed)
    where = oracle.placement(oracle.vm(name))
    assert made["changed"] and made["actions"] == ["create"]
    assert made["vm"]["placement"] == where
    assert (where["cluster"], where["folder"], where["datastore"]) == (
        "DC0_C1", folder[1], "LocalDS_1")
    for check in (True, False):  # the same placement: nothing to do, in check mode too
        again = run("again", placed, check=check)
        assert not again["changed"] and again["actions"] == []

    moved = dict(placed, placement={"host": "DC0_C0_H2"})
    checked = run("check-move", moved, check=True)
    assert checked["changed"] and checked["actions"] == ["reconfigure"]
    assert checked["changes"]["after"]["placement"]["host"] == "DC0_C0_H2"
    assert oracle.placement(oracle.vm(name)) == where  # check mode moved nothing
    done = run("move", moved)
    assert done["changed"] and done["actions"] == ["reconfigure"]
    assert oracle.placement(oracle.vm(name))["host"] == "DC0_C0_H2" == \
        done["vm"]["placement"]["host"]

    cloned = run("clone", {"name": clone, "template": name, "memory_mb": 128,
                           "placement": {"folder": folder[0]},
                           "customization": {"hostname": "modclone-host"}})
    assert cloned["changed"] and cloned["actions"] == ["create"]
    ref = oracle.vm(clone)
    assert ref.config.tools.pendingCustomization  # the guest applies it at its first start
    assert (ref.config.hardware.numCPU, ref.config.hardware.memoryMB) == (1, 128)
    assert oracle.placement(ref)["folder"] == folder[1] == cloned["vm"]["placement"]["folder"]
    again = run("clone-again", {"name": clone, "template": name, "memory_mb": 128})
    assert not again["changed"]  # an existing VM is not compared with its template
