"""Proxmox VE: the hypervisors inventory and vm_info against community.proxmox, on one simulator.

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
   ``community.proxmox.proxmox_vm_info`` (``name``), each in a playbook of its own. The cost of
   the task is its playbook's wall and CPU time minus those of the same playbook with a
   ``ansible.builtin.debug`` task instead (Ansible's start and the play), medians over the
   rounds. No target: reported as measured.

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
import time

import yaml
from checkout import ROOT, use_checkout

use_checkout()

HOST = "127.0.0.1"
NODES = ("pve1", "pve2", "pve3")
TARGET = 0.2
READY_TIMEOUT = 60


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


def _playbook(path, task, defaults=None):
    play = {"name": "bench", "hosts": "localhost", "gather_facts": False, "tasks": [task]}
    if defaults:
        play["module_defaults"] = {"group/resilient.virt.all": defaults}
    return _write(path, [play])


def bench_vm_info(sim, workdir, env, rounds):
    name = "vm-0001"
    cases = {
        "baseline": _playbook(os.path.join(workdir, "baseline.yml"),
                              {"ansible.builtin.debug": {"msg": "baseline"}}),
        "ours": _playbook(os.path.join(workdir, "ours_info.yml"),
                          {"resilient.virt.vm_info": {"provider": "pve", "name": name}},
                          {"providers": {"pve": _ours_provider(sim)},
                           "state_store": "sqlite:///%s" % os.path.join(workdir, "info.db")}),
        "peer": _playbook(os.path.join(workdir, "peer_info.yml"), {
            "community.proxmox.proxmox_vm_info": {
                "api_host": HOST, "api_port": sim.port, "api_user": "root@pam",
                "api_password": sim.password, "validate_certs": True, "name": name}}),
    }
    samples = {case: [] for case in cases}
    for index in range(rounds):
        order = list(cases) if index % 2 == 0 else list(reversed(list(cases)))
        for case in order:
            wall, cpu, _sim_cpu, _out = measured(
                ["ansible-playbook", "-i", "localhost,", "-c", "local", cases[case]],
                sim, workdir, env)
            samples[case].append((wall, cpu))
    base_wall = statistics.median(r[0] for r in samples["baseline"])
    base_cpu = statistics.median(r[1] for r in samples["baseline"])
    return {case: {"wall": statistics.median(r[0] for r in samples[case]) - base_wall,
                   "cpu": statistics.median(r[1] for r in samples[case]) - base_cpu}
            for case in ("ours", "peer")}


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
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".build", "collections") + ":"
                   + os.environ.get("ANSIBLE_COLLECTIONS_PATH", ""),
                   ANSIBLE_INVENTORY_ENABLED="resilient.virt.hypervisors,"
                                             "community.proxmox.proxmox")
        try:
            inventory = bench_inventory(sim, workdir, env, rounds)
            vm_info = bench_vm_info(sim, workdir, env, rounds)
        except RuntimeError as exc:
            print("bench_proxmox: cannot run: %s" % exc)
            return 1
        finally:
            sim.stop()
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
    print("## vm_info: one task, its playbook minus a debug task's\n")
    print("| task | wall s | CPU s |")
    print("|---|---|---|")
    for name, label in (("ours", "resilient.virt.vm_info"),
                        ("peer", "community.proxmox.proxmox_vm_info")):
        print("| %s | %.2f | %.2f |" % (label, vm_info[name]["wall"], vm_info[name]["cpu"]))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"settings": {"vms": args.vms, "nodes": len(NODES), "rounds": rounds,
                                    "latency": args.latency},
                       "inventory": inventory, "ratio": ratio, "want_facts_ratio": facts_ratio,
                       "targets": [{"name": "inventory of %d VMs, ours / community.proxmox "
                                            "(wall)" % args.vms, "measured": "%.2fx" % ratio,
                                    "target": "<= %gx" % TARGET, "passed": ratio <= TARGET}],
                       "vm_info": vm_info}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
