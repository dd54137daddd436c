"""A create whose first attempt times out while the provider still works on it ends with one VM.

Through a real ``ansible-playbook`` run of ``resilient.virt.vm`` (state running), on a lab
hypervisor and on the vSphere simulator. A test plugin (freeze_plugin.py) freezes the provider's
process (SIGSTOP) as the first create attempt sends its create request, lets the request leave
only once every thread of the provider has stopped, and thaws it (SIGCONT) 5 s later; the
attempt's time limit is 3 s and the wait before the retry at least 4 s. So the first attempt
times out while its create is pending, the create completes in the abandoned attempt once the
provider thaws, and the retry must see that VM instead of creating another. The plugin records
the request it held: each test first checks that it was the create request, and that the
first create attempt timed out on it.

Proof, independent of the collection's own account: the observer plugin records which attempts
called the backend (exactly one create) and every attempt's outcome (timeout, then ok); the
provider itself, read through libvirt-python or a pyVmomi session of the test's own, holds one
VM of that name, with the UUID the task reports, running.
"""
import contextlib
import importlib
import os
import signal
import uuid

import libvirt
from lab_domains import remove_domain
from observer_plugin import ATTEMPTS_ENV, OUTCOMES_ENV, read_attempts
from playbook_runner import play, run_playbook, plugin_env
from simulator_session import Simulator

from freeze_plugin import FREEZE_ENV, MARKER_ENV, read_freeze

ATTEMPT_LIMIT = 3.0   # timeout_mutating
RETRY_WAIT = 4.0      # base_delay: the retry starts at least 7 s after the first attempt
THAW_AFTER = 5.0      # between the two
# the requests that create the VM, on which the freeze must land
LIBVIRT_DEFINES = ("defineXMLFlags", "defineXML")
VSPHERE_CREATES = ("CreateVM_Task",)
RESILIENCE = {"timeout_mutating": "%gs" % ATTEMPT_LIMIT, "base_delay": "%gs" % RETRY_WAIT,
              "max_attempts": 3, "failure_threshold": 10}


# The provider stays frozen past the start of the retries (thawed 9 s after the first attempt,
# retries from 4 s on): each retry waits for the first attempt's create, none sends another.
LONG_THAW_AFTER = 9.0
LONG_RESILIENCE = {"timeout_mutating": "%gs" % ATTEMPT_LIMIT, "base_delay": "1s",
                   "max_attempts": 5, "failure_threshold": 10}


def _run_with_freeze(tmp_path, provider, name, pid, thaw_after=THAW_AFTER, resilience=None,
                     extra=None):
    attempts, outcomes = str(tmp_path / "attempts.jsonl"), str(tmp_path / "outcomes.jsonl")
    env = dict(plugin_env("observer_plugin", "freeze_plugin"), **{
        ATTEMPTS_ENV: attempts, OUTCOMES_ENV: outcomes,
        FREEZE_ENV: "%d:%g" % (pid, thaw_after), MARKER_ENV: str(tmp_path / "frozen-once"),
    })
    task = {"name": "create", "resilient.virt.vm": dict({
        "name": name, "vcpus": 1, "memory_mb": 64, "state": "running",
        "resilience": resilience or RESILIENCE}, **(extra or {}))}
    store = "sqlite:///%s" % (tmp_path / "state.db")
    try:
        run = run_playbook(tmp_path, [play([task], module_defaults={
            "provider": provider, "state_store": store})], env=env, timeout=300)
    finally:
        freeze = read_freeze(env[MARKER_ENV])
        if freeze is not None:  # its late SIGCONT must not cut short a later test's freeze
            with contextlib.suppress(ProcessLookupError):
                os.killpg(freeze["thaw_pid"], signal.SIGKILL)
        os.kill(pid, signal.SIGCONT)  # thawed whatever happened
    return run, read_attempts(attempts), read_attempts(outcomes), freeze


def _check_froze_the_create(freeze, outcomes, requests):
    """The freeze held the first create attempt's request (one of ``requests``)."""
    assert freeze is not None, "the provider was never frozen"
    assert freeze["stopped"], "pid %d did not stop within the plugin's wait" % freeze["pid"]
    assert freeze["operation"] == "create" and freeze["request"] in requests, (
        "the freeze held %s in a %s attempt, not the create request" % (
            freeze["request"], freeze["operation"]))
    first = [o for o in outcomes if o["operation"] == "create"][:1]
    assert first and first[0]["outcome"] == "timeout", (
        "the provider was frozen on %s, yet the first create attempt did not time out: %s" % (
            freeze["request"], first))


def _check(run, attempts, outcomes, freeze, requests):
    _check_froze_the_create(freeze, outcomes, requests)
    assert run.rc == 0, run
    created = run.task("create")
    assert created["changed"] is True and created["actions"] == ["create", "start"], created
    assert created["vm"]["state"] == "running", created
    calls = [a["operation"] for a in attempts]
    assert calls.count("create") == 1, calls
    create_outcomes = [o["outcome"] for o in outcomes if o["operation"] == "create"]
    assert create_outcomes == ["timeout", "ok"], outcomes
    timed_out = [o for o in outcomes if o["outcome"] == "timeout"][0]
    assert ATTEMPT_LIMIT <= timed_out["duration"] < ATTEMPT_LIMIT + 2, timed_out
    print("\ncreate: attempt 1 timed out after %.1f s with the provider frozen, the retry found "
          "the VM (%d create call in all), task %.1f s" % (
              timed_out["duration"], calls.count("create"), created.duration))
    return created["vm"]["uuid"]


def test_libvirt(lab, tmp_path):
    hv = lab.hypervisor("hv2")
    name = "retried-%s" % uuid.uuid4().hex[:6]
    provider = {"type": "libvirt", "name": "hv2-frozen", "uri": hv.uri, "domain_type": "qemu"}
    conn = libvirt.open(hv.uri)
    try:
        run, attempts, outcomes, freeze = _run_with_freeze(tmp_path, provider, name,
                                                           hv.daemon_pid("libvirtd"))
        try:
            reported = _check(run, attempts, outcomes, freeze, LIBVIRT_DEFINES)
            mine = [dom for dom in conn.listAllDomains(0) if dom.name() == name]
            assert len(mine) == 1
            assert mine[0].UUIDString() == reported and mine[0].isActive()
        finally:
            remove_domain(hv.uri, name)
    finally:
        conn.close()


def test_vsphere(lab, vsphere, tmp_path):
    vcsim = importlib.import_module("vcsim")  # lab/ is on sys.path (conftest.py)
    name = "retried-%s" % uuid.uuid4().hex[:6]
    sim = Simulator(vsphere)
    try:
        run, attempts, outcomes, freeze = _run_with_freeze(
            tmp_path, dict(vsphere, name="vcsim-frozen"), name, vcsim.status(lab.run_dir)["pid"])
        reported = _check(run, attempts, outcomes, freeze, VSPHERE_CREATES)
        mine = sim.vms_named(name)
        assert len(mine) == 1
        assert reported in (mine[0].config.instanceUuid, mine[0].config.uuid)
        assert mine[0].runtime.powerState == "poweredOn"
    finally:
        sim.remove(name)
        sim.close()


def _check_long(run, attempts, outcomes, freeze, requests):
    """The freeze outlasted the first retries: they waited, the create was sent once."""
    _check_froze_the_create(freeze, outcomes, requests)
    assert run.rc == 0, run
    created = run.task("create")
    assert created["changed"] is True and created["actions"] == ["create", "start"], created
    calls = [a["operation"] for a in attempts]
    assert calls.count("create") == 1, calls
    create_outcomes = [o["outcome"] for o in outcomes if o["operation"] == "create"]
    assert create_outcomes[0] == "timeout" and create_outcomes[-1] == "ok", outcomes
    assert len(create_outcomes) >= 3, outcomes  # at least one retry timed out waiting
    return created["vm"]["uuid"]


def test_libvirt_frozen_past_the_retries_defines_and_copies_once(lab, tmp_path):
    """With a disk (a volume made before the define), frozen while the define is pending."""
    hv = lab.hypervisor("hv2")
    name = "retried-%s" % uuid.uuid4().hex[:6]
    provider = {"type": "libvirt", "name": "hv2-frozen-long", "uri": hv.uri, "domain_type": "qemu"}
    conn = libvirt.open(hv.uri)
    try:
        run, attempts, outcomes, freeze = _run_with_freeze(
            tmp_path, provider, name, hv.daemon_pid("libvirtd"), LONG_THAW_AFTER,
            LONG_RESILIENCE, {"disks": [{"size_gb": 1}]})
        try:
            reported = _check_long(run, attempts, outcomes, freeze, LIBVIRT_DEFINES)
            mine = [dom for dom in conn.listAllDomains(0) if dom.name() == name]
            assert len(mine) == 1 and mine[0].UUIDString() == reported and mine[0].isActive()
            volumes = [vol.name() for pool in conn.listAllStoragePools(0) if pool.isActive()
                       for vol in pool.listAllVolumes(0) if vol.name().startswith(name + "-")]
            assert len(volumes) == 1, volumes
        finally:
            remove_domain(hv.uri, name)
            for pool in conn.listAllStoragePools(0):
                if pool.isActive():
                    for vol in pool.listAllVolumes(0):
                        if vol.name().startswith(name + "-"):
                            vol.delete(0)
    finally:
        conn.close()


def test_vsphere_frozen_past_the_retries_creates_once(lab, vsphere, tmp_path):
    vcsim = importlib.import_module("vcsim")
    name = "retried-%s" % uuid.uuid4().hex[:6]
    sim = Simulator(vsphere)
    try:
        run, attempts, outcomes, freeze = _run_with_freeze(
            tmp_path, dict(vsphere, name="vcsim-frozen-long"), name,
            vcsim.status(lab.run_dir)["pid"], LONG_THAW_AFTER, LONG_RESILIENCE)
        reported = _check_long(run, attempts, outcomes, freeze, VSPHERE_CREATES)
        mine = sim.vms_named(name)
        assert len(mine) == 1, "%d VMs named %s" % (len(mine), name)
        assert reported in (mine[0].config.instanceUuid, mine[0].config.uuid)
    finally:
        sim.remove(name)
        sim.close()
