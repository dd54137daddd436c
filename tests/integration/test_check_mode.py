"""Check mode changes nothing on the hypervisor: stop, reconfigure, restart and delete.

A running VM on a lab hypervisor and one on the vSphere simulator get four check-mode tasks of
``resilient.virt.vm`` through ``ansible-playbook``. What the provider holds is read with a
connection of the test's own (libvirt-python, or a pyVmomi session), never through the
collection:

- libvirt: the domain's persistent XML, whether it runs and its run ID (new at every start), and
  every domain event the daemon sends while the play runs (libvirt_events.py: lifecycle and
  reboot events);
- vSphere: power state, vCPUs, memory, and the simulator's task list (every power, reconfigure,
  reset or destroy is a task on the VM).

The same four tasks then run for real, and the same oracle must see each of them (the
hypervisor state changes, events or tasks appear): an oracle that would miss a change cannot
vouch for check mode. One exception, said where it applies: the lab's diskless libvirt guests
have no OS to act on an ACPI reboot, so a real restart of a running libvirt VM leaves no trace
to see; libvirt's restart is also checked on a stopped VM, where it means a start.
"""
import json
import os
import queue
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pytest
from lab_domains import remove_domain
from playbook_runner import play, run_playbook
from simulator_session import Simulator

HERE = os.path.dirname(os.path.abspath(__file__))
VM = "resilient.virt.vm"
STOP = {"state": "stopped", "force": True, "shutdown_timeout": "2s"}
# title -> (arguments, the actions check mode must announce for a running VM)
CHANGES = {
    "restart": ({"state": "restarted"}, ["reboot"]),
    "reconfigure": ({"state": "running", "vcpus": 2, "memory_mb": 96}, ["reconfigure"]),
    "stop": (STOP, ["shutdown"]),
    "delete": ({"state": "absent"}, ["delete"]),
}


def _tasks(name, check_mode):
    return [dict({"name": title, VM: dict(arguments, name=name)}, check_mode=check_mode)
            for title, (arguments, _actions) in CHANGES.items()]


def _run(tmp_path, provider, tasks, run_name):
    defaults = {"provider": provider, "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], diff=True,
                       name=run_name)
    assert run.rc == 0, run
    return run


def _assert_announced(run):
    for title, (arguments, actions) in CHANGES.items():
        result = run.task(title)
        assert result["changed"] is True and result["actions"] == actions, result
        after = result["diff"]["after"]
        if arguments["state"] == "absent":
            assert after == {"state": "absent"}, result
        else:
            wanted = "running" if arguments["state"] == "restarted" else arguments["state"]
            assert after["state"] == wanted, result
            for field in ("vcpus", "memory_mb"):
                if field in arguments:
                    assert after[field] == arguments[field], result


# --- libvirt ------------------------------------------------------------------------------

class Events:
    """libvirt_events.py on ``uri``: the domain events of the hypervisor, read by a thread."""

    def __init__(self, uri):
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "libvirt_events.py"), uri],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline() == "ready\n", "the event watcher did not start"
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def until_marker(self, conn, domain_xml):
        """Events up to a marker domain defined and undefined now: every earlier event is in."""
        marker = "marker-%s" % uuid.uuid4().hex[:8]
        conn.defineXML(domain_xml(marker)).undefine()
        seen, end = [], time.monotonic() + 30
        while True:
            try:
                event = self.lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                pytest.fail("the event watcher did not report the marker domain within 30 s")
            if event["domain"] == marker:
                if event["kind"] == libvirt.VIR_DOMAIN_EVENT_UNDEFINED:
                    return seen
                continue
            seen.append(event)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


def _libvirt_state(conn, name):
    """What the hypervisor holds for ``name``: None, or its definition and run state."""
    try:
        dom = conn.lookupByName(name)
    except libvirt.libvirtError:
        return None
    return {"xml": dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE), "active": dom.isActive(),
            "id": dom.ID()}


def _libvirt_resources(state):
    root = ET.fromstring(state["xml"])
    memory = root.find("memory")
    kib = int(memory.text) * {"KiB": 1, "MiB": 1024}[memory.get("unit", "KiB")]
    return int(root.findtext("vcpu")), kib // 1024


def test_libvirt(lab, tmp_path, domain_xml):
    hv = lab.hypervisor("hv1")
    provider = {"type": "libvirt", "name": hv.name, "uri": hv.uri, "domain_type": "qemu"}
    name, stopped = "check-%s" % uuid.uuid4().hex[:6], "check-off-%s" % uuid.uuid4().hex[:6]
    conn = libvirt.open(hv.uri)
    events = None
    try:
        _run(tmp_path, provider, [
            {"name": "running", VM: {"name": name, "vcpus": 1, "memory_mb": 64, "state": "running"}},
            {"name": "stopped", VM: {"name": stopped, "vcpus": 1, "memory_mb": 64}}], "setup")
        before = _libvirt_state(conn, name)
        assert before["active"] and _libvirt_resources(before) == (1, 64)
        before_stopped = _libvirt_state(conn, stopped)
        events = Events(hv.uri)

        checked = _run(tmp_path, provider, _tasks(name, True) + [dict(
            {"name": "restart stopped", VM: {"name": stopped, "state": "restarted"}},
            check_mode=True)], "check")
        seen = events.until_marker(conn, domain_xml)
        assert seen == [], "check mode made the hypervisor send events: %s" % seen
        assert _libvirt_state(conn, name) == before
        assert _libvirt_state(conn, stopped) == before_stopped
        _assert_announced(checked)
        assert checked.task("restart stopped")["actions"] == ["start"]

        # the same tasks for real: the oracle sees every one (but the ACPI reboot, see above)
        real = _tasks(name, False)
        for task in real:
            _run(tmp_path, provider, [task], "real-" + task["name"])
            state, seen = _libvirt_state(conn, name), events.until_marker(conn, domain_xml)
            kinds = {e.get("kind") for e in seen}
            if task["name"] == "restart":
                assert state == before, "a reboot without an OS to act on it changes nothing"
            elif task["name"] == "reconfigure":
                assert _libvirt_resources(state) == (2, 96) and libvirt.VIR_DOMAIN_EVENT_DEFINED in kinds
            elif task["name"] == "stop":
                assert not state["active"] and libvirt.VIR_DOMAIN_EVENT_STOPPED in kinds
            else:
                assert state is None and libvirt.VIR_DOMAIN_EVENT_UNDEFINED in kinds
        _run(tmp_path, provider, [{"name": "restart stopped", VM: {
            "name": stopped, "state": "restarted"}}], "real-restart-stopped")
        seen = events.until_marker(conn, domain_xml)
        assert _libvirt_state(conn, stopped)["active"]
        assert libvirt.VIR_DOMAIN_EVENT_STARTED in {e.get("kind") for e in seen}
    finally:
        if events is not None:
            events.stop()
        conn.close()
        for vm in (name, stopped):
            remove_domain(hv.uri, vm)


# --- vSphere ------------------------------------------------------------------------------

def test_vsphere(lab, vsphere, tmp_path):
    provider = dict(vsphere, name="vcsim-check")
    name = "check-%s" % uuid.uuid4().hex[:6]
    sim = Simulator(vsphere)
    try:
        _run(tmp_path, provider, [{"name": "running", VM: {
            "name": name, "vcpus": 1, "memory_mb": 64, "state": "running"}}], "setup")
        ref = sim.vm(name)
        # vCenter changes vCPUs and memory of a running VM only with hot-add on (set here, by
        # pyVmomi, as an administrator would); without it the task is refused (test_vsphere_day2)
        from pyVmomi import vim
        from simulator_session import _wait

        _wait(ref.ReconfigVM_Task(spec=vim.vm.ConfigSpec(cpuHotAddEnabled=True,
                                                         memoryHotAddEnabled=True)), "hot-add on")
        before, tasks_before = sim.state(ref), sim.tasks_on(ref)
        assert before == {"power": "poweredOn", "vcpus": 1, "memory_mb": 64}

        checked = _run(tmp_path, provider, _tasks(name, True), "check")
        assert sim.state(sim.vm(name)) == before
        new = sim.tasks_on(ref) - tasks_before
        assert not new, "check mode ran tasks on the VM: %s" % sorted(new)
        _assert_announced(checked)

        # what each task does, as the simulator shows it (a guest shutdown is not a task)
        expected = {
            "restart": lambda state, kinds: "VirtualMachine.reset" in kinds,
            "reconfigure": lambda state, kinds: "VirtualMachine.reconfigVm" in kinds and (
                state["vcpus"], state["memory_mb"]) == (2, 96),
            "stop": lambda state, kinds: state["power"] == "poweredOff",
            "delete": lambda state, kinds: "VirtualMachine.destroy" in kinds and state is None,
        }
        for task in _tasks(name, False):
            seen = sim.tasks_on(ref)
            _run(tmp_path, provider, [task], "real-" + task["name"])
            state, kinds = sim.state(sim.vm(name)), {kind for _key, kind in sim.tasks_on(ref) - seen}
            assert expected[task["name"]](state, kinds), (task["name"], state, kinds)
    finally:
        sim.remove(name)
        sim.close()
