"""resilient.virt.hypervisors through real ansible-inventory runs: the lab's three libvirt
hypervisors and the vSphere simulator in one source.

What the inventory says is checked against the providers themselves: libvirt-python on each
hypervisor's URI and a pyVmomi session on the simulator (simulator_session.py), never through
the collection. Outages are real: a stopped libvirtd, a frozen one (SIGSTOP), a VM deleted
while the inventory reads it (vanish_plugin.py).
"""
import os
import socket
import uuid

import libvirt
import pytest
import yaml
from inventory_runner import run_inventory
from playbook_runner import plugin_env
from lab_domains import remove_domain
from simulator_session import Simulator

from vanish_plugin import VANISH_ENV

P = "resilient_virt_"
PASSWORD_ENV = "TEST_VCSIM_PASSWORD"
MARGIN = 4.0  # ansible-inventory starting and importing on a loaded 2-core machine


def _catalog(lab):
    with open(lab.inventory_file) as handle:
        providers = yaml.safe_load(handle)["all"]["vars"]["resilient_virt_providers"]
    # the hypervisors and the vSphere simulator; the Proxmox tests have a simulator of their own
    providers = {n: p for n, p in providers.items() if p["type"] in ("libvirt", "vsphere")}
    password = providers["vcsim"]["password"]
    providers["vcsim"]["password"] = "{{ lookup('ansible.builtin.env', '%s') }}" % PASSWORD_ENV
    return providers, password


def _source(lab, tmp_path, **options):
    providers, password = _catalog(lab)
    source = {"providers": providers, "include_vms": True, "timeout": "10s",
              "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    source.update(options)
    return source, {PASSWORD_ENV: password}


@pytest.fixture
def domains(lab, domain_xml):
    """``domains(hv, name, running)`` defines (and starts) a tiny domain, removed afterwards."""
    made = []

    def make(hv, name, running=False):
        conn = libvirt.open(lab.hypervisor(hv).uri)
        try:
            dom = conn.defineXML(domain_xml(name))
            made.append((lab.hypervisor(hv).uri, name))
            if running:
                dom.create()
        finally:
            conn.close()

    yield make
    for uri, name in made:
        remove_domain(uri, name)


def _libvirt_domains(lab, hv):
    conn = libvirt.open(lab.hypervisor(hv).uri)
    try:
        return {dom.name(): dom.isActive() for dom in conn.listAllDomains(0)}
    finally:
        conn.close()


def test_every_provider_in_one_source(lab, vsphere, tmp_path, domains):
    tag = uuid.uuid4().hex[:6]
    domains("hv1", "inv-on-" + tag, running=True)
    domains("hv1", "inv-off-" + tag)
    source, env = _source(lab, tmp_path)
    run = run_inventory(tmp_path, source, env=env)
    assert run.rc == 0, run
    assert "WARNING" not in run.stderr, run.stderr
    hostvars = run.hostvars

    # the oracle: what each hypervisor and the simulator hold
    sim = Simulator(vsphere)
    try:
        esx, sim_vms = sim.vm_count_by_host(), sim.power_by_name()
    finally:
        sim.close()
    kvm = dict((hv, _libvirt_domains(lab, hv)) for hv in ("hv1", "hv2", "hv3"))

    assert run.hosts("hypervisors") == sorted(["hv1", "hv2", "hv3"] + list(esx))
    expected_vms = set(sim_vms) | set(name for found in kvm.values() for name in found)
    assert set(run.hosts("vms")) == expected_vms
    for hv, found in kvm.items():
        assert hostvars[hv][P + "vm_count"] == len(found)
        assert hostvars[hv][P + "provider"] == hv and hostvars[hv][P + "provider_type"] == "libvirt"
        assert hostvars[hv][P + "breaker"] == "closed" and hostvars[hv][P + "stale"] is False
    for host, count in esx.items():
        assert hostvars[host][P + "vm_count"] == count
        assert hostvars[host][P + "provider"] == "vcsim"
    for name, power in sim_vms.items():
        assert hostvars[name][P + "power_state"] == {"poweredOn": "running",
                                                     "poweredOff": "stopped"}.get(power, power)
    on, off = hostvars["inv-on-" + tag], hostvars["inv-off-" + tag]
    assert (on[P + "power_state"], on[P + "enabled"], off[P + "power_state"], off[P + "enabled"]) == (
        "running", True, "stopped", False)
    assert (on[P + "hypervisor"], on[P + "zone"], on[P + "vcpus"], on[P + "memory_mb"]) == (
        "hv1", "az1", 1, 64)
    assert sorted(run.hosts("hypervisor_hv1")) == sorted(kvm["hv1"])
    assert set(run.hosts("zone_az1")) == {"hv1", "hv3"} | set(kvm["hv1"]) | set(kvm["hv3"])
    assert set(run.hosts("provider_vcsim")) == set(esx) | set(sim_vms)
    assert "inv-on-" + tag in run.hosts("power_running")
    assert run.all_vars[P + "unreachable_providers"] == []
    assert sorted(run.all_vars[P + "provider_answers"]) == ["hv1", "hv2", "hv3", "vcsim"]

    detailed = run_inventory(tmp_path, dict(source, vm_details=True), env=env)
    assert detailed.rc == 0, detailed
    some_vm = sorted(sim_vms)[0]
    assert detailed.hostvars[some_vm][P + "disks"] and detailed.hostvars[some_vm][P + "interfaces"]
    assert P + "disks" not in hostvars[some_vm]

    graph = run_inventory(tmp_path, source, args=("--graph",), env=env)
    assert graph.rc == 0 and "@zone_az1:" in graph.stdout and "|--inv-on-" + tag in graph.stdout
    verbose = run_inventory(tmp_path, dict(source, providers=dict(
        source["providers"], wrong=dict(source["providers"]["vcsim"], username="nobody"))),
        args=("--list", "-vvv"), env=env)
    assert verbose.rc == 0 and "wrong gave no answer" in verbose.stderr, verbose
    assert env[PASSWORD_ENV] not in verbose.output


def test_a_stopped_hypervisor_leaves_the_others_and_the_cache_keeps_its_hosts(
        lab, outage, tmp_path):
    cache = {"cache": True, "cache_plugin": "ansible.builtin.jsonfile",
             "cache_connection": str(tmp_path / "cache"), "cache_timeout": 3600}
    source, env = _source(lab, tmp_path, include_vms=False, **cache)
    warm = run_inventory(tmp_path, source, env=env)
    assert warm.rc == 0 and "hv2" in warm.hosts("hypervisors"), warm
    outage.stop("hv2")

    hit = run_inventory(tmp_path, source, env=env)  # a cache hit asks no provider
    assert hit.rc == 0 and "WARNING" not in hit.stderr, hit
    assert hit.hostvars["hv2"][P + "stale"] is False

    refreshed = run_inventory(tmp_path, source, args=("--list", "--export", "--flush-cache"),
                              env=env)
    assert refreshed.rc == 0, refreshed
    assert "provider hv2 gave no answer (Unavailable" in refreshed.stderr
    assert "come from the inventory cache" in refreshed.stderr
    hv2 = refreshed.hostvars["hv2"]
    assert hv2[P + "stale"] is True and hv2[P + "age_seconds"] >= 0, hv2
    assert hv2[P + "scanned_at"] == warm.hostvars["hv2"][P + "scanned_at"]
    assert "hv2" in refreshed.hosts("stale") and refreshed.hostvars["hv1"][P + "stale"] is False
    assert refreshed.all_vars[P + "provider_answers"]["hv2"]["stale"] is True

    no_cache, _env = _source(lab, tmp_path, include_vms=False)
    missing = run_inventory(tmp_path, no_cache, env=env)
    assert missing.rc == 0, missing
    assert "hv2" not in missing.hosts("hypervisors") and "hv1" in missing.hosts("hypervisors")
    assert "its hosts are missing" in missing.stderr
    assert missing.all_vars[P + "unreachable_providers"] == ["hv2"]

    strict = run_inventory(tmp_path, dict(no_cache, fail_on_errors=True), env=env)
    assert strict.rc != 0 and "provider hv2 gave no answer" in strict.output, strict


def test_a_frozen_hypervisor_costs_its_timeout(lab, outage, tmp_path):
    source, env = _source(lab, tmp_path, timeout="3s")
    healthy = run_inventory(tmp_path, source, env=env, timeout=60)
    assert healthy.rc == 0 and "hv3" in healthy.hosts("hypervisors"), healthy
    outage.freeze("hv3")
    run = run_inventory(tmp_path, source, env=env, timeout=60)
    assert run.rc == 0, run
    # what the frozen one adds to a healthy run on this machine now: its timeout, not more
    assert run.wall < healthy.wall + 3.0 + MARGIN, (run.wall, healthy.wall)
    assert "provider hv3 gave no answer (Timeout" in run.stderr
    assert "hv3" not in run.hosts("hypervisors")
    assert {"hv1", "hv2"} <= set(run.hosts("hypervisors"))
    assert run.all_vars[P + "unreachable_providers"] == ["hv3"]


@pytest.mark.parametrize("policy", ["open", "closed"])
def test_an_unreachable_store_follows_the_store_failure_policy(lab, tmp_path, policy):
    """open (from the option): every hypervisor listed, one warning naming the store; closed (from
    the environment variable): every provider reported unreachable with Unavailable."""
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        url = "redis://:store-password@127.0.0.1:%d/0" % s.getsockname()[1]
    source, env = _source(lab, tmp_path, state_store=url, cache=False)
    if policy == "open":
        source["store_failure"] = "open"
    env["RESILIENT_VIRT_STORE_FAILURE"] = "closed" if policy == "closed" else "ajar-but-overridden"
    run = run_inventory(tmp_path, source, env=env)
    assert run.rc == 0 and "store-password" not in run.output, run
    if policy == "open":
        assert {"hv1", "hv2", "hv3"} <= set(run.hosts("hypervisors")), run
        assert run.stderr.count("(store_failure=open)") == 1, run.stderr
        assert "redis://***@127.0.0.1" in run.stderr
    else:
        assert run.hosts("hypervisors") == [], run
        assert sorted(run.all_vars[P + "unreachable_providers"]) == sorted(source["providers"])
        assert "Unavailable: state store redis://***@127.0.0.1" in run.stderr


def test_a_vm_deleted_during_the_scan_is_left_out(lab, tmp_path, domains):
    tag = uuid.uuid4().hex[:6]
    keep, vanish = "inv-keep-" + tag, "inv-vanish-" + tag
    domains("hv1", keep)
    domains("hv1", vanish)
    source, env = _source(lab, tmp_path)
    env.update(plugin_env("vanish_plugin"))
    env[VANISH_ENV] = "%s %s" % (lab.hypervisor("hv1").uri, vanish)
    run = run_inventory(tmp_path, source, env=env)
    assert run.rc == 0 and "WARNING" not in run.stderr, run
    assert vanish not in _libvirt_domains(lab, "hv1"), "the trap did not fire"
    assert keep in run.hosts("vms") and vanish not in run.hosts("vms")


def test_names_taken_twice_filters_and_constructed_groups(lab, tmp_path, domains):
    twin = "inv-twin-" + uuid.uuid4().hex[:6]
    domains("hv1", twin)
    domains("hv3", twin)
    source, env = _source(lab, tmp_path)

    run = run_inventory(tmp_path, source, env=env)
    assert run.rc == 0 and run.hosts("vms").count(twin) == 1
    assert "host name %s of the vm %s of provider hv3 is taken by the vm %s of provider hv1" % (
        twin, twin, twin) in run.stderr

    both = run_inventory(tmp_path, dict(source, hostnames=[
        "resilient_virt_provider ~ '_' ~ resilient_virt_name"]), env=env)
    assert both.rc == 0 and {"hv1_" + twin, "hv3_" + twin} <= set(both.hosts("vms")), both

    strict = run_inventory(tmp_path, dict(source, strict=True), env=env)
    assert strict.rc != 0 and "is taken by" in strict.output

    shaped = run_inventory(tmp_path, dict(
        source, filters=["resilient_virt_kind == 'vm'", "resilient_virt_provider_type == 'libvirt'"],
        keyed_groups=[{"key": "resilient_virt_power_state", "prefix": "is"}],
        compose={"owner_zone": "resilient_virt_zone | upper"}, group_prefix="rv_"), env=env)
    assert shaped.rc == 0, shaped
    assert twin in shaped.hosts("is_stopped") and not shaped.hosts("rv_hypervisors")
    assert all(shaped.hostvars[h][P + "provider_type"] == "libvirt" for h in shaped.hostvars)
    assert shaped.hostvars[twin]["owner_zone"] == "AZ1"
    assert twin in shaped.hosts("rv_hypervisor_hv1")


@pytest.mark.parametrize("change, message", [
    ({"providers": {"bad": {"type": "nosuch"}}}, "providers.bad: InvalidSpec"),
    ({"vm_filters": {"colour": "blue"}}, "vm_filters.colour: unknown filter"),
    ({"timeout": "soon"}, "timeout"),
    ({"concurrency": 0}, "concurrency: 0"),
    ({"resilience": {"max_attempts": 0}}, "max_attempts"),
])
def test_configuration_errors_fail_the_source_with_the_field(lab, tmp_path, change, message):
    source, env = _source(lab, tmp_path)
    source.update(change)
    run = run_inventory(tmp_path, source, env=env)
    assert run.rc != 0 and message in run.output, run
    assert "Traceback" not in run.output


def test_only_files_named_hypervisors_yml_are_read(lab, tmp_path):
    source, env = _source(lab, tmp_path)
    path = tmp_path / "lab.yml"
    path.write_text(yaml.safe_dump(dict(source, plugin="resilient.virt.hypervisors")))
    import subprocess

    proc = subprocess.run(["ansible-inventory", "-i", str(path), "--list"], capture_output=True,
                          text=True, env=dict(os.environ, ANSIBLE_INVENTORY_ENABLED="auto",
                                              ANSIBLE_INVENTORY_UNPARSED_FAILED="1", **env),
                          check=False, timeout=60)
    assert proc.returncode != 0 and "hypervisors" not in proc.stdout


def test_the_lab_writes_a_source_without_secrets(lab, vsphere):
    import subprocess

    with open(lab.source_file) as handle:
        text = handle.read()
    assert vsphere["password"] not in text
    assert os.stat(lab.source_file).st_mode & 0o077 == 0
    proc = subprocess.run(["ansible-inventory", "-i", lab.source_file, "--graph"],
                          capture_output=True, text=True, check=False, timeout=120,
                          env=dict(os.environ, ANSIBLE_INVENTORY_UNPARSED_FAILED="1"))
    assert proc.returncode == 0, proc.stderr
    assert "|--hv1" in proc.stdout and "|--DC0_C0_H0" in proc.stdout and "@zone_az1" in proc.stdout


def test_a_frozen_store_under_the_open_policy_leaves_the_providers_their_timeout(lab, tmp_path, start_redis):
    """store_failure: open, a frozen Redis and timeout: 4s: every hypervisor is listed, with one
    warning naming the store; the store took at most its share of the time."""
    server = start_redis()
    url = "redis://:%s@127.0.0.1:%d/0" % (server.password, server.port)
    source, env = _source(lab, tmp_path, state_store=url, store_failure="open", timeout="4s",
                          cache=False)
    server.freeze()
    try:
        run = run_inventory(tmp_path, source, env=env)
    finally:
        server.thaw()
    assert run.rc == 0 and server.password not in run.output, run
    assert {"hv1", "hv2", "hv3", "DC0_C0_H0"} <= set(run.hosts("hypervisors")), run  # was: no host
    assert "gave no answer" not in run.stderr, run.stderr  # nor "I/O operation on closed file"
    assert run.stderr.count("(store_failure=open)") == 1, run.stderr
    assert run.wall < 4.0 + MARGIN, run
