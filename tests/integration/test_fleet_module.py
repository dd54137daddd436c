"""resilient.virt.vm_fleet through real ansible-playbook runs on the lab's three libvirt
hypervisors and the vSphere simulator, in one task.

Oracles of the tests' own: libvirt-python connections to the hypervisors, a pyVmomi session on
the simulator, the SQLite state file read with sqlite3, and an observer plugin that records
every provider attempt (operation and VM name) from inside the module process.
"""
import time

import libvirt
import pytest
from kill_plugin import KILL_ENV
from lab_domains import remove_domain
from observer_plugin import ATTEMPTS_ENV, read_attempts
from playbook_runner import play, plugin_env, run_playbook, store_records
from simulator_session import Simulator

HYPERVISORS = ("hv1", "hv2", "hv3")
PER_PROVIDER = 15
MUTATING = ("create", "delete", "power", "reconfigure")


@pytest.fixture
def sim(vsphere):
    session = Simulator(vsphere)
    yield session
    session.close()


class Lab:
    """The providers of a fleet test, the oracles, and cleanup of every VM it named."""

    def __init__(self, lab, vsphere, sim, tmp_path, prefix):
        self.lab = lab
        self.sim = sim
        self.tmp_path = tmp_path
        self.prefix = prefix
        self.providers = dict((hv, {"type": "libvirt", "name": "%s-%s" % (prefix, hv),
                                    "uri": lab.hypervisor(hv).uri, "domain_type": "qemu"})
                              for hv in HYPERVISORS)
        self.providers["vcsim"] = dict(vsphere, name="%s-vcsim" % prefix)
        self.store = "sqlite:///%s" % (tmp_path / "state.db")
        self.runs = 0

    def key(self, provider):
        return "%s:%s-%s" % ("vsphere" if provider == "vcsim" else "libvirt", self.prefix, provider)

    def entries(self, per_provider=PER_PROVIDER, **spec):
        return [dict({"name": "%s-%s-%02d" % (self.prefix, p, i), "provider": p, "vcpus": 1,
                      "memory_mb": 64}, **spec) for p in self.providers for i in range(per_provider)]

    def run(self, vms, env=None, check=False, diff=False, **options):
        """(playbook run, fleet task result, provider attempts recorded in the module)."""
        self.runs += 1
        name = "fleet%d" % self.runs
        attempts = str(self.tmp_path / (name + "-attempts.jsonl"))
        environ = dict(plugin_env("observer_plugin", "kill_plugin"), **{ATTEMPTS_ENV: attempts})
        environ.update(env or {})
        task = dict({"owner": self.prefix, "vms": vms, "providers": self.providers,
                     "state_store": self.store}, **options)
        tasks = [{"name": "fleet", "resilient.virt.vm_fleet": task, "ignore_errors": True}]
        run = run_playbook(self.tmp_path, [play(tasks)],
                           env=environ, name=name, timeout=600, check=check, diff=diff)
        results = [t for t in run.tasks if t.name == "fleet"]
        return run, (results[0] if results else None), read_attempts(attempts)

    def libvirt_names(self, hv):
        conn = libvirt.open(self.lab.hypervisor(hv).uri)
        try:
            return sorted(d.name() for d in conn.listAllDomains() if d.name().startswith(self.prefix))
        finally:
            conn.close()

    def memory(self, hv, name):
        conn = libvirt.open(self.lab.hypervisor(hv).uri)
        try:
            return conn.lookupByName(name).info()[1] // 1024
        finally:
            conn.close()

    def sim_names(self):
        return sorted(name for name in self.sim.power_by_name() if name.startswith(self.prefix))

    def everywhere(self):
        found = dict((hv, self.libvirt_names(hv)) for hv in HYPERVISORS)
        found["vcsim"] = self.sim_names()
        return found

    def records(self):
        """Status records of the state file: {key: record}."""
        return store_records(self.store, "vm_fleet")

    def cleanup(self):
        for hv in HYPERVISORS:
            for name in self.libvirt_names(hv):
                remove_domain(self.lab.hypervisor(hv).uri, name)
        for name in self.sim_names():
            self.sim.remove(name)


@pytest.fixture
def fleet_lab(lab, vsphere, sim, tmp_path, request):
    prefix = "fl%d" % (abs(hash(request.node.name)) % 10000)
    the_lab = Lab(lab, vsphere, sim, tmp_path, prefix)
    the_lab.cleanup()
    yield the_lab
    the_lab.cleanup()


def names_by_provider(entries):
    found = dict((p, []) for p in list(HYPERVISORS) + ["vcsim"])
    for entry in entries:
        found[entry["provider"]].append(entry["name"])
    return dict((p, sorted(n)) for p, n in found.items())


def mutations(attempts):
    return sorted((a["operation"], a["name"]) for a in attempts if a["operation"] in MUTATING)


def test_sixty_vms_on_four_providers_in_one_task(fleet_lab):
    entries = fleet_lab.entries()
    run, result, attempts = fleet_lab.run(entries)
    assert result is not None and not result.failed, run.describe()
    assert result["summary"]["created"] == 60 and result["changed"] is True
    assert fleet_lab.everywhere() == names_by_provider(entries)
    assert sorted(r["name"] for r in fleet_lab.records().values()) == sorted(e["name"] for e in entries)
    assert all(r["status"] == "done" for r in fleet_lab.records().values())

    # second run: nothing changed, and not one provider call
    run, result, attempts = fleet_lab.run(entries)
    assert result["changed"] is False and result["summary"]["unchanged"] == 60, run.describe()
    assert attempts == []

    # five specs changed: exactly those five are touched
    changed = [entries[i] for i in (0, 1, 16, 31, 50)]
    for entry in changed:
        entry["memory_mb"] = 96
    run, result, attempts = fleet_lab.run(entries)
    assert result["summary"]["updated"] == 5 and result["summary"]["unchanged"] == 55, run.describe()
    assert mutations(attempts) == sorted(("reconfigure", e["name"]) for e in changed)
    assert fleet_lab.memory("hv1", entries[0]["name"]) == 96
    assert fleet_lab.sim.state(fleet_lab.sim.vm(entries[50]["name"]))["memory_mb"] == 96

    # three deleted behind its back: an incremental run does not look, a full run fixes them
    gone = [entries[2], entries[17], entries[46]]
    for entry in gone[:2]:
        remove_domain(fleet_lab.lab.hypervisor(entry["provider"]).uri, entry["name"])
    fleet_lab.sim.remove(gone[2]["name"])
    run, result, attempts = fleet_lab.run(entries)
    assert result["summary"]["unchanged"] == 60 and attempts == []
    run, result, attempts = fleet_lab.run(entries, full=True)
    assert result["full"] is True and result["summary"]["out_of_sync"] == 3, run.describe()
    assert result["summary"]["created"] == 3
    assert mutations(attempts) == sorted(("create", e["name"]) for e in gone)
    drifted = sorted(vm["name"] for vm in result["vms"] if vm["out_of_sync"])
    assert drifted == sorted(e["name"] for e in gone)
    assert fleet_lab.everywhere() == names_by_provider(entries)

    # ten removed from the list: max_prune 5 refuses before anything, 10 deletes exactly those
    kept, removed = entries[:-10], entries[-10:]
    run, result, attempts = fleet_lab.run(kept, prune=True, max_prune=5)
    assert result.failed and result["error"]["type"] == "InvalidSpec"
    assert "max_prune" in result["msg"] and mutations(attempts) == []
    assert fleet_lab.everywhere() == names_by_provider(entries)
    run, result, attempts = fleet_lab.run(kept, prune=True, max_prune=10)
    assert not result.failed and result["summary"]["pruned"] == 10, run.describe()
    assert mutations(attempts) == sorted(("delete", e["name"]) for e in removed)
    assert fleet_lab.everywhere() == names_by_provider(kept)
    assert sorted(r["name"] for r in fleet_lab.records().values()) == sorted(e["name"] for e in kept)


def test_a_hypervisor_killed_mid_run_then_restarted(fleet_lab, outage):
    entries = fleet_lab.entries(per_provider=8)
    hv2 = fleet_lab.lab.hypervisor("hv2")
    outage.touched.add("hv2")
    kill = "%s 3 %d" % (fleet_lab.key("hv2"), hv2.daemon_pid("libvirtd"))
    run, result, attempts = fleet_lab.run(
        entries, env={KILL_ENV: kill}, fail_on_error=False, round_size=4,
        resilience={"max_attempts": 2, "base_delay": "100ms", "failure_threshold": 2,
                    "reset_timeout": "1s"})
    assert result is not None and not result.failed, run.describe()
    by_name = dict((vm["name"], vm) for vm in result["vms"])
    on_hv2 = [e["name"] for e in entries if e["provider"] == "hv2"]
    others = [e["name"] for e in entries if e["provider"] != "hv2"]
    assert all(by_name[name]["outcome"] == "created" for name in others)
    outcomes = set(by_name[name]["outcome"] for name in on_hv2)
    assert "failed" in outcomes and outcomes <= {"created", "failed", "deferred"}, outcomes
    assert result["summary"]["failed"] + result["summary"]["deferred"] >= 6
    assert any("fail_on_error=false" in w for w in result.get("warnings", []))

    outage.start("hv2")
    time.sleep(1.5)  # past the breaker's reset_timeout
    run, result, attempts = fleet_lab.run(entries, retry_now=True)
    assert not result.failed, run.describe()
    assert set(vm["status"] for vm in result["vms"]) == {"done"}
    assert fleet_lab.everywhere() == names_by_provider(entries)
    created = [name for op, name in mutations(attempts) if op == "create"]
    assert len(created) == len(set(created)) and set(created) <= set(on_hv2)


def test_a_run_killed_mid_way_loses_at_most_a_round_and_creates_nothing_twice(fleet_lab):
    entries = fleet_lab.entries(per_provider=6)
    kill = "%s 4 self" % fleet_lab.key("vcsim")
    run, result, attempts = fleet_lab.run(entries, env={KILL_ENV: kill}, round_size=4,
                                          concurrency=4)
    assert result is None or result.failed  # the module process died
    records = fleet_lab.records()
    created = [name for op, name in mutations(attempts) if op == "create"]
    assert len(records) == 12, (len(records), created)  # rounds 1-3 written, round 4 lost

    run, result, attempts = fleet_lab.run(entries)
    assert not result.failed, run.describe()
    found = fleet_lab.everywhere()
    assert found == names_by_provider(entries)
    for entry in entries:  # the simulator accepts duplicate names: each VM is there once
        if entry["provider"] == "vcsim":
            assert len(fleet_lab.sim.vms_named(entry["name"])) == 1, entry["name"]
    records = fleet_lab.records()
    assert sorted(r["name"] for r in records.values()) == sorted(e["name"] for e in entries)
    assert set(r["status"] for r in records.values()) == {"done"}


def test_check_mode_and_diff_show_the_plan_and_change_nothing(fleet_lab):
    entries = fleet_lab.entries(per_provider=2)
    fleet_lab.run(entries[:4])
    entries[0]["memory_mb"] = 96
    entries[1]["state"] = "absent"
    run, result, attempts = fleet_lab.run(entries, check=True, diff=True)
    assert not result.failed and result["changed"] is True, run.describe()
    summary = result["summary"]
    assert (summary["created"], summary["updated"], summary["deleted"]) == (4, 1, 1), summary
    assert mutations(attempts) == [] and len(fleet_lab.records()) == 4
    assert fleet_lab.everywhere() == names_by_provider(entries[:4])
    key = "%s/%s" % (fleet_lab.key("hv1"), entries[0]["name"])
    assert result["diff"]["before"][key]["memory_mb"] == 64
    assert result["diff"]["after"][key]["memory_mb"] == 96
    planned = dict((vm["name"], vm) for vm in result["vms"])
    assert planned[entries[4]["name"]]["status"] == "pending"
    assert planned[entries[4]["name"]]["conditions"][0]["reason"] == "Pending"


OWNER_KEY = "resilient_virt_owner"
RV_ITEM = "{https://resilient.virt/xmlns/vm/1}item"


def libvirt_metadata(uri, name):
    """The collection's metadata items of domain ``name``, read from its XML with libvirt-python
    (None when the domain is gone)."""
    import xml.etree.ElementTree as ET

    conn = libvirt.open(uri)
    try:
        try:
            xml = conn.lookupByName(name).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        except libvirt.libvirtError as err:
            if err.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                return None
            raise
    finally:
        conn.close()
    return dict((item.get("key"), item.text or "") for item in ET.fromstring(xml).iter(RV_ITEM))


def outcomes_by_name(result):
    return dict((vm["name"], vm["outcome"]) for vm in result["vms"])


def test_a_listed_libvirt_vm_the_fleet_did_not_create_is_managed_but_never_pruned(
        fleet_lab, domain_xml):
    uri = fleet_lab.lab.hypervisor("hv1").uri
    handmade, own = fleet_lab.prefix + "-handmade", fleet_lab.prefix + "-own"
    conn = libvirt.open(uri)
    try:
        conn.defineXML(domain_xml(handmade))  # plain XML: no metadata at all
    finally:
        conn.close()
    own_entry = {"name": own, "provider": "hv1", "memory_mb": 64, "vcpus": 1, "state": "stopped"}
    listed = {"name": handmade, "provider": "hv1", "memory_mb": 96, "state": "stopped",
              "metadata": {"team": "rp"}}
    run, result, attempts = fleet_lab.run([listed, own_entry])
    assert result is not None and not result.failed, run.describe()
    assert outcomes_by_name(result) == {handmade: "updated", own: "created"}
    assert fleet_lab.memory("hv1", handmade) == 96  # managed like the others...
    assert libvirt_metadata(uri, handmade) == {"team": "rp"}  # ...but not marked as the fleet's
    assert libvirt_metadata(uri, own)[OWNER_KEY] == fleet_lab.prefix

    run, result, attempts = fleet_lab.run([own_entry], prune=True, max_prune="100%")
    assert result is not None and not result.failed, run.describe()
    assert result["summary"]["pruned"] == 0 and outcomes_by_name(result) == {own: "unchanged"}
    assert ("delete", handmade) not in mutations(attempts)
    assert fleet_lab.libvirt_names("hv1") == sorted([handmade, own])
    assert libvirt_metadata(uri, handmade) == {"team": "rp"}


def sim_create(sim, name):
    """Create a stopped VM ``name`` on the simulator through pyVmomi (not the collection): no
    custom attribute, no tag."""
    from pyVmomi import vim

    datacenter = [e for e in sim.content.rootFolder.childEntity if isinstance(e, vim.Datacenter)][0]
    compute = [e for e in datacenter.hostFolder.childEntity
               if isinstance(e, vim.ComputeResource)][0]
    config = vim.vm.ConfigSpec(name=name, numCPUs=1, memoryMB=64, guestId="otherGuest",
                               files=vim.vm.FileInfo(vmPathName="[%s]" % datacenter.datastore[0].name))
    task = datacenter.vmFolder.CreateVM_Task(config=config, pool=compute.resourcePool)
    end = time.monotonic() + 30
    while str(task.info.state) not in ("success", "error"):
        assert time.monotonic() < end, "the simulator did not create %s within 30 s" % name
        time.sleep(0.05)
    assert str(task.info.state) == "success", task.info.error
    return task.info.result


def sim_attributes(sim, name):
    """The custom attributes with a value of the VM ``name``, by attribute name."""
    names = dict((f.key, f.name) for f in sim.content.customFieldsManager.field or [])
    values = {}
    for item in sim.vm(name).customValue:
        values[names.get(item.key)] = item.value
    return dict((key, value) for key, value in values.items() if value)


def test_a_listed_vsphere_vm_the_fleet_did_not_create_is_pruned_only_once_adopted(fleet_lab):
    handmade, own = fleet_lab.prefix + "-handmade", fleet_lab.prefix + "-own"
    sim_create(fleet_lab.sim, handmade)
    assert sim_attributes(fleet_lab.sim, handmade) == {}
    own_entry = {"name": own, "provider": "vcsim", "memory_mb": 64, "vcpus": 1, "state": "stopped"}
    listed = {"name": handmade, "provider": "vcsim", "memory_mb": 96, "state": "stopped"}
    run, result, attempts = fleet_lab.run([listed, own_entry])
    assert result is not None and not result.failed, run.describe()
    assert outcomes_by_name(result) == {handmade: "updated", own: "created"}
    assert fleet_lab.sim.state(fleet_lab.sim.vm(handmade))["memory_mb"] == 96
    assert OWNER_KEY not in sim_attributes(fleet_lab.sim, handmade)
    assert sim_attributes(fleet_lab.sim, own)[OWNER_KEY] == fleet_lab.prefix

    run, result, attempts = fleet_lab.run([own_entry], prune=True, max_prune="100%")
    assert result is not None and not result.failed, run.describe()
    assert result["summary"]["pruned"] == 0 and outcomes_by_name(result) == {own: "unchanged"}
    assert ("delete", handmade) not in mutations(attempts)
    assert fleet_lab.sim_names() == sorted([handmade, own])

    # listing the marker by hand is refused, naming the entry and the way to adopt
    marked = dict(listed, metadata={OWNER_KEY: fleet_lab.prefix})
    run, result, attempts = fleet_lab.run([marked, own_entry])
    assert result.failed and result["error"]["type"] == "InvalidSpec", run.describe()
    assert "vms[0].metadata.%s" % OWNER_KEY in result["msg"] and "adopt" in result["msg"]
    assert mutations(attempts) == []

    # adopted in so many words: marked, and then a prune may delete it
    run, result, attempts = fleet_lab.run([dict(listed, adopt=True), own_entry])
    assert result is not None and not result.failed, run.describe()
    assert outcomes_by_name(result) == {handmade: "updated", own: "unchanged"}
    assert sim_attributes(fleet_lab.sim, handmade)[OWNER_KEY] == fleet_lab.prefix
    run, result, attempts = fleet_lab.run([own_entry], prune=True, max_prune="100%")
    assert result is not None and not result.failed, run.describe()
    assert result["summary"]["pruned"] == 1 and outcomes_by_name(result)[handmade] == "pruned"
    assert fleet_lab.sim_names() == [own]
