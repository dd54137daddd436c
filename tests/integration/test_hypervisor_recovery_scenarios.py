"""Three recovery scenarios under real ``ansible-rulebook`` runs of the shipped rulebook
resilient.virt.hypervisor_recovery, on a lab of three hypervisors of this module's own, the
lab's power control as the fence agent:

- a flap: hv1's libvirtd frozen (SIGSTOP) for about 5 s, the grace longer: nothing fenced,
  nothing moved;
- two rulebook instances on one state store (redundancy): hv1's libvirtd killed, one recovery;
- the rulebook killed mid-recovery (it and the playbook it started, after the first VM moved):
  a new rulebook finishes the recovery and does nothing twice.

Each test makes its own VMs on hv1 and reservations in a store of its own, starts hv1 again if
another test left it fenced, and removes its VMs at its end. The oracles are the test's own:
libvirt-python connections, /proc for the QEMU processes and their start times, the state
store read with sqlite3, and the rulebooks' printed events and playbook output.
"""
import ast
import os
import re
import signal
import sqlite3
import subprocess
import time

import libvirt
import pytest
import yaml
from playbook_runner import local_inventory, run_playbook, store_records
from test_hypervisor_recovery import JAVA_HOMES, lab_power_env, recovery_vars, running_on, started_at, wait_for

from paths import COLLECTIONS

pytestmark = pytest.mark.lab

NAMES = ("hv1", "hv2", "hv3")
HV1_RECORD = "hypervisor_events/libvirt:hv1"
FO = "resilient.virt.failover_reservation"
FLAP_VMS, PAIR_VMS, KILL_VMS = ["flap-1"], ["pair-1", "pair-2"], ["kill-1", "kill-2", "kill-3"]
ALL_VMS = FLAP_VMS + PAIR_VMS + KILL_VMS


@pytest.fixture(scope="module")
def scenario_lab(tmp_path_factory, lab_module):
    """hv1..hv3 of a lab of its own: hv1 is frozen, killed and fenced here, which no other
    module may see; taken down at the end."""
    the_lab = lab_module.Lab(str(tmp_path_factory.mktemp("scenariolab")))
    the_lab.up(3, vsphere=False, proxmox=False)
    try:
        yield the_lab
    finally:
        the_lab.down()


def records(store_url, namespace):
    """The records of ``namespace`` (read with sqlite3); none while the store is being made."""
    try:
        return store_records(store_url, namespace)
    except sqlite3.OperationalError:  # the file is there, its table not yet
        return {}


def descendants(pid):
    """``pid`` and every process below it (ansible-runner starts the playbook in a session of
    its own, so the rulebook's process group does not hold it)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def kill_tree(process):
    """Stop, then SIGKILL, ``process`` and everything it started; wait for it."""
    frozen = set()
    while True:  # stopped first, so that nothing starts a new child meanwhile
        tree = set(descendants(process.pid)) - frozen
        if not tree:
            break
        for pid in tree:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        frozen |= tree
    for pid in frozen:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()


class Rulebook:
    """One ``ansible-rulebook`` of the shipped rulebook, its output in ``<tmp>/<name>.log``."""

    def __init__(self, tmp_path, name, settings):
        (tmp_path / "recovery.yml").write_text(yaml.safe_dump(settings))
        (tmp_path / "inventory.yml").write_text(yaml.safe_dump(local_inventory()))
        env = dict(os.environ, JAVA_HOME=JAVA_HOMES[0], ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
                   TMPDIR=str(tmp_path), **lab_power_env())
        self.log_path = tmp_path / ("%s.log" % name)
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                ["ansible-rulebook", "-r", "resilient.virt.hypervisor_recovery", "-i", "inventory.yml",
                 "--vars", "recovery.yml", "--print-events"],
                cwd=str(tmp_path), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def log(self):
        return self.log_path.read_text()

    def outages(self, hypervisor="hv1"):
        """The hypervisor_unreachable events of ``hypervisor`` it received (--print-events
        prints each as a Python literal after a line "Event:")."""
        printed = re.findall(r"^Event:\n(.*?)^\*{10}", self.log(), re.S | re.M)
        events = [ast.literal_eval(text) for text in printed]
        return [e for e in events if e["type"] == "hypervisor_unreachable" and e["hypervisor"] == hypervisor]

    def reported(self, hypervisor="hv1"):
        """True once a playbook for ``hypervisor`` reported and ended."""
        log = self.log()
        at = log.find('"%s: ' % hypervisor)
        return at >= 0 and "PLAY RECAP" in log[at:]

    def kill(self):
        if self.process.poll() is None:
            kill_tree(self.process)


def hv1_ready(the_lab):
    """hv1 answering, started again when an earlier test left it stopped or fenced, and no VM
    of this module's tests anywhere (a fenced hv1 keeps their definitions)."""
    if the_lab.hypervisor("hv1").daemon_pid("libvirtd") is None:
        the_lab.start("hv1")
    remove_vms(the_lab, ALL_VMS)


def make_vms(the_lab, lab_module, tmp_path, store_url, names):
    """Tiny VMs ``names`` running on hv1 with failover reservations on hv2 and hv3 in
    ``store_url``: {name: the reservation's host}."""
    settings = recovery_vars(the_lab, lab_module, store_url)
    defaults = {"state_store": store_url, "providers": settings["recovery_providers"]}
    setup = [
        {"name": "create", "loop": list(names), "resilient.virt.vm": {
            "provider": "hv1", "name": "{{ item }}", "vcpus": 1, "memory_mb": 64,
            "metadata": {"flavor": "small"}, "state": "running"}},
        {"name": "reserve", FO: {"all_providers": True, "requirements": {"*": 1},
                                 "creator": settings["recovery_creator"], "limit_one_new_per_hypervisor": False}},
    ]
    run = run_playbook(tmp_path, [{"hosts": "localhost", "gather_facts": False, "tasks": setup,
                                   "module_defaults": {"group/resilient.virt.all": defaults}}], name="setup")
    assert run.rc == 0, run
    reserved = run.task("reserve")
    conn = libvirt.open(the_lab.hypervisor("hv1").uri)
    try:
        uuids = {name: conn.lookupByName(name).UUIDString() for name in names}
    finally:
        conn.close()
    target = {name: [r["host"] for r in reserved["reservations"] if uuids[name] in r["allocations"]][0]
              for name in names}
    assert set(target.values()) <= {"hv2", "hv3"}, reserved["vm_status"]
    return target


def remove_vms(the_lab, names):
    """Destroy and undefine ``names`` wherever a hypervisor answers."""
    for hv_name in NAMES:
        hv = the_lab.hypervisor(hv_name)
        if hv.daemon_pid("libvirtd") is None:
            continue
        conn = libvirt.open(hv.uri)
        try:
            for name in names:
                try:
                    dom = conn.lookupByName(name)
                except libvirt.libvirtError:
                    continue
                if dom.isActive():
                    dom.destroy()
                dom.undefine()
        finally:
            conn.close()


def copies(the_lab, name):
    """The QEMU processes of ``name`` on the three hypervisors: [(hypervisor, pid)] (libvirtd
    runs one domain of a name at most, so one each at most)."""
    found = [(hv_name, the_lab.hypervisor(hv_name).qemu_pid(name)) for hv_name in NAMES]
    return [(hv_name, pid) for hv_name, pid in found if pid is not None]


def clients(hv):
    """The pids of the processes connected to ``hv``'s libvirtd (virt-admin, its admin socket)."""
    admin = "libvirtd:///system?socket=%s" % os.path.join(os.path.dirname(hv.socket), "libvirt-admin-sock")
    listed = subprocess.run(["virt-admin", "-c", admin, "srv-clients-list", "libvirtd"],
                            capture_output=True, text=True, check=True).stdout
    pids = set()
    for line in listed.splitlines()[2:]:
        if line.split():
            info = subprocess.run(["virt-admin", "-c", admin, "client-info", "libvirtd", line.split()[0]],
                                  capture_output=True, text=True, check=False).stdout
            pids |= {int(row.split(":", 1)[1]) for row in info.splitlines() if row.startswith("unix_process_id")}
    return pids


def test_a_five_second_freeze_within_the_grace_fences_nothing_and_moves_nothing(scenario_lab, lab_module, tmp_path):
    """hv1's libvirtd frozen for about 5 s, announced unreachable (keepalive 1 s x 2, connects
    abandoned after 1 s), thawed; the grace is 20 s: the playbook reports a flap."""
    assert JAVA_HOMES, "ansible-rulebook needs Java 17: run lab/install-deps.sh"
    hv1_ready(scenario_lab)
    store_url = "sqlite://%s" % (tmp_path / "state.db")
    names = FLAP_VMS
    hv1 = scenario_lab.hypervisor("hv1")
    try:
        make_vms(scenario_lab, lab_module, tmp_path, store_url, names)
        guest, daemon = hv1.qemu_pid("flap-1"), hv1.daemon_pid("libvirtd")
        settings = recovery_vars(scenario_lab, lab_module, store_url, recovery_grace=20,
                                 recovery_events_keepalive_interval=1, recovery_events_keepalive_count=2,
                                 recovery_events_resilience={"timeout_validate": 1, "base_delay": 0.2,
                                                             "max_delay": 1})
        rulebook = Rulebook(tmp_path, "flap", settings)
        try:
            wait_for("the source's first records", lambda: len(records(store_url, "hypervisor_events")) == 3)
            frozen_at = time.monotonic()
            scenario_lab.freeze("hv1")
            try:
                wait_for("hv1 announced unreachable",
                         lambda: records(store_url, "hypervisor_events")[HV1_RECORD]["reachable"] is False)
                announced = time.monotonic() - frozen_at
                time.sleep(max(0.0, 5.0 - (time.monotonic() - frozen_at)))  # the flap lasts 5 s
            finally:
                scenario_lab.thaw("hv1")
            frozen_for = time.monotonic() - frozen_at
            wait_for("hv1 announced reachable again",
                     lambda: records(store_url, "hypervisor_events")[HV1_RECORD]["reachable"] is True)
            wait_for("the playbook's end", rulebook.reported)
        finally:
            rulebook.kill()
        log = rulebook.log()
        print("hv1 frozen for %.1f s, announced unreachable after %.1f s" % (frozen_for, announced))
        assert frozen_for < 15, "the freeze came near the grace (20 s): %.1f s" % frozen_for
        assert len(rulebook.outages()) == 1 and "failed=0" in log, log[-4000:]
        assert "hv1: not fenced, nothing moved" in log and "a flap, nothing fenced" in log, log[-4000:]
        assert records(store_url, "fenced") == {}
        assert hv1.daemon_pid("libvirtd") == daemon  # never powered off
        assert copies(scenario_lab, "flap-1") == [("hv1", guest)]  # the same QEMU process, where it was
    finally:
        remove_vms(scenario_lab, names)


def test_two_rulebooks_on_one_store_recover_a_dead_hypervisor_once(scenario_lab, lab_module, tmp_path):
    """Two instances watch hv1..hv3 (redundancy), one SQLite store; hv1's libvirtd is killed,
    its guests live on: one event, one playbook, one fence, each VM started once."""
    assert JAVA_HOMES, "ansible-rulebook needs Java 17: run lab/install-deps.sh"
    hv1_ready(scenario_lab)
    store_url = "sqlite://%s" % (tmp_path / "state.db")
    settings = recovery_vars(scenario_lab, lab_module, store_url)
    hv1 = scenario_lab.hypervisor("hv1")
    rulebooks = []
    try:
        target = make_vms(scenario_lab, lab_module, tmp_path, store_url, PAIR_VMS)
        rulebooks = [Rulebook(tmp_path, name, settings) for name in ("first", "second")]
        wait_for("both rulebooks watching hv1",
                 lambda: {r.process.pid for r in rulebooks} <= clients(hv1)
                 and len(records(store_url, "hypervisor_events")) == 3)
        guests = hv1.qemu_pids()
        most = {name: 0 for name in PAIR_VMS}  # the most QEMU processes of a VM seen at once

        def all_moved():
            found = {name: copies(scenario_lab, name) for name in PAIR_VMS}
            most.update({name: max(most[name], len(found[name])) for name in PAIR_VMS})
            return all([host for host, _pid in found[name]] == [target[name]] for name in PAIR_VMS)

        killed_at = time.monotonic()
        scenario_lab.stop("hv1")  # libvirtd dies; its QEMU processes live on until the fence
        wait_for("every VM running on its reservation's host, alone", all_moved)
        all_running = time.monotonic() - killed_at
        wait_for("the playbook's end", lambda: any(r.reported() for r in rulebooks))
        started = {name: started_at(copies(scenario_lab, name)[0][1]) for name in PAIR_VMS}
    finally:
        for rulebook in rulebooks:
            rulebook.kill()
    try:
        logs = [r.log() for r in rulebooks]
        print("two rulebooks: from libvirtd killed to every VM running elsewhere: %.1f s" % all_running)
        # one instance announced, and only it ran the playbook
        assert sorted(len(r.outages()) for r in rulebooks) == [0, 1], logs
        assert sorted(log.count("PLAY [") for log in logs) == [0, 1], logs
        assert sum(log.count("hv1: fenced") for log in logs) == 1 and "failed=0" in "".join(logs), logs
        assert [mark["hypervisor"] for mark in records(store_url, "fenced").values()] == ["hv1"]
        assert [pid for pid in guests if os.path.exists("/proc/%d" % pid)] == []  # the old copies
        assert most == {name: 1 for name in PAIR_VMS}  # never two at once
        assert {name: started_at(copies(scenario_lab, name)[0][1]) for name in PAIR_VMS} == started
        assert all(running_on(scenario_lab.hypervisor(target[name]).uri, name) for name in PAIR_VMS)
    finally:
        remove_vms(scenario_lab, PAIR_VMS)


def test_a_rulebook_killed_mid_recovery_is_finished_by_a_new_one(scenario_lab, lab_module, tmp_path):
    """The rulebook and its playbook are killed once the first VM runs on its reservation's host;
    a new rulebook announces the outage again and finishes: every VM on its host, none started
    twice, hv1 fenced once."""
    assert JAVA_HOMES, "ansible-rulebook needs Java 17: run lab/install-deps.sh"
    hv1_ready(scenario_lab)
    store_url = "sqlite://%s" % (tmp_path / "state.db")
    settings = recovery_vars(scenario_lab, lab_module, store_url)
    hv1 = scenario_lab.hypervisor("hv1")
    first = second = None
    try:
        target = make_vms(scenario_lab, lab_module, tmp_path, store_url, KILL_VMS)

        def moved():
            """{name: its copies} of the VMs that run on their reservation's host."""
            found = {name: copies(scenario_lab, name) for name in KILL_VMS}
            return {name: where for name, where in found.items() if target[name] in [host for host, _pid in where]}

        first = Rulebook(tmp_path, "first", settings)
        try:
            wait_for("the source's first records", lambda: len(records(store_url, "hypervisor_events")) == 3)
            killed_at = time.monotonic()
            scenario_lab.stop("hv1")
            wait_for("the first VM running on its reservation's host", moved)
        finally:
            first.kill()  # the rulebook and the playbook it started, mid-evacuation
        mark = records(store_url, "fenced")
        before = moved()  # and what libvirtd of the targets started on its own since
        pids = {name: found[0][1] for name, found in before.items()}
        starts = {name: started_at(pid) for name, pid in pids.items()}
        assert not first.reported() and len(pids) < len(KILL_VMS), first.log()[-4000:]
        assert [m["hypervisor"] for m in mark.values()] == ["hv1"]
        second = Rulebook(tmp_path, "second", settings)
        wait_for("every VM running on its reservation's host",
                 lambda: len(moved()) == len(KILL_VMS))
        finished = time.monotonic() - killed_at
        wait_for("the new rulebook's playbook's end", second.reported)
    finally:
        for rulebook in (first, second):
            if rulebook is not None:
                rulebook.kill()
    try:
        log = second.log()
        print("killed mid-recovery with %d of %d VMs moved; every VM running after %.1f s"
              % (len(pids), len(KILL_VMS), finished))
        [outage], [again] = first.outages(), second.outages()
        assert (outage["repeated"], again["repeated"], again["since"]) == (False, True, outage["since"])
        assert "failed=0" in log, log[-4000:]
        assert records(store_url, "fenced") == mark  # not fenced again
        after = {name: copies(scenario_lab, name) for name in KILL_VMS}
        assert {name: [host for host, _pid in after[name]] for name in KILL_VMS} == {
            name: [target[name]] for name in KILL_VMS}  # one copy each, on its reservation's host
        assert {name: after[name][0][1] for name in pids} == pids  # none started again
        assert {name: started_at(pid) for name, pid in pids.items()} == starts
        assert hv1.qemu_pids() == []
    finally:
        remove_vms(scenario_lab, KILL_VMS)
