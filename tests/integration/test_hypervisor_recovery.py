"""Hands-off recovery on a lab of three hypervisors of the test's own: the shipped rulebook
resilient.virt.hypervisor_recovery under a real ansible-rulebook, the playbook
resilient.virt.recover_hypervisor by hand, and the lab's power control as the fence agent.

Three small diskless VMs on hv1 hold failover reservations on hv2 and hv3. hv1's libvirtd is
killed (its QEMU processes live on, as on a hypervisor whose daemon died): the rulebook's
playbook must confirm it, fence it (every process of hv1 killed), start each VM on the host of
its reservation, highest priority first, and plan the reservations again without hv1. The
oracles are the test's own: libvirt-python connections to hv2 and hv3, /proc for the QEMU
processes and their start times, and the state store read with sqlite3.
"""
import glob
import json
import os
import subprocess
import time

import libvirt
import pytest
import waiting
import yaml
from playbook_runner import local_inventory, run_playbook, store_records

from paths import COLLECTIONS

pytestmark = pytest.mark.lab

LAB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lab")
JAVA_HOMES = sorted(glob.glob("/usr/lib/jvm/java-17-openjdk-*"))  # openjdk-17-jre-headless
WAIT = 300.0  # seconds for the whole recovery: ansible-playbook's start is slow on a loaded machine
PLAYBOOK = [{"import_playbook": "resilient.virt.recover_hypervisor"}]
CREATOR = "recovery"
# name, memory (MiB): largest first would move them in the reverse of their priority order
VMS = [("rec-db-1", 64), ("rec-app-1", 96), ("rec-web-1", 128)]
PRIORITIES = [{"match": "rec-db-*", "priority": 100}, {"match": "rec-app-*", "priority": 50}]
ORDER = ["rec-db-1", "rec-app-1", "rec-web-1"]
FO = "resilient.virt.failover_reservation"
ROLE = "resilient.virt.hypervisor_recovery : "  # how the JSON callback names the role's tasks
FENCE_TASK = ROLE + "Confirm it stays unreachable, and fence it"
EVACUATE_TASK = ROLE + "Move its VMs onto their failover reservations, highest priority first"
PLAN_TASK = ROLE + "Plan the reservations again for the fleet that is left"


@pytest.fixture(scope="module")
def recovery_lab(tmp_path_factory, lab_module):
    """hv1..hv3 of a lab of its own (hv1 is killed and fenced here, which no other test may
    see); taken down at the end."""
    the_lab = lab_module.Lab(str(tmp_path_factory.mktemp("recoverylab")))
    the_lab.up(3, vsphere=False, proxmox=False)
    try:
        yield the_lab
    finally:
        the_lab.down()


def recovery_vars(the_lab, lab_module, store_url, **extra):
    """The settings the rulebook and the playbook take (recovery.yml): one zone, so each
    hypervisor's VMs may hold reservations on both others."""
    names = ["hv1", "hv2", "hv3"]
    settings = {
        "recovery_providers": {name: dict(lab_module.provider_config(the_lab.hypervisor(name)), az="lab")
                               for name in names},
        "recovery_state_store": store_url,
        "recovery_fencing_by_hypervisor": {name: {"type": "lab_only_power", "run_dir": the_lab.run_dir}
                                           for name in names},
        "recovery_requirements": {"*": 1},
        "recovery_priorities": PRIORITIES,
        "recovery_creator": CREATOR,
        "recovery_grace": 3,
    }
    settings.update(extra)
    return settings


def lab_power_env():
    """Loads the lab's fence agent into the rulebook's source and every task."""
    return {"RESILIENT_VIRT_PLUGINS": "lab_only_power",
            "PYTHONPATH": os.pathsep.join(filter(None, [LAB_DIR, os.environ.get("PYTHONPATH")]))}


def running_on(uri, name):
    """True when domain ``name`` runs on the libvirtd at ``uri``."""
    conn = libvirt.open(uri)
    try:
        return conn.lookupByName(name).isActive() == 1
    except libvirt.libvirtError:
        return False
    finally:
        conn.close()


def started_at(pid):
    """When process ``pid`` started, in clock ticks since boot (/proc/<pid>/stat field 22)."""
    with open("/proc/%d/stat" % pid) as handle:
        return int(handle.read().rsplit(")", 1)[1].split()[19])


def wait_for(what, check, timeout=WAIT):
    return waiting.wait_for(what, check, timeout, interval=0.2)


def test_a_hypervisor_that_answers_is_not_fenced_and_nothing_moves(recovery_lab, lab_module, tmp_path):
    settings = recovery_vars(recovery_lab, lab_module, "sqlite://%s" % (tmp_path / "state.db"),
                             recovery_hypervisor="hv2", recovery_grace=2, recovery_confirm_interval=1)
    daemon = recovery_lab.hypervisor("hv2").daemon_pid("libvirtd")
    run = run_playbook(tmp_path, PLAYBOOK, extra_vars=settings, env=lab_power_env(), name="flap")
    assert run.rc == 0, run
    fence = run.task(FENCE_TASK)
    assert fence["changed"] is False and fence["hypervisor"]["fenced"] is False
    assert fence["hypervisor"]["reachable"] is True and "flap" in fence["hypervisor"]["reason"]
    assert run.task(EVACUATE_TASK).get("skipped") and run.task(PLAN_TASK).get("skipped")
    assert recovery_lab.hypervisor("hv2").daemon_pid("libvirtd") == daemon  # not powered off
    assert store_records(settings["recovery_state_store"], "fenced") == {}


def test_the_rulebook_fences_a_dead_hypervisor_and_restarts_its_vms_in_priority_order(
        recovery_lab, lab_module, tmp_path):
    assert JAVA_HOMES, "ansible-rulebook needs Java 17: run lab/install-deps.sh"
    store_url = "sqlite://%s" % (tmp_path / "state.db")
    settings = recovery_vars(recovery_lab, lab_module, store_url)
    defaults = {"state_store": store_url, "providers": settings["recovery_providers"]}
    setup = [
        {"name": "create", "loop": [list(vm) for vm in VMS], "resilient.virt.vm": {
            "provider": "hv1", "name": "{{ item[0] }}", "vcpus": 1, "memory_mb": "{{ item[1] }}",
            "metadata": {"flavor": "small"}, "state": "running"}},
        {"name": "reserve", FO: {"all_providers": True, "requirements": {"*": 1}, "creator": CREATOR,
                                 "limit_one_new_per_hypervisor": False}},
    ]
    run = run_playbook(tmp_path, [{"hosts": "localhost", "gather_facts": False, "tasks": setup,
                                   "module_defaults": {"group/resilient.virt.all": defaults}}], name="setup")
    assert run.rc == 0, run
    reserved = run.task("reserve")
    assert reserved["summary"]["vms_covered"] == 3, reserved["vm_status"]
    conn = libvirt.open(recovery_lab.hypervisor("hv1").uri)
    try:
        uuids = {name: conn.lookupByName(name).UUIDString() for name, _memory in VMS}
    finally:
        conn.close()
    target = {name: [r["host"] for r in reserved["reservations"] if uuids[name] in r["allocations"]][0]
              for name in uuids}
    assert set(target.values()) <= {"hv2", "hv3"}

    (tmp_path / "recovery.yml").write_text(yaml.safe_dump(settings))
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(local_inventory()))
    env = dict(os.environ, JAVA_HOME=JAVA_HOMES[0], ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
               TMPDIR=str(tmp_path), **lab_power_env())
    log_path = tmp_path / "rulebook.log"
    with open(log_path, "w") as log:
        rulebook = subprocess.Popen(
            ["ansible-rulebook", "-r", "resilient.virt.hypervisor_recovery", "-i", "inventory.yml",
             "--vars", "recovery.yml"], cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT, env=env)
    hv1 = recovery_lab.hypervisor("hv1")
    try:
        wait_for("the source's first records", lambda: len(store_records(store_url, "hypervisor_events")) == 3)
        guests = hv1.qemu_pids()
        assert len(guests) == 3
        killed_at = time.monotonic()
        recovery_lab.stop("hv1")  # libvirtd dies; its QEMU processes live on until the fence
        uris = {name: recovery_lab.hypervisor(name).uri for name in ("hv2", "hv3")}
        wait_for("every VM running on its reservation's host",
                 lambda: all(running_on(uris[target[name]], name) for name in uuids))
        all_running = time.monotonic() - killed_at
        wait_for("the playbook's end", lambda: "PLAY RECAP" in log_path.read_text())
    finally:
        rulebook.kill()
        rulebook.wait()
    log = log_path.read_text()
    print("from libvirtd killed to every VM running elsewhere: %.1f s" % all_running)
    assert "failed=0" in log, log[-4000:]
    # the old copies are gone: every process of hv1 was killed by the fence
    assert [pid for pid in guests if os.path.exists("/proc/%d" % pid)] == [] and hv1.qemu_pids() == []
    marks = list(store_records(store_url, "fenced").values())
    assert [mark["hypervisor"] for mark in marks] == ["hv1"], marks
    # started highest priority first: the QEMU processes' own start times
    pids = {name: recovery_lab.hypervisor(target[name]).qemu_pid(name) for name in uuids}
    assert sorted(uuids, key=lambda name: started_at(pids[name])) == ORDER
    [line] = [line for line in log.splitlines() if "moved, in this order" in line]
    assert sorted(ORDER, key=line.index) == ORDER, line

    # again by hand, as after a second event: nothing changes, and the plan is without hv1
    again = run_playbook(tmp_path, PLAYBOOK, extra_vars=dict(settings, recovery_hypervisor="hv1"),
                         env=lab_power_env(), name="again")
    assert again.rc == 0, again
    fence, evacuation, plan = again.task(FENCE_TASK), again.task(EVACUATE_TASK), again.task(PLAN_TASK)
    assert fence["changed"] is False and fence["hypervisor"]["fenced"] is True
    assert evacuation["changed"] is False and evacuation["evacuation"]["affected"] == 0
    assert plan["changed"] is False and plan["summary"]["vms_covered"] == 3, plan["vm_status"]
    assert {r["host"] for r in plan["reservations"]} <= {"hv2", "hv3"}
    assert all(r["host"] != target[name] for name in uuids for r in plan["reservations"]
               if uuids[name] in r["allocations"]), json.dumps(plan["reservations"])
    assert all(running_on(uris[target[name]], name) for name in uuids)


def test_a_hypervisor_the_agent_cannot_prove_off_fails_and_nothing_moves(recovery_lab, lab_module, domain_xml,
                                                                         tmp_path):
    """hv3's libvirtd is killed, its guests live on, and the agent answers nothing: the role
    fails at the fence, nothing is marked, evacuated or planned, and hv3's QEMU processes live.
    The test starts a guest of its own on hv3 (another test's may run on another worker)."""
    store_url = "sqlite://%s" % (tmp_path / "state.db")
    settings = recovery_vars(recovery_lab, lab_module, store_url, recovery_hypervisor="hv3",
                             recovery_grace=1, recovery_confirm_interval=1,
                             recovery_fencing_by_hypervisor={"hv3": {"type": "no_such_agent"}})
    hv3 = recovery_lab.hypervisor("hv3")
    conn = libvirt.open(hv3.uri)
    try:
        conn.createXML(domain_xml("rec-unfenced-1"), 0)
    finally:
        conn.close()
    guests = hv3.qemu_pids()
    assert hv3.qemu_pid("rec-unfenced-1") in guests
    recovery_lab.stop("hv3")
    try:
        run = run_playbook(tmp_path, PLAYBOOK, extra_vars=settings, env=lab_power_env(), name="unfenced")
        fence = run.task(FENCE_TASK)
        assert run.rc != 0 and fence.failed and fence["hypervisor"]["fenced"] is False
        assert "never recovered automatically" in fence["msg"]
        assert [t.name for t in run.tasks if t.name in (EVACUATE_TASK, PLAN_TASK)] == []
        assert [pid for pid in guests if not os.path.exists("/proc/%d" % pid)] == []
        assert store_records(store_url, "fenced") == {}
    finally:
        recovery_lab.start("hv3")
