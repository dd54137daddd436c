"""Draining a hypervisor: resilient.virt.hypervisor moves ``--vms`` running VMs off a lab
hypervisor and marks it in maintenance.

On two lab hypervisors (``--source``, default hv1, and ``--target``, default hv2), ``--vms``
running VMs (default 10; TCG, no OS, 64 MiB, 1 vCPU, a 16 MiB qcow2 disk full of data) are made
on the source (not timed); then one ``ansible-playbook`` run of ``resilient.virt.vm_info`` (a
warm-up: it loads the collection, which a playbook does once) and ``resilient.virt.hypervisor``
(``state: maintenance``, ``targets: [target]``, ``parallel: --parallel``, default 2) on the
source. The figure is the drain task's duration as Ansible's ``ansible.posix.json`` callback
reports it (task start to result). The providers' vCPUs are overcommitted 16x
(``cpu_allocation_ratio``): other guests of the lab may run there.

While the task runs, a thread of the bench's own samples both hypervisors with libvirt-python
every 0.2 s: the VMs of the bench that are neither running nor paused on either host (stopped:
a live migration pauses the VM for its switchover, counted apart) and, for each hypervisor,
the memory and vCPUs of its active domains against its capacity as the task counts it (host
memory; host CPUs x 16). Afterwards every VM must run on the target,
migrated, and none be left on the source. Targets: no VM stopped at any sample, no hypervisor
over capacity at any sample, every VM moved.

    python3 bench/bench_drain.py [--lab-dir DIR] [--quick] [--vms N] [--parallel N]
                                 [--json PATH]

``--quick``: 4 VMs. Prints markdown tables with the targets and pass/fail; exits 0 when the bench
ran (a missed target is reported, not an error) and 1 when it could not run.
"""
import argparse
import os
import sys
import tempfile
import threading

import libvirt
from checkout import ROOT, use_checkout

use_checkout()

from bench_backup import Hypervisor, make_vm, play  # noqa: E402
from bench_tasks import BenchError, Runner, print_targets, run_and_report  # noqa: E402

PREFIX = "bench-drn-"
RATIO = 16  # cpu_allocation_ratio of the bench's providers
SAMPLE_EVERY = 0.2  # seconds between two samples of the monitor
DISK_MIB = 16


class Monitor(threading.Thread):
    """Samples ``hypervisors`` until stopped: the most each one ran (memory MiB, vCPUs) against
    its capacity; the bench's VMs that were neither running nor paused anywhere at some sample
    (stopped), and those seen paused and running nowhere (the switchover of a live migration,
    which its downtime measures)."""

    def __init__(self, hypervisors, names):
        super().__init__(daemon=True)
        self.hypervisors, self.names = hypervisors, set(names)
        self.capacity = dict((hv.name, (hv.conn.getInfo()[1], hv.conn.getInfo()[2] * RATIO))
                             for hv in hypervisors)
        self.peak = dict((hv.name, [0, 0]) for hv in hypervisors)
        self.not_running = set()
        self.paused = set()
        self.samples = 0
        self.done = threading.Event()

    def sample(self):
        running, paused = set(), set()
        for hv in self.hypervisors:
            memory_kib = vcpus = 0
            for dom in hv.conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
                try:
                    state, _max, memory, cpus, _time = dom.info()
                    name = dom.name()
                except libvirt.libvirtError:  # gone between the list and the read
                    continue
                memory_kib += memory
                vcpus += cpus
                if state == libvirt.VIR_DOMAIN_RUNNING:
                    running.add(name)
                elif state == libvirt.VIR_DOMAIN_PAUSED:
                    paused.add(name)
            peak = self.peak[hv.name]
            peak[0], peak[1] = max(peak[0], memory_kib // 1024), max(peak[1], vcpus)
        self.not_running |= self.names - running - paused
        self.paused |= self.names & paused - running
        self.samples += 1

    def run(self):
        while not self.done.is_set():
            self.sample()
            self.done.wait(SAMPLE_EVERY)

    def over(self):
        """The hypervisors whose peak passed their capacity."""
        return sorted(name for name, (memory, cpus) in self.peak.items()
                      if memory > self.capacity[name][0] or cpus > self.capacity[name][1])


def _provider(hv):
    return dict(hv.provider(), az="az1", cpu_allocation_ratio=RATIO)


def run(args):
    libvirt.registerErrorHandler(lambda _context, _error: None, None)  # raised errors suffice
    result = {"settings": {"vms": args.vms, "parallel": args.parallel, "disk_mib": DISK_MIB}}
    source = Hypervisor(args.lab_dir, args.source, prefix=PREFIX)
    target = Hypervisor(args.lab_dir, args.target, prefix=PREFIX)
    result["settings"].update(source=source.name, target=target.name)
    names = ["%s%02d" % (PREFIX, index) for index in range(args.vms)]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-drain-") as workdir:
            for hv in (source, target):
                hv.clean()
            for name in names:
                make_vm(source, name, DISK_MIB)
            runner = Runner(workdir)
            store = "sqlite:///" + os.path.join(workdir, "drain.db")
            providers = {source.name: _provider(source), target.name: _provider(target)}
            common = {"providers": providers, "state_store": store}
            tasks = [{"name": "warm-up", "resilient.virt.vm_info": dict(
                common, provider=source.name, name=names[0])},
                {"name": "drain", "resilient.virt.hypervisor": dict(
                    common, provider=source.name, targets=[target.name],
                    parallel=args.parallel)}]
            monitor = Monitor((source, target), names)
            monitor.start()
            try:
                found = dict((t["name"], t) for t in play(runner, "drain", tasks))
            finally:
                monitor.done.set()
                monitor.join()
            drain = found["drain"]
            moved = [n for n in names if target.conn.lookupByName(n).state() == [
                libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_MIGRATED]]
            left = [d.name() for d in source.conn.listAllDomains(0)
                    if d.name().startswith(PREFIX)]
    except libvirt.libvirtError as exc:
        raise BenchError("a VM is not where the drain should have put it: %s" % exc) from exc
    finally:
        for hv in (source, target):
            hv.clean()
        for hv in (source, target):
            hv.close()
    result.update(seconds=drain["seconds"], moved=len(moved), left=left,
                  downtime_ms=sorted(m["downtime_ms"] for m in drain["result"]["drain"]["moved"]
                                     if m["downtime_ms"] is not None),
                  not_running=sorted(monitor.not_running), samples=monitor.samples,
                  paused=sorted(monitor.paused),
                  peak=monitor.peak, capacity=monitor.capacity, over=monitor.over())
    result["targets"] = [
        {"name": "VMs stopped at some sample during the drain", "measured":
         str(len(result["not_running"])), "target": "0", "passed": not result["not_running"]},
        {"name": "hypervisors over capacity at some sample", "measured": str(len(result["over"])),
         "target": "0", "passed": not result["over"]},
        {"name": "VMs running on %s after the drain" % target.name, "measured": "%d of %d" % (
            len(moved), args.vms), "target": "all", "passed": len(moved) == args.vms and not left}]
    return result


def print_report(result):
    settings = result["settings"]
    print("Draining %s of %d running VMs (64 MiB, a %d MiB disk each) to %s, %d at a time: "
          "the hypervisor task's duration from the ansible.posix.json callback after a warm-up "
          "task; %d samples of both hypervisors by the bench's own libvirt connections." % (
              settings["source"], settings["vms"], settings["disk_mib"], settings["target"],
              settings["parallel"], result["samples"]))
    print("\n| figure | value |")
    print("|---|---:|")
    print("| drain task, seconds | %.2f |" % result["seconds"])
    downtimes = result["downtime_ms"]
    if downtimes:
        print("| guest downtime, ms (least / median / most) | %d / %d / %d |" % (
            downtimes[0], downtimes[len(downtimes) // 2], downtimes[-1]))
    print("| VMs seen paused for their switchover, running nowhere | %d |" % len(result["paused"]))
    for name, (memory, cpus) in sorted(result["peak"].items()):
        capacity = result["capacity"][name]
        print("| %s at its most: MiB of %d, vCPUs of %d | %d, %d |" % (
            name, capacity[0], capacity[1], memory, cpus))
    print_targets(result["targets"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    lab_dir = os.environ.get("RESILIENT_VIRT_LAB_DIR", os.path.join(ROOT, "lab", "run"))
    parser.add_argument("--lab-dir", default=lab_dir)
    parser.add_argument("--source", default="hv1", help="lab hypervisor (default hv1)")
    parser.add_argument("--target", default="hv2", help="lab hypervisor (default hv2)")
    parser.add_argument("--quick", action="store_true", help="4 VMs")
    parser.add_argument("--vms", type=int, help="running VMs to drain (default 10, quick 4)")
    parser.add_argument("--parallel", type=int, default=2, help="VMs moving at a time")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    args.vms = args.vms or (4 if args.quick else 10)
    return run_and_report("bench_drain", run, print_report, args)


if __name__ == "__main__":
    sys.exit(main())
