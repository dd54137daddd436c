"""Snapshots: resilient.virt.vm_snapshot against virsh and community.vmware.vmware_guest_snapshot.

1. **libvirt**, on one lab hypervisor (``--hypervisor``, default hv3): a running VM (TCG, no
   OS, 64 MiB) whose only disk is a 1 GiB qcow2 v3 volume full of data (``--size``, MiB).
   ``--rounds`` rounds (default 7), the two cases interleaved (each round starts with the other
   one), medians kept:

   * **vm_snapshot tasks**: one ``ansible-playbook`` run of ``resilient.virt.vm_info`` on the VM
     (a warm-up: it loads the collection, which a playbook does once), then ``vm_snapshot``
     with ``memory: true`` (an internal snapshot of the running VM, its memory included), then
     ``state: reverted`` to it, then ``state: absent``. The figures are the take and revert
     tasks' durations as Ansible's ``ansible.posix.json`` callback reports them (task start to
     result);
   * **virsh**: ``virsh snapshot-create-as DOM NAME`` (for a running VM with qcow2 disks, the
     same internal snapshot with memory) and ``virsh snapshot-revert DOM NAME``, each timed as
     one process run, then ``virsh snapshot-delete`` (not timed).

   Target: take + revert by the tasks within 1.2x virsh's take + revert. The tasks do what
   virsh does plus their reads (the VM and its snapshots, before and after) and Ansible's cost
   of a task.
2. **vSphere**, on a simulator of its own (the lab's, HTTPS with a certificate of the lab CA,
   verified by both sides: ``ca_path`` for ours, ``SSL_CERT_FILE`` for the peer), on its
   powered-on VM ``DC0_C0_RP0_VM0``: a snapshot with memory taken, reverted to, then removed,
   by ``resilient.virt.vm_snapshot`` tasks (in-process, the default) and by
   ``community.vmware.vmware_guest_snapshot`` tasks (``memory_dump: true``, then ``state:
   revert``, then ``state: absent``), ``--rounds`` rounds, the two interleaved. Each task runs
   in a playbook of its own after a warm-up task that loads its collection (``vm_info`` for
   ours, ``community.vmware.vmware_guest_info`` for the peer), and each round also runs the
   warm-up task alone. Per task: the **wall** time is its duration from the
   ``ansible.posix.json`` callback; the **CPU** time is that of ``ansible-playbook`` and every
   process it waited for, its playbook's minus the warm-up playbook's of the same round; the
   **simulator's CPU** is taken the same way, from ``/proc``. Medians, and ours / the peer's
   for each. The bench's own pyVmomi session checks after each task that the snapshot exists
   with memory, that the VM runs at it after the revert, and that it is gone after the removal.
   No target: the figures are reported as measured.

Every domain and volume this bench makes is named ``bench-snap-*`` and removed before it
starts and when it ends; the simulator is stopped at the end.

    python3 bench/bench_snapshots.py [--lab-dir DIR] [--quick] [--only libvirt|vsphere]
                                     [--json PATH]

``--quick``: 3 rounds. ``--only``: one part (vsphere needs no lab). Prints markdown tables with
the target and pass/fail; exits 0 when the bench ran (a missed target is reported, not an error)
and 1 when it could not run.
"""
import argparse
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time

import libvirt
from checkout import ROOT, use_checkout

use_checkout()

from bench_backup import Hypervisor, make_vm, play  # noqa: E402
from bench_images import _Session  # noqa: E402
from bench_tasks import BenchError, Runner, _children_cpu, print_targets, run_and_report  # noqa: E402

PREFIX = "bench-snap-"
TARGET_VS_VIRSH = 1.2  # take + revert, tasks / virsh
PARTS = ("libvirt", "vsphere")
VSPHERE_VM = "DC0_C0_RP0_VM0"  # a powered-on VM of the simulator's inventory
SIDES = ("ours", "peer")
OPERATIONS = ("take", "revert", "remove")


class Tasks:
    """The vm_snapshot tasks of this bench on one VM, with a private state store."""

    def __init__(self, hv, store_url):
        self.hv, self.store_url = hv, store_url

    def _args(self, **args):
        return dict(args, provider=self.hv.provider(), state_store=self.store_url)

    def round(self, vm, name):
        return [{"name": "warm-up", "resilient.virt.vm_info": self._args(name=vm)},
                {"name": "take", "resilient.virt.vm_snapshot": self._args(
                    vm=vm, name=name, memory=True)},
                {"name": "revert", "resilient.virt.vm_snapshot": self._args(
                    vm=vm, name=name, state="reverted")},
                {"name": "delete", "resilient.virt.vm_snapshot": self._args(
                    vm=vm, name=name, state="absent")}]


def task_case(runner, tasks, dom, name):
    found = dict((t["name"], t) for t in play(runner, name, tasks.round(dom.name(), name)))
    if not dom.isActive() or not found["take"]["result"]["snapshot"]["memory"]:
        raise BenchError("%s: the VM is not running after the revert, or the snapshot holds no "
                         "memory" % name)
    return found["take"]["seconds"], found["revert"]["seconds"]


def _timed(hv, *command):
    began = time.perf_counter()
    hv.virsh(*command)
    return time.perf_counter() - began


def virsh_case(hv, dom, name):
    take = _timed(hv, "snapshot-create-as", dom.name(), name)
    revert = _timed(hv, "snapshot-revert", dom.name(), name)
    if not dom.isActive():
        raise BenchError("virsh: the VM is not running after the revert")
    hv.virsh("snapshot-delete", dom.name(), name)
    return take, revert


def clean(hv):
    """Every bench-snap-* domain (with its snapshots' metadata) and volume removed."""
    for dom in hv.conn.listAllDomains(0):
        if dom.name().startswith(PREFIX):
            if dom.isActive():
                dom.destroy()
            dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
    hv.clean()


def run_libvirt(args, workdir, result):
    """The libvirt part: fills ``result``'s task, virsh, ratio and targets."""
    hv = Hypervisor(args.lab_dir, args.hypervisor, prefix=PREFIX)
    result["settings"].update(hypervisor=hv.name, size_mib=args.size)
    result.update(task=[], virsh=[])
    try:
        clean(hv)
        runner = Runner(workdir)
        tasks = Tasks(hv, "sqlite:///" + os.path.join(workdir, "libvirt.db"))
        dom, _path, _filled = make_vm(hv, PREFIX + "vm", args.size)
        for index in range(args.rounds):
            cases = [("task", lambda i=index: task_case(runner, tasks, dom, "%st%d" % (PREFIX, i))),
                     ("virsh", lambda i=index: virsh_case(hv, dom, "%sv%d" % (PREFIX, i)))]
            for label, case in (cases if index % 2 == 0 else cases[::-1]):
                result[label].append(case())
    finally:
        clean(hv)
        left = sum(map(len, hv.leftovers()))
        hv.close()
    if left:
        raise BenchError("%d bench-snap-* domains or volumes are left on %s" % (left, hv.name))
    for label in ("task", "virsh"):
        rows = result[label]
        result[label] = {"take": statistics.median(r[0] for r in rows),
                         "revert": statistics.median(r[1] for r in rows),
                         "both": statistics.median(r[0] + r[1] for r in rows),
                         "rounds": [[round(x, 3) for x in r] for r in rows]}
    result["ratio"] = result["task"]["both"] / result["virsh"]["both"]
    result["targets"] = [{"name": "snapshot take + revert: vm_snapshot tasks / virsh",
                          "measured": "%.2f" % result["ratio"],
                          "target": "<= %.1f" % TARGET_VS_VIRSH,
                          "passed": result["ratio"] <= TARGET_VS_VIRSH}]


# ---------------------------------------------------------------- vSphere

class VSphereTasks:
    """The warm-up task and the task of each operation, ours and the peer's, on VSPHERE_VM."""

    def __init__(self, settings, store_url):
        self.settings, self.store_url = settings, store_url

    def _ours(self, **args):
        return dict(args, provider=self.settings, state_store=self.store_url)

    def _peer(self, **args):
        s = self.settings
        return dict(args, hostname=s["host"], port=s["port"], username=s["username"],
                    password=s["password"], validate_certs=True, datacenter="DC0")

    def warm_up(self, side):
        if side == "ours":
            return {"name": "warm-up", "resilient.virt.vm_info": self._ours(name=VSPHERE_VM)}
        return {"name": "warm-up", "community.vmware.vmware_guest_info": self._peer(
            name=VSPHERE_VM)}

    def task(self, side, operation, snapshot):
        if side == "ours":
            state = {"take": "present", "revert": "reverted", "remove": "absent"}[operation]
            args = self._ours(vm=VSPHERE_VM, name=snapshot, state=state)
            if operation == "take":
                args["memory"] = True
            return {"name": operation, "resilient.virt.vm_snapshot": args}
        state = {"take": "present", "revert": "revert", "remove": "absent"}[operation]
        args = self._peer(name=VSPHERE_VM, folder="/DC0/vm", snapshot_name=snapshot, state=state)
        if operation == "take":
            args["memory_dump"] = True
        return {"name": operation, "community.vmware.vmware_guest_snapshot": args}


def _process_cpu(pid):
    """CPU seconds (user + system) process ``pid`` has used so far."""
    with open("/proc/%d/stat" % pid) as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measured(runner, name, tasks, simulator_pid):
    """({task name: seconds}, CPU s of ansible-playbook and its children, simulator CPU s) of
    one playbook run."""
    cpu, simulator = _children_cpu(), _process_cpu(simulator_pid)
    found = play(runner, name, tasks)
    return (dict((task["name"], task["seconds"]) for task in found),
            _children_cpu() - cpu, _process_cpu(simulator_pid) - simulator)


def _snapshots(session):
    """{name: (snapshot ref, its recorded power state)} of VSPHERE_VM, and its current one."""
    vm = session.vm(VSPHERE_VM)
    found, todo = {}, list(vm.snapshot.rootSnapshotList if vm.snapshot else [])
    while todo:
        node = todo.pop()
        found[node.name] = (node.snapshot, str(node.state))
        todo.extend(node.childSnapshotList)
    return found, (vm.snapshot.currentSnapshot if vm.snapshot else None), vm


def _check(session, side, operation, snapshot):
    """BenchError unless the simulator holds what ``operation`` of ``side`` should leave."""
    found, current, vm = _snapshots(session)
    if operation == "take" and found.get(snapshot, (None, None))[1] != "poweredOn":
        raise BenchError("%s take: no snapshot %s with memory on %s (found %s)"
                         % (side, snapshot, VSPHERE_VM, found))
    if operation == "revert" and (current != found[snapshot][0]
                                  or str(vm.runtime.powerState) != "poweredOn"):
        raise BenchError("%s revert: %s is not running at snapshot %s" % (side, VSPHERE_VM,
                                                                          snapshot))
    if operation == "remove" and snapshot in found:
        raise BenchError("%s remove: snapshot %s is still there" % (side, snapshot))


def vsphere_round(runner, tasks, session, pid, side, number):
    """[[wall s, CPU s, simulator CPU s] of each operation] of one round of ``side``."""
    snapshot = "%s%s%d" % (PREFIX, side[0], number)
    label = "%s%s-%d" % (PREFIX, side, number)
    _seconds, base_cpu, base_simulator = _measured(runner, label + "-warm-up",
                                                   [tasks.warm_up(side)], pid)
    rows = []
    for operation in OPERATIONS:
        seconds, cpu, simulator = _measured(runner, "%s-%s" % (label, operation), [
            tasks.warm_up(side), tasks.task(side, operation, snapshot)], pid)
        _check(session, side, operation, snapshot)
        rows.append([seconds[operation], cpu - base_cpu, simulator - base_simulator])
    return rows


def _medians(rounds):
    """{operation and "all": {wall, cpu, simulator_cpu}} of [[per operation rows] per round]."""
    keys = ("wall", "cpu", "simulator_cpu")
    out = dict((operation, dict((key, statistics.median(r[i][k] for r in rounds))
                                for k, key in enumerate(keys)))
               for i, operation in enumerate(OPERATIONS))
    out["all"] = dict((key, statistics.median(sum(row[k] for row in r) for r in rounds))
                      for k, key in enumerate(keys))
    return out


def run_vsphere(args, workdir, result):
    """The vSphere part: fills ``result["vsphere"]``."""
    vcsim = importlib.import_module("vcsim")
    run_dir = os.path.join(workdir, "vsphere")
    bin_dir = os.path.join(vcsim.DEFAULT_RUN_DIR, "vcsim", "bin")
    settings = dict(vcsim.start(run_dir, bin_dir=bin_dir))
    samples = dict((side, []) for side in SIDES)
    try:
        pid = vcsim.status(run_dir)["pid"]
        runner = Runner(workdir)
        # the peer has no CA option: OpenSSL's default trust reads SSL_CERT_FILE
        runner.env = dict(runner.env, SSL_CERT_FILE=settings["ca_path"])
        tasks = VSphereTasks(settings, "sqlite:///" + os.path.join(workdir, "vsphere.db"))
        session = _Session(settings)
        try:
            for number in range(args.rounds):
                for side in (SIDES if number % 2 == 0 else SIDES[::-1]):
                    samples[side].append(vsphere_round(runner, tasks, session, pid, side, number))
        finally:
            session.close()
    finally:
        vcsim.stop(run_dir)
    medians = dict((side, _medians(samples[side])) for side in SIDES)
    result["vsphere"] = {
        "vm": VSPHERE_VM, "rounds": args.rounds, "medians": medians,
        "ratios": dict((operation, dict(
            (key, medians["ours"][operation][key] / medians["peer"][operation][key])
            for key in ("wall", "cpu"))) for operation in OPERATIONS + ("all",)),
        "samples": dict((side, [[[round(x, 3) for x in row] for row in rounds]
                                for rounds in samples[side]]) for side in SIDES)}


def run(args):
    workdir = tempfile.mkdtemp(prefix=PREFIX)
    began = time.perf_counter()
    result = {"settings": {"rounds": args.rounds, "parts": args.only,
                           "python": sys.version.split()[0], "cpus": os.cpu_count()},
              "targets": []}
    try:
        if "libvirt" in args.only:
            run_libvirt(args, workdir, result)
        if "vsphere" in args.only:
            run_vsphere(args, workdir, result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result["seconds"] = time.perf_counter() - began
    return result


def _print_libvirt(result):
    settings = result["settings"]
    print("Snapshot and revert of a running VM (TCG, no OS, 64 MiB) on %s whose qcow2 v3 disk "
          "(%d MiB) is full of data; internal snapshots with memory; medians of %d rounds. "
          "Tasks: durations from the ansible.posix.json callback after a warm-up task; virsh: "
          "one process run each.\n"
          % (settings["hypervisor"], settings["size_mib"], settings["rounds"]))
    print("| case | take s | revert s | take + revert s |")
    print("|---|---:|---:|---:|")
    for label, title in (("task", "vm_snapshot tasks"),
                         ("virsh", "virsh snapshot-create-as / snapshot-revert")):
        row = result[label]
        print("| %s | %.2f | %.2f | %.2f |" % (title, row["take"], row["revert"], row["both"]))
    print("| tasks / virsh | | | %.2f |" % result["ratio"])


def _print_vsphere(vsphere):
    print("\nSnapshot with memory of the powered-on VM %s of a vSphere simulator (the lab's, "
          "HTTPS verified with the lab CA), taken, reverted to and removed: "
          "resilient.virt.vm_snapshot (in-process) against "
          "community.vmware.vmware_guest_snapshot; each task in a playbook of its own after a "
          "warm-up task; medians of %d rounds. Wall: the task's duration (ansible.posix.json "
          "callback); CPU: ansible-playbook and its children, minus the warm-up playbook's; "
          "simulator CPU: the same, of the simulator process.\n"
          % (vsphere["vm"], vsphere["rounds"]))
    print("| task | vm_snapshot wall s | CPU s | simulator CPU s | vmware_guest_snapshot wall s "
          "| CPU s | simulator CPU s | wall ours / peer | CPU ours / peer |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for operation, title in (("take", "take"), ("revert", "revert"), ("remove", "remove"),
                             ("all", "all three")):
        ours, peer = vsphere["medians"]["ours"][operation], vsphere["medians"]["peer"][operation]
        ratio = vsphere["ratios"][operation]
        print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
            title, ours["wall"], ours["cpu"], ours["simulator_cpu"], peer["wall"], peer["cpu"],
            peer["simulator_cpu"], ratio["wall"], ratio["cpu"]))


def print_report(result):
    if "libvirt" in result["settings"]["parts"]:
        _print_libvirt(result)
    if "vsphere" in result["settings"]["parts"]:
        _print_vsphere(result["vsphere"])
    if result["targets"]:
        print_targets(result["targets"])
    print("\nWhole bench: %.0f s." % result["seconds"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab-dir", default=os.environ.get("RESILIENT_VIRT_LAB_DIR",
                                                            os.path.join(ROOT, "lab", "run")))
    parser.add_argument("--hypervisor", default="hv3", help="lab hypervisor (default hv3)")
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--size", type=int, default=1024, help="disk size in MiB (default 1024)")
    parser.add_argument("--rounds", type=int, help="rounds (default 7, quick 3)")
    parser.add_argument("--only", choices=PARTS, help="one part (default: both)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 3 if args.quick else 7
    args.only = [args.only] if args.only else list(PARTS)
    args.lab_dir = os.path.abspath(args.lab_dir)
    return run_and_report("bench_snapshots", run, print_report, args)


if __name__ == "__main__":
    sys.exit(main())
