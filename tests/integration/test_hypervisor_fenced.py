"""resilient.virt.hypervisor state=fenced on lab hypervisors of the test's own, through real
ansible-playbook runs, with the lab-only power control as the fence agent (it really kills the
hypervisor's libvirtd, virtlogd and QEMU processes).

hv1 runs a guest; its libvirtd is killed (the guest's QEMU keeps running, as on a hypervisor
whose management died). The task waits out the grace, fences hv1 and marks it: the test sees
the QEMU process gone in /proc, reads the mark from the SQLite store with sqlite3, and a
failover plan that put its reservation on hv1 before puts it elsewhere after. A rerun changes
nothing and fences nothing; state=active ends the mark once hv1 runs again. hv2's libvirtd is
killed for check mode (nothing fenced) and for a flap: started again as soon as the task's
first check was seen (the observer plugin's record of it), hv2 is left alone.
"""
import os
import threading
import time

import libvirt
import pytest
from observer_plugin import ATTEMPTS_ENV, read_attempts
from playbook_runner import HERE, play, run_playbook, store_records

LAB_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "lab")
FO = "resilient.virt.failover_reservation"
WAIT = 120.0
# hv1 has the most room: a plan without marks puts the reservation there
FLEET = {"hypervisors": [{"name": "hv1", "az": "a", "cpu": 16, "memory_mb": 16384},
                         {"name": "hv2", "az": "a", "cpu": 8, "memory_mb": 8192},
                         {"name": "hv3", "az": "a", "cpu": 8, "memory_mb": 4096}],
         "vms": [{"uuid": "u1", "host": "hv3", "az": "a", "flavor": "db", "vcpus": 1,
                  "memory_mb": 1024}],
         "requirements": {"db": 1}, "creator": "fenced-test"}


@pytest.fixture(scope="module")
def fence_lab(tmp_path_factory, lab_module):
    """A lab of its own with hv1 and hv2: (lab, provider dicts by name)."""
    the_lab = lab_module.Lab(str(tmp_path_factory.mktemp("fencedlab")))
    the_lab.up(2, vsphere=False, proxmox=False)
    try:
        yield the_lab, dict((name, lab_module.provider_config(the_lab.hypervisor(name)))
                            for name in ("hv1", "hv2"))
    finally:
        the_lab.down()


def _env(tmp_path):
    return {"RESILIENT_VIRT_PLUGINS": "lab_only_power,observer_plugin",
            "PYTHONPATH": os.pathsep.join(filter(None, [LAB_DIR, HERE, os.environ.get("PYTHONPATH")])),
            ATTEMPTS_ENV: str(tmp_path / "attempts.jsonl")}


def _fence(the_lab, name, **extra):
    args = {"provider": name, "state": "fenced", "grace": 2, "confirm_interval": 1,
            "fencing": {"type": "lab_only_power", "run_dir": the_lab.run_dir}}
    args.update(extra)
    return args


def _run(tmp_path, providers, tasks, store, check=False, name="fenced"):
    defaults = {"providers": providers, "state_store": store}
    run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], check=check,
                       env=_env(tmp_path), name=name)
    assert "Traceback" not in run.output, run.output
    return run


def _alive(pids):
    return [pid for pid in pids if os.path.exists("/proc/%d" % pid)]


def _start_guest(hv, domain_xml, name):
    conn = libvirt.open(hv.uri)
    try:
        conn.defineXML(domain_xml(name)).create()
    finally:
        conn.close()


def test_an_unreachable_hypervisor_is_fenced_marked_and_left_out(fence_lab, domain_xml, tmp_path):
    the_lab, providers = fence_lab
    hv1 = the_lab.hypervisor("hv1")
    _start_guest(hv1, domain_xml, "fenced-guest")
    guests = hv1.qemu_pids()
    assert guests
    store = "sqlite://%s" % (tmp_path / "s.db")
    before = _run(tmp_path, providers, [{"name": "plan", FO: FLEET}], store, check=True,
                  name="before")
    assert [r["host"] for r in before.task("plan")["reservations"]] == ["hv1"]
    the_lab.stop("hv1")  # libvirtd killed: its guest's QEMU runs on
    assert _alive(guests) == guests
    run = _run(tmp_path, providers, [
        {"name": "fence", "resilient.virt.hypervisor": _fence(the_lab, "hv1")},
        {"name": "again", "resilient.virt.hypervisor": _fence(the_lab, "hv1")},
        {"name": "again in check mode", "resilient.virt.hypervisor": _fence(the_lab, "hv1"),
         "check_mode": True},
        {"name": "plan", FO: FLEET}], store)
    fenced = run.task("fence")
    assert not fenced.failed and fenced["changed"] is True, fenced
    hv = fenced["hypervisor"]
    assert hv["fenced"] is True and hv["reachable"] is False and hv["checks"] >= 2, hv
    assert "fenced by the lab_only_power agent" in hv["reason"]
    assert fenced["fence"]["agent"] == "lab_only_power" and fenced["fence"]["fenced"] is True
    assert "QEMU" in fenced["fence"]["action"]
    assert _alive(guests) == []  # the test's own look: the guest's QEMU process is gone
    marks = store_records(store, "fenced")
    assert list(marks) == ["libvirt:hv1/hv1"]
    assert marks["libvirt:hv1/hv1"]["fence"]["agent"] == "lab_only_power"
    assert marks["libvirt:hv1/hv1"]["fence"]["at"] == fenced["fence"]["at"]
    for title in ("again", "again in check mode"):
        again = run.task(title)
        assert again["changed"] is False and again["hypervisor"]["fenced"] is True, again
        assert again["hypervisor"]["checks"] == 1
        assert again["fence"]["at"] == fenced["fence"]["at"]  # the mark's answer: no new fence
    plan = run.task("plan")
    assert [r["host"] for r in plan["reservations"]] == ["hv2"], plan
    assert any("hv1" in w for w in plan.get("warnings") or ()), plan
    the_lab.start("hv1")  # repaired
    ended = _run(tmp_path, providers, [
        {"name": "active", "resilient.virt.hypervisor": {"provider": "hv1", "state": "active"}}],
        store, name="active")
    assert ended.task("active")["changed"] is True, ended.task("active")
    assert store_records(store, "fenced") == {}


def test_check_mode_fences_nothing_and_marks_nothing(fence_lab, domain_xml, tmp_path):
    the_lab, providers = fence_lab
    hv2 = the_lab.hypervisor("hv2")
    _start_guest(hv2, domain_xml, "checked-guest")
    guests = hv2.qemu_pids()
    store = "sqlite://%s" % (tmp_path / "s.db")
    the_lab.stop("hv2")
    try:
        run = _run(tmp_path, providers, [
            {"name": "would fence", "resilient.virt.hypervisor": _fence(the_lab, "hv2", grace=0)}],
            store, check=True)
    finally:
        the_lab.start("hv2")
    result = run.task("would fence")
    assert not result.failed and result["changed"] is True, result
    assert result["hypervisor"]["fenced"] is False and result["fence"] is None
    assert "would fence" in result["hypervisor"]["reason"]
    assert _alive(guests) == guests
    assert store_records(store, "fenced") == {}


def test_a_hypervisor_back_within_the_grace_is_not_fenced(fence_lab, domain_xml, tmp_path):
    the_lab, providers = fence_lab
    hv2 = the_lab.hypervisor("hv2")
    _start_guest(hv2, domain_xml, "flap-guest")
    guests = hv2.qemu_pids()
    store = "sqlite://%s" % (tmp_path / "s.db")
    attempts = _env(tmp_path)[ATTEMPTS_ENV]
    the_lab.stop("hv2")
    started = []

    def start_at_first_check():
        end = time.monotonic() + WAIT
        while not any(a["operation"] == "validate" for a in read_attempts(attempts)):
            if time.monotonic() > end:
                return
            time.sleep(0.05)
        started.append(the_lab.start("hv2"))

    restart = threading.Thread(target=start_at_first_check)
    restart.start()
    try:
        # a long grace: the task ends as soon as hv2 answers
        run = _run(tmp_path, providers, [
            {"name": "flap", "resilient.virt.hypervisor": _fence(the_lab, "hv2", grace=90)}],
            store)
    finally:
        restart.join()
        if not started:
            the_lab.start("hv2")
    result = run.task("flap")
    assert started == [True]
    assert not result.failed and result["changed"] is False, result
    hv = result["hypervisor"]
    assert hv["fenced"] is False and hv["reachable"] is True and hv["checks"] >= 2, hv
    assert "a flap, nothing fenced" in hv["reason"]
    assert result["fence"] is None
    assert _alive(guests) == guests
    assert store_records(store, "fenced") == {}
