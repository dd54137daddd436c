"""The vsphere provider against a real vSphere API simulator (lab/vcsim, govmomi's simulator).

The simulator serves the SOAP API on 127.0.0.1 (HTTPS with a certificate of the lab CA, the
settings' ``ca_path``) with one datacenter, two clusters (DC0_C0, DC0_C1: the availability
zones), three hosts per cluster and two VMs per cluster. The binary
is built once (lab/run/vcsim/bin) and each simulator used here runs in a temporary directory.
Errors are classified as GuardedProvider does: the provider's classify_error, then the
standard classifier. Clones made by the vm module run through ansible-playbook against the
lab's simulator (the ``vsphere`` fixture), read back with a pyVmomi session of the test's own.
"""
import importlib
import os
import shutil
import socket
import ssl
import time
import uuid

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotFound, NotSupported, Timeout, Unauthorized, Unavailable, VirtError,
    classify)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import (
    VSphereProvider)

GOVMOMI = "/usr/share/gocode/src/github.com/vmware/govmomi/simulator"

if shutil.which("go") is None or not os.path.isdir(GOVMOMI):
    # A missing simulator is a broken machine, not a reason to pass: `make deps` installs both.
    pytest.fail("needs golang-go and golang-github-vmware-govmomi-dev to build the simulator "
                "(run `make deps`)", pytrace=False)


vcsim = importlib.import_module("vcsim")  # lab/ is on sys.path (conftest.py)
BIN_DIR = os.path.join(os.environ.get("RESILIENT_VIRT_LAB_DIR") or vcsim.DEFAULT_RUN_DIR,
                       "vcsim", "bin")
ZONES = {"DC0_C0", "DC0_C1"}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """A simulator for the whole module: (run_dir, provider settings)."""
    run_dir = str(tmp_path_factory.mktemp("vcsim"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR)
    yield run_dir, settings
    vcsim.stop(run_dir)


@pytest.fixture
def own_sim(tmp_path):
    """A simulator this test may stop or freeze."""
    run_dir = str(tmp_path)
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=1)
    yield run_dir, settings
    vcsim.stop(run_dir)


@pytest.fixture
def provider(sim):
    p = VSphereProvider(dict(sim[1], timeout="10s", task_timeout="30s"))
    yield p
    p.close()


def fails(fn, *args, **kwargs):
    """The classified error raised by ``fn`` (fails the test when it succeeds)."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - classified below, as GuardedProvider does
        owner = getattr(fn, "__self__", None)
        return classify(exc, (owner.classify_error,) if owner is not None else ())
    pytest.fail("%s succeeded" % getattr(fn, "__name__", fn))


def other_host(provider, vm):
    """A host of the other availability zone than ``vm``'s."""
    return next(h["name"] for h in provider.list_hypervisors() if h["az"] != vm["az"])


# -- configuration --------------------------------------------------------------------------
def test_config_errors_name_the_field():
    err = fails(VSphereProvider, {"type": "vsphere", "host": "127.0.0.1", "protocol": "ftp",
                                  "username": "u", "password": "p", "port": 0})
    assert isinstance(err, InvalidSpec)
    assert "provider.protocol" in err.message
    err = fails(VSphereProvider, {"type": "vsphere", "host": "127.0.0.1", "username": "u"})
    assert isinstance(err, InvalidSpec) and "provider.password" in err.message
    err = fails(VSphereProvider, {"type": "vsphere", "host": "h", "username": "u",
                                  "password": "p", "port": 70000})
    assert isinstance(err, InvalidSpec) and "provider.port" in err.message


def test_tls_on_by_default_and_warnings():
    base = {"type": "vsphere", "host": "vc.example", "username": "u", "password": "p"}
    secure = VSphereProvider(base)
    assert secure.config["protocol"] == "https" and secure.config["validate_certs"] is True
    assert secure.warnings == []
    insecure = VSphereProvider(dict(base, validate_certs=False))
    assert len(insecure.warnings) == 1 and "validate_certs" in insecure.warnings[0]


# -- reads ------------------------------------------------------------------------------------
def test_validate(provider, sim):
    assert sim[1]["protocol"] == "https" and "ca_path" in sim[1]  # the lab CA, verified
    info = provider.validate()
    assert info["api_type"] == "VirtualCenter"
    assert info["endpoint"] == "https://127.0.0.1:%d" % sim[1]["port"]
    assert info["warnings"] == []


def test_plain_http_works_and_is_warned(tmp_path):
    run_dir = str(tmp_path)
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, tls=False, vms=0)
    try:
        assert settings["protocol"] == "http" and "ca_path" not in settings
        p = VSphereProvider(settings)
        info = p.validate()
        p.close()
    finally:
        vcsim.stop(run_dir)
    assert info["endpoint"] == "http://127.0.0.1:%d" % settings["port"]
    assert any("provider.protocol is http" in w for w in info["warnings"])


def _verified_handshake(settings):
    """The server certificate's subject alternative names, by a TLS handshake of the test's own
    that verifies the certificate with ``ca_path``."""
    context = ssl.create_default_context(cafile=settings["ca_path"])
    raw = socket.create_connection((settings["host"], settings["port"]), timeout=5)
    with context.wrap_socket(raw, server_hostname=settings["host"]) as tls:
        return tls.getpeercert()["subjectAltName"]


def test_a_running_simulator_is_restarted_for_another_tls_and_reused_for_the_same(tmp_path):
    run_dir = str(tmp_path)
    try:
        plain = vcsim.start(run_dir, bin_dir=BIN_DIR, tls=False, vms=0)
        plain_pid = vcsim.status(run_dir)["pid"]
        secure = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=0)  # the default: the lab CA
        secure_pid = vcsim.status(run_dir)["pid"]
        assert secure_pid != plain_pid and secure["port"] == plain["port"]
        assert secure["protocol"] == "https" and "validate_certs" not in secure
        assert ("IP Address", "127.0.0.1") in _verified_handshake(secure)
        assert vcsim.start(run_dir, bin_dir=BIN_DIR, vms=0) == secure
        assert vcsim.status(run_dir)["pid"] == secure_pid  # the same one, reused
    finally:
        vcsim.stop(run_dir)


def test_bad_password_is_unauthorized(sim):
    p = VSphereProvider(dict(sim[1], password="not-the-password"))
    err = fails(p.validate)
    assert isinstance(err, Unauthorized) and not err.retryable
    assert "not-the-password" not in err.message


def test_unknown_datacenter_names_the_option(sim):
    p = VSphereProvider(dict(sim[1], datacenter="nope"))
    err = fails(p.validate)
    assert isinstance(err, InvalidSpec) and "provider.datacenter" in err.message
    assert "DC0" in err.message
    assert VSphereProvider(dict(sim[1], datacenter="DC0")).list_vms()


def test_list_hypervisors(provider):
    hosts = provider.list_hypervisors()
    assert len(hosts) == 6
    assert set(h["az"] for h in hosts) == ZONES
    for zone in ZONES:
        assert len([h for h in hosts if h["az"] == zone]) == 3
    for host in hosts:
        assert host["state"] == "connected"
        assert host["cpu"] == 16 and host["memory_mb"] == 128 * 1024
        assert 0 < host["used_cpu"] < host["cpu"]
        assert 0 < host["used_memory_mb"] < host["memory_mb"]
        assert "ssd" in host["traits"]
    assert len([h for h in hosts if "gpu" in h["traits"]]) == 2


def test_list_vms_and_filters(provider):
    vms = provider.list_vms()
    names = [vm["name"] for vm in vms]
    assert {"DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1", "DC0_C1_RP0_VM0", "DC0_C1_RP0_VM1"} <= set(names)
    for vm in vms:
        assert vm["provider_key"] == provider.key and vm["az"] in ZONES and vm["uuid"]
        assert vm["state"] in ("running", "stopped", "suspended")
        assert vm["autostart"] is None and vm["restart_required"] is False
    in_c1 = provider.list_vms({"az": "DC0_C1"})
    assert in_c1 and all(vm["az"] == "DC0_C1" for vm in in_c1)
    assert [vm["name"] for vm in provider.list_vms({"name": "DC0_C0_*VM1"})] == ["DC0_C0_RP0_VM1"]
    err = fails(provider.list_vms, {"colour": "red"})
    assert isinstance(err, InvalidSpec) and "filters.colour" in err.message


def test_describe(provider):
    vm = provider.describe("DC0_C0_RP0_VM0")
    assert vm["az"] == "DC0_C0" and vm["hypervisor"].startswith("DC0_C0_H")
    assert vm["disks"] and vm["disks"][0]["datastore"] == "LocalDS_0"
    assert vm["interfaces"] and vm["interfaces"][0]["network"] == "DC0_DVPG0"


def test_describe_missing_is_not_found(provider):
    err = fails(provider.describe, "no-such-vm")
    assert isinstance(err, NotFound) and "no-such-vm" in err.message


# -- life cycle ---------------------------------------------------------------------------------
def test_create_power_reconfigure_migrate_delete(provider):
    spec = {"name": "it-lifecycle", "vcpus": 2, "memory_mb": 512, "az": "DC0_C1",
            "disks": [{"size_gb": 2}], "metadata": {"owner": "tests", "tier": 1},
            "interfaces": [{"network": "DC0_DVPG0"}, {"network": "VM Network", "model": "e1000"}]}
    vm = provider.create(spec)
    try:
        assert (vm["name"], vm["state"], vm["vcpus"], vm["memory_mb"]) == (
            "it-lifecycle", "stopped", 2, 512)
        assert vm["az"] == "DC0_C1" and vm["hypervisor"].startswith("DC0_C1_")
        assert vm["metadata"] == {"owner": "tests", "tier": "1"}
        assert [d["size_gb"] for d in vm["disks"]] == [2.0]
        assert [(n["network"], n["model"]) for n in vm["interfaces"]] == [
            ("DC0_DVPG0", "vmxnet3"), ("VM Network", "e1000")]
        assert provider.describe("it-lifecycle")["uuid"] == vm["uuid"]

        assert provider.power("it-lifecycle", "on")["state"] == "running"
        assert provider.power("it-lifecycle", "on")["state"] == "running"  # already on: no-op
        assert provider.power("it-lifecycle", "reboot")["state"] == "running"

        err = fails(provider.reconfigure, "it-lifecycle", vcpus=4, memory_mb=1024)
        assert isinstance(err, Conflict) and "power it off" in err.message  # no hot plug
        assert provider.power("it-lifecycle", "off")["state"] == "stopped"
        changed = provider.reconfigure("it-lifecycle", vcpus=4, memory_mb=1024)
        assert (changed["vcpus"], changed["memory_mb"]) == (4, 1024)
        assert provider.power("it-lifecycle", "on")["state"] == "running"

        target = other_host(provider, vm)
        moved = provider.migrate("it-lifecycle", target)
        assert moved["hypervisor"] == target and moved["az"] == "DC0_C0"
        assert provider.describe("it-lifecycle")["hypervisor"] == target

        assert provider.power("it-lifecycle", "shutdown", timeout=10)["state"] == "stopped"
        err = fails(provider.power, "it-lifecycle", "reboot")
        assert isinstance(err, Conflict)
        assert provider.power("it-lifecycle", "on")["state"] == "running"
    finally:
        provider.delete("it-lifecycle")  # powered on: delete powers it off first
    assert isinstance(fails(provider.describe, "it-lifecycle"), NotFound)
    assert isinstance(fails(provider.delete, "it-lifecycle"), NotFound)


def test_create_places_on_named_host(provider):
    vm = provider.create({"name": "it-placed", "vcpus": 1, "memory_mb": 64,
                          "hypervisor": "DC0_C0_H2"})
    try:
        assert vm["hypervisor"] == "DC0_C0_H2" and vm["az"] == "DC0_C0"
    finally:
        provider.delete("it-placed")


def test_duplicate_create_is_conflict(provider):
    err = fails(provider.create, {"name": "DC0_C0_RP0_VM0", "vcpus": 1, "memory_mb": 64})
    assert isinstance(err, Conflict) and "already exists" in err.message


def test_invalid_spec_lists_every_field(provider):
    err = fails(provider.create, {"name": "bad", "vcpus": 0, "memory_mb": 30,
                                  "disks": [{"size_gb": 0, "bus": "scsi"}], "colour": "red"})
    assert isinstance(err, InvalidSpec)
    paths = sorted(e["path"] for e in err.details["errors"])
    assert paths == ["colour", "disks[0].bus", "disks[0].size_gb", "memory_mb", "vcpus"]
    err = fails(provider.create, {"name": "bad", "vcpus": 1, "memory_mb": 64, "az": "nowhere"})
    assert isinstance(err, InvalidSpec) and "DC0_C0" in err.message
    err = fails(provider.create, {"name": "bad", "vcpus": 1, "memory_mb": 64,
                                  "interfaces": [{"network": "nope"}]})
    assert isinstance(err, InvalidSpec) and err.details["errors"][0]["path"] == \
        "interfaces[0].network"
    err = fails(provider.create, {"name": "bad", "vcpus": 1, "memory_mb": 64, "boot": ["hd"]})
    assert isinstance(err, NotSupported) and "boot" in err.message
    err = fails(provider.reconfigure, "DC0_C0_RP0_VM0", memory_mb=1023)
    assert isinstance(err, InvalidSpec) and "memory_mb" in err.message
    err = fails(provider.power, "DC0_C0_RP0_VM0", "explode")
    assert isinstance(err, InvalidSpec)


def test_migrate_to_unknown_host_is_invalid(provider):
    err = fails(provider.migrate, "DC0_C0_RP0_VM1", "no-such-host")
    assert isinstance(err, InvalidSpec) and "DC0_C1_H0" in err.message


def test_task_status(provider):
    from pyVmomi import vim

    session = provider._connection()  # a task started outside the provider, by raw pyVmomi
    vm = provider.create({"name": "it-task", "vcpus": 1, "memory_mb": 64})
    try:
        ref = session.si.content.searchIndex.FindByUuid(None, vm["uuid"], True, True)
        assert isinstance(ref, vim.VirtualMachine)
        ok = ref.PowerOnVM_Task()
        deadline = time.monotonic() + 10
        while provider.task_status(ok._moId)["state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert provider.task_status(ok._moId)["state"] == "success"
        bad = ref.PowerOnVM_Task()  # already on: the task fails
        while provider.task_status(bad._moId)["state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        status = provider.task_status(bad._moId)
        assert status["state"] == "error" and status["error"]["type"] == "Conflict"
    finally:
        provider.delete("it-task")
    assert isinstance(fails(provider.task_status, "task-999999"), NotFound)


def test_lost_session_is_unavailable_then_logs_in_again(provider):
    provider.describe("DC0_C0_RP0_VM0")
    session = provider._connection()
    session.content.sessionManager.Logout()  # the server forgets the session and its views
    err = fails(provider.describe, "DC0_C0_RP0_VM0")
    assert isinstance(err, Unavailable) and "session" in err.message
    assert "session[" not in err.message  # view ids carry the session key
    assert provider.describe("DC0_C0_RP0_VM0")["name"] == "DC0_C0_RP0_VM0"


def test_through_registry_and_policy(own_sim, tmp_path):
    """The built-in registry finds the backend; failures count on the circuit breaker."""
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
    from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
        open_provider)
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    run_dir, settings = own_sim
    resolved = resolve_settings({"retry_preset": "none", "failure_threshold": 2}, environ={})
    store = open_store("sqlite:///%s" % (tmp_path / "state.db"), environ={})
    guarded = open_provider(dict(settings, timeout="5s"), resolved, store, environ={})
    try:
        assert guarded.key == "vsphere:vcsim"
        vm = guarded.create({"name": "it-guarded", "vcpus": 1, "memory_mb": 64})
        assert guarded.power(vm["name"], "on")["state"] == "running"
        guarded.delete(vm["name"])
        vcsim.stop(run_dir)
        for _dummy in range(2):
            with pytest.raises(Unavailable):
                guarded.list_vms()
        assert guarded.policy.breaker.snapshot()["state"] == "open"
    finally:
        guarded.close()


# -- outages ------------------------------------------------------------------------------------
def test_stopped_simulator_is_unavailable_then_recovers(own_sim):
    run_dir, settings = own_sim
    p = VSphereProvider(dict(settings, timeout="5s"))
    assert len(p.list_hypervisors()) == 6
    vcsim.stop(run_dir)
    err = fails(p.list_hypervisors)
    assert isinstance(err, Unavailable) and err.retryable
    fresh = VSphereProvider(dict(settings, timeout="5s"))
    assert isinstance(fails(fresh.validate), Unavailable)
    assert vcsim.start(run_dir, bin_dir=BIN_DIR, vms=1)["port"] == settings["port"]
    assert len(fresh.list_hypervisors()) == 6
    p.close()
    fresh.close()


def test_hung_simulator_times_out_and_close_returns(own_sim):
    run_dir, settings = own_sim
    p = VSphereProvider(dict(settings, timeout="1s"))
    p.validate()
    vcsim.pause(run_dir)
    try:
        started = time.monotonic()
        err = fails(p.describe, "DC0_C0_RP0_VM0")
        assert isinstance(err, Timeout) and err.retryable
        assert time.monotonic() - started < 1 + 2
        started = time.monotonic()
        p.close()
        assert time.monotonic() - started < 1 + 2
        fresh = VSphereProvider(dict(settings, timeout="1s"))
        started = time.monotonic()
        assert isinstance(fails(fresh.validate), Timeout)  # login, bounded too
        assert time.monotonic() - started < 1 + 2
    finally:
        vcsim.resume(run_dir)


# -- secrets ------------------------------------------------------------------------------------
def test_password_never_shown(sim, tmp_path):
    settings = sim[1]
    wrong = "Wrong-Pa55word-xyz"
    errors = []
    p = VSphereProvider(dict(settings, timeout="5s"))
    errors.append(fails(VSphereProvider(dict(settings, password=wrong)).validate))
    errors.append(fails(p.describe, "no-such-vm"))
    errors.append(fails(p.create, {"name": "DC0_C0_RP0_VM0", "vcpus": 1, "memory_mb": 64}))
    errors.append(fails(p.create, {"name": "x", "vcpus": "many", "memory_mb": 64}))
    errors.append(fails(p.task_status, "task-424242"))
    errors.append(fails(VSphereProvider, dict(settings, password=wrong, port="x")))
    run_dir = str(tmp_path)
    down = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=0)
    vcsim.stop(run_dir)
    errors.append(fails(VSphereProvider(dict(down, timeout="5s")).validate))
    assert all(isinstance(e, VirtError) for e in errors)
    secrets = (settings["password"], wrong, down["password"])
    shown = [repr(p), str(p.safe_config()), str(p.warnings)]
    shown += [repr(e) for e in errors] + [str(e.to_dict()) for e in errors]
    for text in shown:
        for secret in secrets:
            assert secret not in text


# -- clones through the vm module ---------------------------------------------------------------
def test_a_clone_made_by_the_vm_module_is_reported_as_a_create(vsphere, tmp_path):
    """A clone that takes everything from its source (no hardware to change afterwards) is still
    the task's change: ``changed`` and ``actions`` say so, in check mode too; a rerun changes
    nothing. The oracle is a pyVmomi session of the test's own on the lab's simulator."""
    from playbook_runner import play, run_playbook
    from simulator_session import Simulator

    mark = uuid.uuid4().hex[:6]
    plain, custom, running = ("clone-%s-%s" % (kind, mark) for kind in ("plain", "custom", "run"))
    source = "DC0_C0_RP0_VM1"
    tasks = [
        {"name": plain, "resilient.virt.vm": {"name": plain, "template": source}},
        {"name": custom, "resilient.virt.vm": {"name": custom, "template": source,
                                               "customization": {"hostname": custom}}},
        {"name": running, "resilient.virt.vm": {"name": running, "template": source,
                                                "state": "running"}},
    ]
    defaults = {"provider": dict(vsphere, name="vcsim-clone"),
                "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    oracle = Simulator(vsphere)

    def run(step, check=False):
        done = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], check=check,
                            name=step)
        assert done.rc == 0, done
        return dict((name, done.task(name)) for name in (plain, custom, running))

    wanted = {plain: ["create"], custom: ["create"], running: ["create", "start"]}
    try:
        checked = run("check", check=True)
        for name, actions in wanted.items():
            assert checked[name]["changed"] is True and checked[name]["actions"] == actions, \
                checked[name]
            assert oracle.vm(name) is None  # check mode made nothing

        made = run("clone")
        for name, actions in wanted.items():
            assert made[name]["changed"] is True and made[name]["actions"] == actions, made[name]
            ref = oracle.vm(name)
            assert ref is not None and not ref.config.template, name
            assert made[name]["vm"]["uuid"] == ref.config.instanceUuid
        assert str(oracle.vm(plain).runtime.powerState) == "poweredOff"
        assert oracle.vm(custom).config.tools.pendingCustomization
        assert str(oracle.vm(running).runtime.powerState) == "poweredOn"

        again = run("again")
        for name in wanted:
            assert again[name]["changed"] is False and again[name]["actions"] == [], again[name]
            assert len(oracle.vms_named(name)) == 1  # not cloned twice
    finally:
        for name in wanted:
            oracle.remove(name)
        oracle.close()
