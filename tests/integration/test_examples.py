"""Every plugin's EXAMPLES run as pasted against the lab, and ``ansible-doc`` renders them.

The examples of each module run as one play, in their order, with what their first line says
they assume: the providers hv1 and hv2 (two lab hypervisors) and vc (the lab's vSphere
simulator) in ``module_defaults`` and in the variable ``resilient_virt_providers`` the vm
examples take them from, the libvirt networks ``default`` and ``storage`` and the image
``debian-12-genericcloud-amd64.qcow2`` on hv1. Every task must succeed (a task the example
itself marks ``ignore_errors`` may fail). Each source of the inventory plugin's examples is run
by ``ansible-inventory`` with the lab's providers in place of the example's. What the examples
create (domains, volumes, networks, vSphere VMs) is removed afterwards.
"""
import ast
import os
import subprocess
import uuid

import libvirt
import pytest
import yaml
from ansible_collections.resilient.virt.plugins.plugin_utils._module_list import MODULES
from inventory_runner import run_inventory
from playbook_runner import play, run_playbook

from paths import ROOT

IMAGE = "debian-12-genericcloud-amd64.qcow2"
NETWORKS = ("default", "storage")


def examples(kind, name):
    """The EXAMPLES text of plugin ``name`` (``modules`` or ``inventory``), read without import."""
    with open(os.path.join(ROOT, "plugins", kind, name + ".py")) as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["EXAMPLES"]:
            return node.value.value
    raise AssertionError("plugins/%s/%s.py has no EXAMPLES" % (kind, name))


def _undefine(dom):
    if dom.isActive():
        dom.destroy()
    flags = 0
    for flag in ("VIR_DOMAIN_UNDEFINE_MANAGED_SAVE", "VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA",
                 "VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA", "VIR_DOMAIN_UNDEFINE_NVRAM"):
        flags |= getattr(libvirt, flag, 0)
    dom.undefineFlags(flags)


def _volumes(conn):
    found = {}
    for pool in conn.listAllStoragePools():
        if pool.isActive():
            pool.refresh(0)
            found.update(("%s/%s" % (pool.name(), v.name()), v) for v in pool.listAllVolumes())
    return found


class Stage:
    """What the examples assume, made on the lab, and everything they make, removed."""

    def __init__(self, lab, vsphere):
        self.lab = lab
        self.catalog = {name: self._libvirt(name) for name in ("hv1", "hv2")}
        self.catalog["vc"] = dict(vsphere, name="vc")
        self.conns = {name: libvirt.open(lab.hypervisor(name).uri) for name in ("hv1", "hv2")}
        self.domains = {n: {d.name() for d in c.listAllDomains(0)} for n, c in self.conns.items()}
        self.volumes = {n: set(_volumes(c)) for n, c in self.conns.items()}
        self.vc_vms = set(self._vc_names())
        token = uuid.uuid4().hex[:5]
        hv1 = self.conns["hv1"]
        self.networks = []
        for index, name in enumerate(NETWORKS):
            network = hv1.networkDefineXML("<network><name>%s</name><bridge name='rvx%s%d'/>"
                                           "</network>" % (name, token, index))
            network.create()
            self.networks.append(network)
        hv1.storagePoolLookupByName("default").createXML(
            "<volume><name>%s</name><capacity unit='MiB'>64</capacity><target><format "
            "type='qcow2'/></target></volume>" % IMAGE, 0)

    def _libvirt(self, name):
        hv = self.lab.hypervisor(name)
        return {"type": "libvirt", "name": name, "uri": hv.uri, "az": hv.az, "domain_type": "qemu"}

    def _vc(self):
        from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
        from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
            open_provider)

        return open_provider(self.catalog["vc"], store=MemoryStore("examples"), environ={})

    def _vc_names(self):
        provider = self._vc()
        try:
            return [vm["name"] for vm in provider.list_vm_summaries()]
        finally:
            provider.close()

    def clean(self):
        for name, conn in self.conns.items():
            for dom in conn.listAllDomains(0):
                if dom.name() not in self.domains[name]:
                    _undefine(dom)
            for key, volume in _volumes(conn).items():
                if key not in self.volumes[name]:
                    volume.delete(0)
        for network in self.networks:
            network.destroy()
            network.undefine()
        provider = self._vc()
        try:
            for vm in set(self._vc_names()) - self.vc_vms:
                provider.delete(vm)
        finally:
            provider.close()
        for conn in self.conns.values():
            conn.close()


@pytest.fixture
def stage(lab, vsphere):
    made = Stage(lab, vsphere)
    try:
        yield made
    finally:
        made.clean()


def _failures(run):
    return [t for t in run.tasks if t.failed and not t.get("_ansible_ignore_errors")]


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
def test_the_examples_of_each_module_run_as_pasted(stage, tmp_path, module):
    text = examples("modules", module)
    assert text.lstrip().startswith("# Assumes "), "the first line says what the examples assume"
    tasks = yaml.safe_load(text)
    defaults = {"providers": stage.catalog, "state_store": "sqlite:///%s" % (tmp_path / "s.db")}
    the_play = play(tasks, module_defaults=defaults, vars={
        "resilient_virt_providers": stage.catalog, "resilient_virt_provider": stage.catalog["hv2"]})
    run = run_playbook(tmp_path, [the_play])
    assert "Traceback" not in run.output
    failed = [(t.name, str(t.get("msg"))[:500]) for t in _failures(run)]
    assert run.rc == 0 and not failed, failed or run.describe()
    assert stage.catalog["vc"]["password"] not in run.output


@pytest.mark.slow
def test_the_inventory_examples_run_with_the_lab_providers(stage, tmp_path):
    sources = [s for s in yaml.safe_load_all(examples("inventory", "hypervisors")) if s]
    assert len(sources) == 2
    lab_providers = dict(stage.catalog)
    lab_providers["vc"] = dict(stage.catalog["vc"], password="{{ lookup('ansible.builtin.env', "
                               "'VCENTER_PASSWORD') }}")
    env = {"VCENTER_PASSWORD": stage.catalog["vc"]["password"]}
    for index, source in enumerate(sources):
        assert set(source["providers"]) <= set(lab_providers), source["providers"]
        source["providers"] = dict((name, dict(lab_providers[name], **{
            key: value for key, value in settings.items()
            if key not in ("uri", "host", "username", "password")}))
            for name, settings in source["providers"].items())
        if "cache_connection" in source:
            source["cache_connection"] = str(tmp_path / "cache")
        run = run_inventory(tmp_path, source, env=env, name="example%d" % index)
        assert run.rc == 0 and "WARNING" not in run.stderr, run
        if index == 0:  # every hypervisor, grouped by zone; the second lists running web- VMs
            assert {"hv1", "hv2", "DC0_C0_H0"} <= set(run.hosts("hypervisors")), run
            assert run.hostvars["hv1"]["maintenance_window"] == "sunday", run
        assert env["VCENTER_PASSWORD"] not in run.output


@pytest.mark.parametrize("kind, name", [("module", m) for m in MODULES] + [("inventory", "resilient.virt.hypervisors")])
def test_ansible_doc_renders_every_plugin(kind, name):
    fqcn = name if "." in name else "resilient.virt." + name
    proc = subprocess.run(["ansible-doc", "-t", kind, fqcn], capture_output=True, text=True,
                          check=False, timeout=120)
    assert proc.returncode == 0 and "ERROR" not in proc.stderr, proc.stderr
    assert "EXAMPLES" in proc.stdout
    assert "'')" not in proc.stdout and "'' }}" not in proc.stdout  # C() cut at its first ')'
