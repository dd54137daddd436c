"""Proxmox VE: inventory, vm_info, create/start and faults against community.proxmox, on a simulator.

The simulator is fakepve (a Proxmox VE API simulator, a test tool from PyPI), started once for
the whole run in a process of its own: HTTPS on 127.0.0.1 with a certificate made for the run
(verified by both sides: ``ca_path`` for ours, ``REQUESTS_CA_BUNDLE`` for the peer), root@pam
with a password made for the run, a cluster of three nodes holding ``--vms`` VMs (default
1,000, spread evenly, every other one running). The simulator answers at once unless
``--latency`` adds seconds to every answer (a cluster's own time per request).

1. **Inventory**: ``ansible-inventory --list`` on a ``resilient.virt.hypervisors`` source
   (``include_vms: true``) against ``community.proxmox.proxmox`` with its defaults, and with
   ``want_facts: true`` (each VM's configuration, what its tags and description need).
   ``--rounds`` rounds, the cases interleaved; per case the median **wall** time of the
   process, its **CPU** time (``ansible-inventory`` and every process it waited for), the
   **simulator's CPU** time (from ``/proc``) and the hosts listed. Target: ours at most 0.2x
   the peer's (defaults) in wall time.
2. **vm_info**: one task, ``resilient.virt.vm_info`` on one VM by name against
   ``community.proxmox.proxmox_vm_info`` (``name``), each in a playbook of its own: its **wall**
   time is the task's own, read in the play (so Ansible's start is out of it), its **CPU** time
   its whole playbook's, beside that of the same playbook with an ``ansible.builtin.debug``
   task instead (what Ansible itself costs), medians over the rounds. No target: reported as
   measured.
3. **Create, then start**: ``resilient.virt.vm`` (``state: stopped`` with a 2 GB disk, then
   ``state: running``) against ``community.proxmox.proxmox_kvm`` (``state: present`` with the
   same disk, then ``state: started``), a new VM each round, measured as in 2., with the
   ratios (of the tasks' wall times, and of the playbooks' CPU times).
4. **Faults**: on the lab's three-node cluster (``lab/pvesim.py``) served in this process, with
   PVE seconds real, each fault injected before each side's task: the login ticket expired
   before a start (PVE's 401), node pve2 offline (vm_info of every VM, and the inventory), node
   pve2 in HA maintenance, then also shut down (the same; fakepve has no maintenance, the lab's
   cluster adds it to the HA manager's status), a guest that takes an hour to shut down (both
   sides wait 10 s, without and with force), a backup holding the VM (a memory change) or the
   template (a linked clone) for 20 s. Per side:
   how the task ended, its own seconds, and what the simulator shows afterwards (the VM's
   state, the requests and tasks it received).

    python3 bench/bench_proxmox.py [--vms N] [--rounds N] [--latency S] [--quick] [--json PATH]

``--quick``: 3 rounds. Prints markdown tables; exits 0 when the bench ran (a missed target is
reported, not an error) and 1 when it could not run.
"""
import argparse
import asyncio
import json
import os
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml
from checkout import ROOT, use_checkout

use_checkout()

HOST = "127.0.0.1"
NODES = ("pve1", "pve2", "pve3")
TARGET = 0.2
READY_TIMEOUT = 60
LOCK_SECONDS = 20  # a backup holds the VM this long (item a)
SHUTDOWN_TIMEOUT = 10  # both sides wait this long for a guest that takes 3600 s to shut down


# -- the simulator, in a process of its own ------------------------------------------------------
def serve(directory, vms, latency):
    """The simulator's process: writes ``port`` to ``directory`` once it serves."""
    import fakepve
    from fakepve.certs import make_cert

    cert, key, _der = make_cert(directory, hosts=(HOST,))
    with open(os.path.join(directory, "password")) as handle:
        password = handle.read().strip()
    pve = fakepve.FakePve(user="root@pam", password=password, host=HOST, port=0)
    pve.time_scale = 1 if latency else 0  # PVE seconds are real ones only for the latency
    pve.max_requests = 10 ** 6
    if latency:
        pve.slow_network(latency)
    for node in NODES:
        pve.add_node(node)
    for index in range(vms):
        pve.add_vm(1000 + index, "vm-%04d" % index, node=NODES[index % len(NODES)],
                   status="running" if index % 2 else "stopped",
                   config={"memory": 512, "cores": 1, "tags": "bench",
                           "scsi0": "local-lvm:vm-%d-disk-0,size=2G" % (1000 + index),
                           "net0": "virtio=BC:24:11:00:%02X:%02X,bridge=vmbr0" % (
                               index // 256, index % 256)})

    async def main():
        await pve.start(cert, key)
        with open(os.path.join(directory, "port.tmp"), "w") as handle:
            handle.write(str(pve.port))
        os.rename(os.path.join(directory, "port.tmp"), os.path.join(directory, "port"))
        while True:
            await asyncio.sleep(3600)

    asyncio.run(main())


class Simulator:
    def __init__(self, directory, vms, latency):
        self.directory = directory
        self.password = secrets.token_urlsafe(18)
        path = os.path.join(directory, "password")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
            handle.write(self.password)
        self.log = os.path.join(directory, "fakepve.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve",
                                          directory, "--vms", str(vms), "--latency", str(latency)],
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + READY_TIMEOUT
        port_file = os.path.join(directory, "port")
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the simulator did not start (see %s)" % self.log)
            time.sleep(0.1)
        with open(port_file) as handle:
            self.port = int(handle.read())
        self.cert = os.path.join(directory, "fakepve.crt")  # make_cert's name

    def cpu(self):
        """CPU seconds the simulator has used so far."""
        with open("/proc/%d/stat" % self.proc.pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


# -- measured runs -------------------------------------------------------------------------------
def measured(command, sim, workdir, env):
    """(wall s, CPU s of the command and its children, simulator CPU s, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sim_before = sim.cpu()
    began = time.monotonic()
    proc = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                          check=False, timeout=3600)
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError("%s failed: %s" % (command[0], (proc.stdout + proc.stderr)[-2000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, sim.cpu() - sim_before, proc.stdout


def _write(path, data):
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)
    return path


def _ours_provider(sim):
    return {"type": "proxmox", "name": "pve", "host": HOST, "port": sim.port,
            "username": "root@pam", "password": sim.password, "ca_path": sim.cert}


def inventory_cases(sim, workdir):
    url = "https://%s:%d" % (HOST, sim.port)
    peer = {"plugin": "community.proxmox.proxmox", "url": url, "user": "root@pam",
            "password": sim.password, "validate_certs": True}
    return {
        "ours": _write(os.path.join(workdir, "ours.hypervisors.yml"), {
            "plugin": "resilient.virt.hypervisors", "providers": {"pve": _ours_provider(sim)},
            "include_vms": True, "timeout": "600s",
            "state_store": "sqlite:///%s" % os.path.join(workdir, "state.db")}),
        "peer": _write(os.path.join(workdir, "peer.proxmox.yml"), peer),
        "peer_want_facts": _write(os.path.join(workdir, "facts.proxmox.yml"),
                                  dict(peer, want_facts=True)),
    }


def count_hosts(stdout):
    data = json.loads(stdout[stdout.find("{"):])
    return len(data.get("_meta", {}).get("hostvars", {}))


def bench_inventory(sim, workdir, env, rounds):
    cases = inventory_cases(sim, workdir)
    samples = {name: [] for name in cases}
    hosts = {}
    for index in range(rounds):
        order = list(cases) if index % 2 == 0 else list(reversed(list(cases)))
        for name in order:
            wall, cpu, sim_cpu, out = measured(["ansible-inventory", "-i", cases[name], "--list"],
                                               sim, workdir, env)
            samples[name].append((wall, cpu, sim_cpu))
            hosts[name] = count_hosts(out)
    result = {}
    for name, rows in samples.items():
        result[name] = {"wall": statistics.median(r[0] for r in rows),
                        "cpu": statistics.median(r[1] for r in rows),
                        "sim_cpu": statistics.median(r[2] for r in rows), "hosts": hosts[name]}
    return result


def bench_vm_info(sim, workdir, env, rounds):
    """One vm_info task on one VM by name, ours against community.proxmox's
    (:func:`task_costs`)."""
    name = "vm-0001"
    ours = ({"resilient.virt.vm_info": {"provider": "pve", "name": name}},
            {"providers": {"pve": _ours_provider(sim)},
             "state_store": "sqlite:///%s" % os.path.join(workdir, "info.db")})
    peer = ({"community.proxmox.proxmox_vm_info": {
        "api_host": HOST, "api_port": sim.port, "api_user": "root@pam",
        "api_password": sim.password, "validate_certs": True, "name": name}}, None)
    return task_costs(sim, workdir, env, rounds, lambda index: {"ours": ours, "peer": peer},
                      {"ours": ("ours",), "peer": ("peer",)})


def task_costs(sim, workdir, env, rounds, cases, steps):
    """Median cost of each step of ``steps`` (side -> its steps, run in that order), the tasks
    of round ``index`` being ``cases(index)`` (step -> (task, module_defaults)); the sides and a
    debug task's playbook interleaved. Wall: the task's own time, read in the play (Ansible's
    start is out of it); CPU: its playbook's (``ansible-playbook`` and every process it waited
    for), and that minus the debug task's playbook's (``cpu_above_debug``: on a loaded machine
    the difference is within the noise, and may come out negative). A task that fails stops
    the bench."""
    debug = ({"ansible.builtin.debug": {"msg": "baseline"}}, None)
    steps = dict(steps, baseline=("baseline",))
    samples = {step: [] for side in steps for step in steps[side]}
    for index in range(rounds):
        tasks = dict(cases(index), baseline=debug)
        order = list(steps) if index % 2 == 0 else list(reversed(list(steps)))
        for side in order:
            for step in steps[side]:
                task, module_defaults = tasks[step]
                path, out = timed_play(workdir, "%s-%d" % (step, index), task, module_defaults)
                _wall, cpu, _sim_cpu, output = measured(
                    ["ansible-playbook", "-i", "localhost,", "-c", "local", path], sim, workdir,
                    env)
                data = _read_timed(out, output)
                if data["result"].get("failed"):
                    raise RuntimeError("%s failed: %s" % (step, json.dumps(data["result"])[:2000]))
                samples[step].append((data["seconds"], cpu))
    base_cpu = statistics.median(r[1] for r in samples.pop("baseline"))
    out = {step: {"wall": statistics.median(r[0] for r in rows),
                  "cpu": statistics.median(r[1] for r in rows)}
           for step, rows in samples.items()}
    for row in out.values():
        row["cpu_above_debug"] = row["cpu"] - base_cpu
    out["debug_cpu"] = base_cpu
    return out


# -- faults: the lab's simulated cluster, in this process, with faults injected -------------------
class FaultSimulator:
    """The lab's three-node cluster (``lab/pvesim.py``: template ``tpl`` on pve1, storage
    ``vmdata``) served on a thread of this process, so that faults are injected between two
    runs; PVE seconds are real ones (``time_scale`` 1)."""

    def __init__(self, directory):
        import pvesim
        from fakepve.certs import make_cert

        self.cert, key, _der = make_cert(directory, hosts=(HOST,))
        self.password = secrets.token_urlsafe(18)
        self.pve = pvesim.build_cluster(self.password, 0)
        self.template = pvesim.TEMPLATE_NAME
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fakepve", daemon=True)
        self.thread.start()
        self.call(lambda: self.pve.start(self.cert, key))
        self.pve.time_scale = 1
        self.port = self.pve.port

    def call(self, fn):
        """``fn()`` run on the simulator's loop (awaited when it returns a coroutine)."""
        async def run():
            result = fn()
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(READY_TIMEOUT)

    def new_vm(self, name, node="pve1", status="stopped"):
        vmid = max(vm.vmid for vm in self.pve.vms) + 1
        self.call(lambda: self.pve.add_vm(vmid, name, node=node, status=status,
                                          config={"memory": 512, "cores": 1}))
        return vmid

    def requests(self, method, suffix):
        return len([r for r in self.pve.requests if r[0] == method and r[1].endswith(suffix)])

    def tasks(self, kind, vmid):
        return len([t for t in self.pve.tasklog if t["type"] == kind and t["id"] == str(vmid)])

    def stop(self):
        try:
            self.call(self.pve.stop)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


def _peer_auth(sim):
    return {"api_host": HOST, "api_port": sim.port, "api_user": "root@pam",
            "api_password": sim.password, "validate_certs": True}


def timed_play(workdir, label, task, module_defaults=None):
    """A playbook of ``task`` that writes {result, seconds (the task alone)} to
    ``<label>.json``: (its path, that file's path)."""
    out = os.path.join(workdir, label + ".json")
    play = {"name": label, "hosts": "localhost", "gather_facts": False, "tasks": [
        {"ansible.builtin.set_fact": {"began": "{{ now().timestamp() }}"}},
        dict(task, name="measured", register="result", ignore_errors=True),
        {"ansible.builtin.copy": {"dest": out, "content": "{{ {'result': result, 'seconds': "
                                  "now().timestamp() - (began | float)} | to_json }}"}}]}
    if module_defaults:
        play["module_defaults"] = {"group/resilient.virt.all": module_defaults}
    return _write(os.path.join(workdir, label + ".yml"), [play]), out


def _read_timed(out, proc_output):
    if not os.path.exists(out):
        raise RuntimeError("%s was not written: %s" % (out, proc_output[-2000:]))
    with open(out) as handle:
        data = json.load(handle)
    os.unlink(out)
    return data


def fault_run(sim, workdir, env, label, task, ours):
    """One task under a fault: {outcome, seconds (the task alone), result, warnings}."""
    defaults = {"providers": {"pve": _ours_provider(sim)},
                "state_store": "sqlite:///%s" % os.path.join(workdir, "faults.db")}
    path, out = timed_play(workdir, label, task, defaults if ours else None)
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", path],
                          cwd=workdir, env=env, capture_output=True, text=True, check=False,
                          timeout=600)
    data = _read_timed(out, proc.stdout + proc.stderr)
    result = data["result"]
    if result.get("failed"):
        error = result.get("error") or {}
        outcome = "failed: %s" % (error.get("type") or " ".join(str(result.get("msg")).split())[:90])
    else:
        outcome = "ok, changed" if result.get("changed") else "ok, unchanged"
    return {"outcome": outcome, "seconds": data["seconds"], "result": result,
            "warnings": list(result.get("warnings", []))}


def _row(fault, who, run, check):
    return {"fault": fault, "who": who, "outcome": run["outcome"],
            "seconds": round(run["seconds"], 2), "check": check}


def fault_locked(sim, workdir, env):
    """(a) A backup holds the VM (or the template) for LOCK_SECONDS: a memory change, a clone."""
    rows = []
    for who in ("ours", "peer"):
        vmid = sim.new_vm("locked-%s" % who)
        sim.call(lambda vmid=vmid: sim.pve.backup(vmid, secs=LOCK_SECONDS))
        task = ({"resilient.virt.vm": {"provider": "pve", "name": "locked-%s" % who,
                                       "memory_mb": 1024}} if who == "ours" else
                {"community.proxmox.proxmox_kvm": dict(_peer_auth(sim), name="locked-peer",
                                                       node="pve1", memory=1024, update=True)})
        run = fault_run(sim, workdir, env, "locked-%s" % who, task, who == "ours")
        rows.append(_row("VM locked by a %d s backup: memory change" % LOCK_SECONDS, who, run,
                         "memory %s MiB after, %d config writes" % (
                             sim.pve.vm(vmid).config.get("memory"),
                             sim.requests("PUT", "/qemu/%d/config" % vmid))))
        template = sim.pve.vms[0].vmid
        sim.call(lambda template=template: sim.pve.backup(template, secs=LOCK_SECONDS))
        clones = sim.requests("POST", "/qemu/%d/clone" % template)
        name = "clone-%s" % who
        task = ({"resilient.virt.vm": {"provider": "pve", "name": name, "template": sim.template,
                                       "state": "present"}} if who == "ours" else
                {"community.proxmox.proxmox_kvm": dict(_peer_auth(sim), name=name, node="pve1",
                                                       clone=sim.template, full=False)})
        run = fault_run(sim, workdir, env, name, task, who == "ours")
        made = [vm for vm in sim.pve.vms if vm.name == name]
        rows.append(_row("template locked by a %d s backup: linked clone" % LOCK_SECONDS, who,
                         run, "%d clone made, %d clone requests" % (
                             len(made), sim.requests("POST", "/qemu/%d/clone" % template) - clones)))
        time.sleep(LOCK_SECONDS)  # the next side finds the template unlocked, then locks it again
    return rows


def fault_shutdown(sim, workdir, env):
    """(b) A guest that takes an hour to shut down; both wait SHUTDOWN_TIMEOUT, with and without
    force."""
    rows = []
    for force in (False, True):
        for who in ("ours", "peer"):
            name = "slow-%s-%s" % (who, "force" if force else "wait")
            vmid = sim.new_vm(name, status="running")
            sim.pve.vm(vmid).shutdown_secs = 3600
            task = ({"resilient.virt.vm": {"provider": "pve", "name": name, "state": "stopped",
                                           "force": force,
                                           "shutdown_timeout": "%ds" % SHUTDOWN_TIMEOUT}}
                    if who == "ours" else
                    {"community.proxmox.proxmox_kvm": dict(_peer_auth(sim), name=name,
                                                           state="stopped", force=force,
                                                           timeout=SHUTDOWN_TIMEOUT)})
            run = fault_run(sim, workdir, env, name, task, who == "ours")
            rows.append(_row("guest shutdown takes 3600 s, timeout %d s%s" % (
                SHUTDOWN_TIMEOUT, ", force" if force else ""), who, run,
                "VM %s after, %d shutdown and %d stop tasks" % (
                    sim.pve.vm(vmid).status, sim.tasks("qmshutdown", vmid),
                    sim.tasks("qmstop", vmid))))
    return rows


def fault_offline(sim, workdir, env):
    """(c) Node pve2 offline: every VM listed (vm_info and the inventory)."""
    for index in range(3):
        sim.new_vm("far-%d" % index, node="pve2", status="running")
        sim.new_vm("near-%d" % index, node="pve3", status="running")
    sim.call(lambda: sim.pve.set_node_offline("pve2"))
    rows = []
    try:
        for who in ("ours", "peer"):
            task = ({"resilient.virt.vm_info": {"provider": "pve"}} if who == "ours" else
                    {"community.proxmox.proxmox_vm_info": dict(_peer_auth(sim), type="qemu")})
            run = fault_run(sim, workdir, env, "offline-%s" % who, task, who == "ours")
            listed = run["result"].get("vms" if who == "ours" else "proxmox_vms") or []
            named = [w for w in run["warnings"] if "pve2" in w]
            rows.append(_row("node pve2 offline: vm_info of every VM", who, run,
                             "%d VMs listed, %s" % (len(listed), "a warning names pve2" if named
                                                    else "no warning names pve2")))
        rows.extend(_inventories(sim, workdir, env, "node pve2 offline: inventory", "offline"))
    finally:
        sim.call(lambda: sim.pve.set_node_offline("pve2", False))
    return rows


def fault_maintenance(sim, workdir, env):
    """Node pve2 in HA maintenance (a VM of pve1 is an HA resource), answering, then also shut
    down: vm_info of every VM and the inventory. fakepve has no maintenance: the lab's cluster
    adds it to the HA manager's status (``lab/pvesim.py``)."""
    vmid = sim.new_vm("ha-guarded", node="pve1", status="running")
    sim.call(lambda: setattr(sim.pve.vm(vmid), "ha_state", "started"))
    for index in range(2):
        sim.new_vm("kept-%d" % index, node="pve2", status="running")
    sim.call(lambda: sim.pve.maintenance.add("pve2"))
    rows = []
    try:
        for down in (False, True):
            if down:
                sim.call(lambda: sim.pve.set_node_offline("pve2"))
            fault = "node pve2 in maintenance%s" % (", shut down" if down else "")
            for who in ("ours", "peer"):
                task = ({"resilient.virt.vm_info": {"provider": "pve"}} if who == "ours" else
                        {"community.proxmox.proxmox_vm_info": dict(_peer_auth(sim), type="qemu")})
                label = "maintenance-%s-%s" % ("down" if down else "up", who)
                run = fault_run(sim, workdir, env, label, task, who == "ours")
                listed = run["result"].get("vms" if who == "ours" else "proxmox_vms") or []
                named = [w for w in run["warnings"] if "pve2" in w and "maintenance" in w]
                rows.append(_row(fault + ": vm_info of every VM", who, run, "%d VMs listed, %s" % (
                    len(listed), "a warning names pve2 in maintenance" if named
                    else "no warning names pve2 in maintenance")))
            if not down:
                rows.extend(_inventories(sim, workdir, env, fault + ": inventory", "maintenance"))
    finally:
        sim.call(lambda: sim.pve.set_node_offline("pve2", False))
        sim.call(lambda: sim.pve.maintenance.discard("pve2"))
    return rows


def _inventories(sim, workdir, env, fault, label):
    """Both inventories under ``fault``: rows of how each ended, its hosts and its warnings."""
    url = "https://%s:%d" % (HOST, sim.port)
    sources = {
        "ours": _write(os.path.join(workdir, label + ".hypervisors.yml"), {
            "plugin": "resilient.virt.hypervisors", "providers": {"pve": _ours_provider(sim)},
            "include_vms": True,
            "state_store": "sqlite:///%s" % os.path.join(workdir, "faults.db")}),
        "peer": _write(os.path.join(workdir, label + ".proxmox.yml"), {
            "plugin": "community.proxmox.proxmox", "url": url, "user": "root@pam",
            "password": sim.password, "validate_certs": True})}
    rows = []
    for who, source in sources.items():
        began = time.monotonic()
        proc = subprocess.run(["ansible-inventory", "-i", source, "--list"], cwd=workdir, env=env,
                              capture_output=True, text=True, check=False, timeout=600)
        seconds = time.monotonic() - began
        try:
            hosts = count_hosts(proc.stdout)
        except ValueError:
            hosts = 0
        stderr = " ".join(proc.stderr.split())
        failed = proc.returncode != 0 or "Failed to parse" in stderr or "Unable to parse" in stderr
        named = "pve2" in stderr
        rows.append({"fault": fault, "who": who,
                     "outcome": "failed" if failed else "ok", "seconds": round(seconds, 2),
                     "check": "%d hosts, %s" % (hosts, "a warning names pve2" if named
                                                else "no warning names pve2")})
    return rows


def fault_ticket(sim, workdir, env):
    """(d) The login ticket expired: PVE answers the start of the VM with its 401."""
    rows = []
    for who in ("ours", "peer"):
        name = "ticket-%s" % who
        vmid = sim.new_vm(name)
        sim.call(lambda vmid=vmid: sim.pve.fail(
            "POST", "/qemu/%d/status/start" % vmid, 401, "permission denied - invalid PVE ticket",
            times=1))
        logins = sim.requests("POST", "/access/ticket")
        task = ({"resilient.virt.vm": {"provider": "pve", "name": name, "state": "running"}}
                if who == "ours" else
                {"community.proxmox.proxmox_kvm": dict(_peer_auth(sim), name=name,
                                                       state="started")})
        run = fault_run(sim, workdir, env, name, task, who == "ours")
        rows.append(_row("login ticket expired before the start", who, run,
                         "VM %s after, %d start tasks, %d logins" % (
                             sim.pve.vm(vmid).status, sim.tasks("qmstart", vmid),
                             sim.requests("POST", "/access/ticket") - logins)))
    return rows


def bench_faults(workdir, env):
    directory = os.path.join(workdir, "faults")
    os.mkdir(directory)
    sim = FaultSimulator(directory)
    env = dict(env, REQUESTS_CA_BUNDLE=sim.cert)
    try:
        rows = []
        for scenario in (fault_ticket, fault_offline, fault_maintenance, fault_shutdown,
                         fault_locked):
            rows.extend(scenario(sim, directory, env))
        return rows
    finally:
        sim.stop()


def bench_create_start(sim, workdir, env, rounds):
    """Create a VM, then start it: resilient.virt.vm against community.proxmox.proxmox_kvm,
    a new VM each round (:func:`task_costs`), with the ratios."""
    defaults = {"providers": {"pve": _ours_provider(sim)},
                "state_store": "sqlite:///%s" % os.path.join(workdir, "create.db")}
    peer = {"api_host": HOST, "api_port": sim.port, "api_user": "root@pam",
            "api_password": sim.password, "validate_certs": True}

    def cases(index):
        ours, theirs = "ours-new-%d" % index, "peer-new-%d" % index
        return {
            "ours_create": ({"resilient.virt.vm": {"provider": "pve", "name": ours,
                                                   "state": "stopped", "vcpus": 1,
                                                   "memory_mb": 512,
                                                   "disks": [{"size_gb": 2}]}}, defaults),
            "ours_start": ({"resilient.virt.vm": {"provider": "pve", "name": ours,
                                                  "state": "running"}}, defaults),
            "peer_create": ({"community.proxmox.proxmox_kvm": dict(
                peer, name=theirs, node=NODES[0], cores=1, memory=512,
                scsi={"scsi0": "local-lvm:2"}, state="present")}, None),
            "peer_start": ({"community.proxmox.proxmox_kvm": dict(peer, name=theirs,
                                                                  state="started")}, None)}

    result = task_costs(sim, workdir, env, rounds, cases,
                        {"ours": ("ours_create", "ours_start"),
                         "peer": ("peer_create", "peer_start")})
    for step in ("create", "start"):
        ours, theirs = result["ours_" + step], result["peer_" + step]
        result[step + "_ratio"] = {"wall": ours["wall"] / theirs["wall"],
                                   "cpu": ours["cpu"] / theirs["cpu"]}
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vms", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds the simulator adds to every answer (default 0)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.vms, args.latency)
        return 0
    rounds = 3 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="bench-proxmox-") as workdir:
        try:
            sim = Simulator(workdir, args.vms, args.latency)
        except (RuntimeError, ImportError) as exc:
            print("bench_proxmox: cannot run: %s" % exc)
            return 1
        env = dict(os.environ, REQUESTS_CA_BUNDLE=sim.cert, ANSIBLE_NOCOLOR="1",
                   ANSIBLE_PYTHON_INTERPRETER=sys.executable,  # modules run where Ansible does
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".build", "collections") + ":"
                   + os.environ.get("ANSIBLE_COLLECTIONS_PATH", ""),
                   ANSIBLE_INVENTORY_ENABLED="resilient.virt.hypervisors,"
                                             "community.proxmox.proxmox")
        try:
            inventory = bench_inventory(sim, workdir, env, rounds)
            vm_info = bench_vm_info(sim, workdir, env, rounds)
            create_start = bench_create_start(sim, workdir, env, rounds)
        except RuntimeError as exc:
            print("bench_proxmox: cannot run: %s" % exc)
            return 1
        finally:
            sim.stop()
        try:
            faults = bench_faults(workdir, env)
        except RuntimeError as exc:
            print("bench_proxmox: cannot run: %s" % exc)
            return 1
    ratio = inventory["ours"]["wall"] / inventory["peer"]["wall"]
    facts_ratio = inventory["ours"]["wall"] / inventory["peer_want_facts"]["wall"]
    print("## Proxmox VE inventory: %d VMs on %d nodes (fakepve simulator, %g s added to each "
          "answer), median of %d rounds\n" % (args.vms, len(NODES), args.latency, rounds))
    print("| inventory | wall s | CPU s | simulator CPU s | hosts |")
    print("|---|---|---|---|---|")
    for name, label in (("ours", "resilient.virt.hypervisors"),
                        ("peer", "community.proxmox.proxmox"),
                        ("peer_want_facts", "community.proxmox.proxmox, want_facts")):
        row = inventory[name]
        print("| %s | %.2f | %.2f | %.2f | %d |" % (label, row["wall"], row["cpu"],
                                                    row["sim_cpu"], row["hosts"]))
    print("\nours / community.proxmox (wall): %.2fx, target <= %.1fx: %s\n" % (
        ratio, TARGET, "pass" if ratio <= TARGET else "MISSED"))
    print("ours / community.proxmox with want_facts (wall): %.2fx\n" % facts_ratio)
    print("## vm_info: one task, wall the task's own, CPU its playbook's; median of %d rounds\n"
          % rounds)
    print("| task | wall s | playbook CPU s |")
    print("|---|---|---|")
    for name, label in (("ours", "resilient.virt.vm_info"),
                        ("peer", "community.proxmox.proxmox_vm_info"),
                        ("debug_cpu", "ansible.builtin.debug (the same playbook)")):
        row = vm_info[name] if name != "debug_cpu" else {"wall": None, "cpu": vm_info[name]}
        print("| %s | %s | %.2f |" % (label, "-" if row["wall"] is None else "%.2f" % row["wall"],
                                      row["cpu"]))
    print("\n## Create a VM, then start it: wall the task's own, CPU its playbook's (a debug "
          "task's: %.2f s); median of %d rounds\n" % (create_start["debug_cpu"], rounds))
    print("| task | ours wall s | proxmox_kvm wall s | ours / proxmox_kvm wall | "
          "ours playbook CPU s | proxmox_kvm playbook CPU s | ours / proxmox_kvm CPU |")
    print("|---|---|---|---|---|---|---|")
    for step in ("create", "start"):
        ours, theirs = create_start["ours_" + step], create_start["peer_" + step]
        ratios = create_start[step + "_ratio"]
        print("| %s | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx |" % (
            step, ours["wall"], theirs["wall"], ratios["wall"], ours["cpu"], theirs["cpu"],
            ratios["cpu"]))
    print("\n## Under faults (the lab's three-node cluster, PVE seconds real): what each ends "
          "with; seconds are the task's own\n")
    print("| fault | who | outcome | s | afterwards |")
    print("|---|---|---|---|---|")
    for row in faults:
        print("| %s | %s | %s | %.1f | %s |" % (
            row["fault"], "resilient.virt" if row["who"] == "ours" else "community.proxmox",
            row["outcome"].replace("|", "/"), row["seconds"], row["check"]))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"settings": {"vms": args.vms, "nodes": len(NODES), "rounds": rounds,
                                    "latency": args.latency},
                       "inventory": inventory, "ratio": ratio, "want_facts_ratio": facts_ratio,
                       "targets": [{"name": "inventory of %d VMs, ours / community.proxmox "
                                            "(wall)" % args.vms, "measured": "%.2fx" % ratio,
                                    "target": "<= %gx" % TARGET, "passed": ratio <= TARGET}],
                       "vm_info": vm_info, "create_start": create_start,
                       "faults": faults}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
