"""Snapshots: resilient.virt.vm_snapshot against virsh snapshot-create-as / snapshot-revert.

On one lab hypervisor (``--hypervisor``, default hv3), a running VM (TCG, no OS, 64 MiB) whose
only disk is a 1 GiB qcow2 v3 volume full of data (``--size``, MiB). ``--rounds`` rounds
(default 7), the two cases interleaved (each round starts with the other one), medians kept:

* **vm_snapshot tasks**: one ``ansible-playbook`` run of ``resilient.virt.vm_info`` on the VM (a
  warm-up: it loads the collection, which a playbook does once), then ``vm_snapshot`` with
  ``memory: true`` (an internal snapshot of the running VM, its memory included), then
  ``state: reverted`` to it, then ``state: absent``. The figures are the take and revert tasks'
  durations as Ansible's ``ansible.posix.json`` callback reports them (task start to result);
* **virsh**: ``virsh snapshot-create-as DOM NAME`` (for a running VM with qcow2 disks, the same
  internal snapshot with memory) and ``virsh snapshot-revert DOM NAME``, each timed as one
  process run, then ``virsh snapshot-delete`` (not timed).

Target: take + revert by the tasks within 1.2x virsh's take + revert. The tasks do what virsh
does plus their reads (the VM and its snapshots, before and after) and Ansible's cost of a task.

The simulator against ``community.vmware.vmware_guest_snapshot`` is not measured: the lab's
simulator (Debian's govmomi 0.24.2) crashes on the property reads community.vmware makes,
unless it is built from a patched copy of govmomi's simulator package (the lab does not).

Every domain and volume this bench makes is named ``bench-snap-*`` and removed before it
starts and when it ends.

    python3 bench/bench_snapshots.py [--lab-dir DIR] [--quick] [--json PATH]

``--quick``: 3 rounds. Prints markdown tables with the target and pass/fail; exits 0 when the
bench ran (a missed target is reported, not an error) and 1 when it could not run.
"""
import argparse
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
from bench_tasks import BenchError, Runner, print_targets, run_and_report  # noqa: E402

PREFIX = "bench-snap-"
TARGET_VS_VIRSH = 1.2  # take + revert, tasks / virsh


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


def run(args):
    hv = Hypervisor(args.lab_dir, args.hypervisor, prefix=PREFIX)
    workdir = tempfile.mkdtemp(prefix=PREFIX)
    began = time.perf_counter()
    result = {"settings": {"hypervisor": hv.name, "size_mib": args.size, "rounds": args.rounds,
                           "python": sys.version.split()[0], "cpus": os.cpu_count()},
              "task": [], "virsh": []}
    try:
        clean(hv)
        runner = Runner(workdir)
        tasks = Tasks(hv, "sqlite:///" + os.path.join(workdir, "state.db"))
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
        shutil.rmtree(workdir, ignore_errors=True)
    if left:
        raise BenchError("%d bench-snap-* domains or volumes are left on %s" % (left, hv.name))
    for label in ("task", "virsh"):
        rows = result[label]
        result[label] = {"take": statistics.median(r[0] for r in rows),
                         "revert": statistics.median(r[1] for r in rows),
                         "both": statistics.median(r[0] + r[1] for r in rows),
                         "rounds": [[round(x, 3) for x in r] for r in rows]}
    result["ratio"] = result["task"]["both"] / result["virsh"]["both"]
    result["seconds"] = time.perf_counter() - began
    result["targets"] = [{"name": "snapshot take + revert: vm_snapshot tasks / virsh",
                          "measured": "%.2f" % result["ratio"],
                          "target": "<= %.1f" % TARGET_VS_VIRSH,
                          "passed": result["ratio"] <= TARGET_VS_VIRSH}]
    return result


def print_report(result):
    settings = result["settings"]
    print("Snapshot and revert of a running VM (TCG, no OS, 64 MiB) on %s whose qcow2 v3 disk "
          "(%d MiB) is full of data; internal snapshots with memory; medians of %d rounds. "
          "Tasks: durations from the ansible.posix.json callback after a warm-up task; virsh: "
          "one process run each.\n" % (settings["hypervisor"], settings["size_mib"],
                                        settings["rounds"]))
    print("| case | take s | revert s | take + revert s |")
    print("|---|---:|---:|---:|")
    for label, title in (("task", "vm_snapshot tasks"),
                         ("virsh", "virsh snapshot-create-as / snapshot-revert")):
        row = result[label]
        print("| %s | %.2f | %.2f | %.2f |" % (title, row["take"], row["revert"], row["both"]))
    print("| tasks / virsh | | | %.2f |" % result["ratio"])
    print("\nThe simulator against community.vmware.vmware_guest_snapshot: not measured (the lab's "
          "simulator crashes on community.vmware's property reads).")
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
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 3 if args.quick else 7
    args.lab_dir = os.path.abspath(args.lab_dir)
    return run_and_report("bench_snapshots", run, print_report, args)


if __name__ == "__main__":
    sys.exit(main())
