"""Live migration: resilient.virt.vm_migrate against ``virsh migrate --live --copy-storage-all``.

On two lab hypervisors (``--source``, default hv1, and ``--target``, default hv2), a running VM
(TCG, no OS, 64 MiB) whose only disk is a 256 MiB qcow2 v3 volume full of data (``--size``,
MiB) moves from the source to the target, its disk copied (non-shared storage), ``--rounds``
rounds (default 5), the two cases interleaved (each round starts with the other one), medians
kept. Each round makes a new VM on the source (not timed) and removes it from the target after.

* **vm_migrate task**: one ``ansible-playbook`` run of ``resilient.virt.vm_info`` on the VM (a
  warm-up: it loads the collection, which a playbook does once), then ``vm_migrate`` to the
  target provider (``allow_zone_change``: the lab's hv1 and hv2 are in two zones). The figure
  is the task's duration as Ansible's ``ansible.posix.json`` callback reports it (task start to
  result), and the guest's downtime the task returns (libvirt's completed job statistics).
* **virsh**: ``virsh -c SOURCE migrate --live --persistent --undefinesource --copy-storage-all
  DOM TARGET``, timed as one process run (libvirt makes the target volume itself, in the pool of
  the same path); the downtime from ``virsh -c TARGET domjobinfo DOM --completed``. The source's
  volume, which virsh leaves behind, is deleted after (not timed); the task deletes it within
  its time.

Both check that the VM then runs on the target (state reason ``migrated``) and no longer exists
on the source. Target: the task within 1.2x virsh's time. The task does what virsh does plus
its reads (the VM on both hosts, the target's capacity, the failover reservations in the state
store), making the target volume, deleting the source volume, and Ansible's cost of a task.

    python3 bench/bench_migrate.py [--lab-dir DIR] [--quick] [--size MIB] [--rounds N]
                                   [--json PATH]

``--quick``: 3 rounds. Prints markdown tables with the target and pass/fail; exits 0 when the
bench ran (a missed target is reported, not an error) and 1 when it could not run.
"""
import argparse
import os
import re
import statistics
import sys
import tempfile
import time

import libvirt
from checkout import ROOT, use_checkout

use_checkout()

from bench_backup import Hypervisor, make_vm, play  # noqa: E402
from bench_tasks import BenchError, Runner, print_targets, run_and_report  # noqa: E402

PREFIX = "bench-mig-"
TARGET_VS_VIRSH = 1.2  # migration time, task / virsh
DOWNTIME = re.compile(r"^Total downtime:\s+(\d+)\s*ms", re.MULTILINE)


def _moved(source, target, name):
    """BenchError unless ``name`` runs on ``target`` after a migration and ``source`` has none."""
    dom = target.conn.lookupByName(name)
    if dom.state() != [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_MIGRATED]:
        raise BenchError("%s is %r on %s, not running after a migration" % (
            name, dom.state(), target.name))
    if name in [d.name() for d in source.conn.listAllDomains(0)]:
        raise BenchError("%s is still on %s after its migration" % (name, source.name))


def task_case(runner, source, target, store_url, name, size):
    make_vm(source, name, size)
    tasks = [{"name": "warm-up", "resilient.virt.vm_info": {
        "provider": source.provider(), "name": name, "state_store": store_url}},
        {"name": "migrate", "resilient.virt.vm_migrate": {
            "provider": source.provider(), "vm": name, "target": target.provider(),
            "allow_zone_change": True, "state_store": store_url}}]
    found = dict((t["name"], t) for t in play(runner, name, tasks))
    _moved(source, target, name)
    migration = found["migrate"]["result"]["migration"]
    return found["migrate"]["seconds"], migration["downtime_ms"]


def virsh_case(source, target, name, size):
    make_vm(source, name, size)
    began = time.perf_counter()
    source.virsh("migrate", "--live", "--persistent", "--undefinesource", "--copy-storage-all",
                 name, target.uri)
    seconds = time.perf_counter() - began
    _moved(source, target, name)
    found = DOWNTIME.search(target.virsh("domjobinfo", name, "--completed"))
    source.clean()  # the source volume virsh left behind
    return seconds, int(found.group(1)) if found else None


def run(args):
    result = {"settings": {"rounds": args.rounds, "size_mib": args.size},
              "task": [], "virsh": []}
    source = Hypervisor(args.lab_dir, args.source, prefix=PREFIX)
    target = Hypervisor(args.lab_dir, args.target, prefix=PREFIX)
    result["settings"].update(source=source.name, target=target.name)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-migrate-") as workdir:
            for hv in (source, target):
                hv.clean()
            runner = Runner(workdir)
            store = "sqlite:///" + os.path.join(workdir, "migrate.db")
            for index in range(args.rounds):
                cases = [("task", lambda i=index: task_case(
                    runner, source, target, store, "%st%d" % (PREFIX, i), args.size)),
                    ("virsh", lambda i=index: virsh_case(
                        source, target, "%sv%d" % (PREFIX, i), args.size))]
                for label, case in (cases if index % 2 == 0 else cases[::-1]):
                    result[label].append(case())
                    target.clean()
    finally:
        for hv in (source, target):
            hv.clean()
        left = sum(len(part) for hv in (source, target) for part in hv.leftovers())
        for hv in (source, target):
            hv.close()
    if left:
        raise BenchError("%d bench-mig-* domains or volumes are left" % left)
    for label in ("task", "virsh"):
        rows = result[label]
        downtimes = [r[1] for r in rows if r[1] is not None]
        result[label] = {"seconds": statistics.median(r[0] for r in rows),
                         "downtime_ms": statistics.median(downtimes) if downtimes else None,
                         "rounds": [[round(r[0], 3), r[1]] for r in rows]}
    result["ratio"] = result["task"]["seconds"] / result["virsh"]["seconds"]
    result["targets"] = [{"name": "live migration with a %d MiB disk copied: vm_migrate task / "
                          "virsh migrate --live --copy-storage-all" % args.size,
                          "measured": "%.2f" % result["ratio"],
                          "target": "<= %.1f" % TARGET_VS_VIRSH,
                          "passed": result["ratio"] <= TARGET_VS_VIRSH}]
    return result


def print_report(result):
    settings = result["settings"]
    print("Live migration of a running VM with a %d MiB disk full of data, %s -> %s; medians of "
          "%d rounds. Task: its duration from the ansible.posix.json callback after a warm-up "
          "task; virsh: one process run. Downtime: libvirt's completed job statistics (the "
          "task's result; virsh domjobinfo --completed)." % (
              settings["size_mib"], settings["source"], settings["target"], settings["rounds"]))
    print("\n| case | seconds | guest downtime (ms) |")
    print("|---|---:|---:|")
    for label, title in (("task", "resilient.virt.vm_migrate task"),
                         ("virsh", "virsh migrate --live --copy-storage-all")):
        row = result[label]
        print("| %s | %.2f | %s |" % (title, row["seconds"], row["downtime_ms"]))
    print("\nvm_migrate / virsh: %.2fx" % result["ratio"])
    print_targets(result["targets"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    lab_dir = os.environ.get("RESILIENT_VIRT_LAB_DIR", os.path.join(ROOT, "lab", "run"))
    parser.add_argument("--lab-dir", default=lab_dir)
    parser.add_argument("--source", default="hv1", help="lab hypervisor (default hv1)")
    parser.add_argument("--target", default="hv2", help="lab hypervisor (default hv2)")
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--size", type=int, default=256, help="disk size in MiB (default 256)")
    parser.add_argument("--rounds", type=int, help="rounds (default 5, quick 3)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (3 if args.quick else 5)
    return run_and_report("bench_migrate", run, print_report, args)


if __name__ == "__main__":
    sys.exit(main())
