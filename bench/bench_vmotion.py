"""vMotion: a resilient.virt.vm_migrate task against community.vmware.vmware_vmotion.

On a vSphere simulator of its own (the lab's, two datastores shared by all hosts, HTTPS with a
certificate of the lab CA, verified by both sides: ``ca_path`` for ours, ``SSL_CERT_FILE`` for
the peer), the powered-on VM ``DC0_C0_RP0_VM0`` moves from its ESXi host to another host of its
cluster, two moves per side and round:

* **vMotion**: to the other host (``target`` for ours, ``destination_host`` for the peer);
* **vMotion + storage vMotion**: to the other host and, its files, to the other datastore
  (``datastore``; ``destination_datastore``), in one ``RelocateVM_Task`` on both sides.

``--rounds`` rounds (default 5), the two sides interleaved (each round starts with the other
one). Each move runs in a playbook of its own after a warm-up task that loads its collection
(``resilient.virt.vm_info`` for ours, ``community.vmware.vmware_guest_info`` for the peer), and
each round also runs the warm-up task alone. Per move: the **wall** time is the task's duration
from the ``ansible.posix.json`` callback; the **CPU** time is that of ``ansible-playbook`` and
every process it waited for, its playbook's minus the warm-up playbook's of the same round; the
**simulator's CPU** is taken the same way, from ``/proc``. Medians, and ours / the peer's.

After each move the bench's own pyVmomi session checks that the VM is on the target host (and
datastore), still powered on, then moves it back (not timed) and checks that too. No target:
the figures are reported as measured. The simulator is stopped at the end.

    python3 bench/bench_vmotion.py [--quick] [--rounds N] [--json PATH]

``--quick``: 3 rounds. Prints markdown tables; exits 0 when the bench ran and 1 when it could
not run.
"""
import argparse
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time

from checkout import use_checkout

use_checkout()

from bench_images import _Session  # noqa: E402
from bench_snapshots import _measured  # noqa: E402
from bench_tasks import BenchError, Runner, run_and_report  # noqa: E402

PREFIX = "bench-vmotion-"
VM = "DC0_C0_RP0_VM0"  # a powered-on VM of the simulator's inventory
SIDES = ("ours", "peer")
MOVES = ("vmotion", "storage")


def _where(session):
    """(host name, datastore names, power state) of VM as the bench's own session reads it."""
    ref = session.vm(VM)
    return ref.runtime.host.name, sorted(ds.name for ds in ref.datastore), \
        str(ref.runtime.powerState)


def _check(session, what, host, datastore):
    """BenchError unless VM runs on ``host`` (with its files on ``datastore``, when given)."""
    found_host, found_ds, power = _where(session)
    if found_host != host or power != "poweredOn" or (datastore and found_ds != [datastore]):
        raise BenchError("%s: %s is on %s / %s, %s; expected running on %s / %s" % (
            what, VM, found_host, found_ds, power, host, datastore or "its datastore"))


class Moves:
    """The warm-up task and the task of each move, ours and the peer's, and the way back."""

    def __init__(self, settings, store_url, session):
        from pyVmomi import vim

        self.settings, self.store_url, self.session = settings, store_url, session
        ref = session.vm(VM)
        self.home = ref.runtime.host
        self.home_ds = ref.datastore[0]
        self.pool = ref.resourcePool
        self.away = next(h for h in self.home.parent.host if h != self.home)
        self.away_ds = next(ds for ds in self.home.datastore if ds != self.home_ds)
        self.spec = vim.vm.RelocateSpec(host=self.home, datastore=self.home_ds, pool=self.pool)

    def warm_up(self, side):
        s = self.settings
        if side == "ours":
            return {"name": "warm-up", "resilient.virt.vm_info": {
                "provider": s, "name": VM, "state_store": self.store_url}}
        return {"name": "warm-up", "community.vmware.vmware_guest_info": dict(
            self._peer(), name=VM, datacenter="DC0")}

    def _peer(self):
        s = self.settings
        return {"hostname": s["host"], "port": s["port"], "username": s["username"],
                "password": s["password"], "validate_certs": True}

    def task(self, side, move):
        datastore = self.away_ds.name if move == "storage" else None
        if side == "ours":
            args = {"provider": self.settings, "vm": VM, "target": self.away.name,
                    "state_store": self.store_url}
            if datastore:
                args["datastore"] = datastore
            return {"name": move, "resilient.virt.vm_migrate": args}
        args = dict(self._peer(), vm_name=VM, destination_host=self.away.name)
        if datastore:
            args["destination_datastore"] = datastore
        return {"name": move, "community.vmware.vmware_vmotion": args}

    def check_moved(self, side, move):
        _check(self.session, "%s %s" % (side, move), self.away.name,
               self.away_ds.name if move == "storage" else None)

    def back(self, what):
        """Move VM back to its host and datastore (not timed) and check it is there."""
        task = self.session.vm(VM).RelocateVM_Task(self.spec)
        self.session.wait(task)
        if str(task.info.state) != "success":
            raise BenchError("%s: moving %s back failed: %s" % (what, VM, task.info.error))
        _check(self.session, what + " (back)", self.home.name, self.home_ds.name)


def side_round(runner, moves, pid, side, number):
    """[[wall s, CPU s, simulator CPU s] of each move] of one round of ``side``."""
    label = "%s%s-%d" % (PREFIX, side, number)
    _seconds, base_cpu, base_simulator = _measured(runner, label + "-warm-up",
                                                   [moves.warm_up(side)], pid)
    rows = []
    for move in MOVES:
        seconds, cpu, simulator = _measured(runner, "%s-%s" % (label, move), [
            moves.warm_up(side), moves.task(side, move)], pid)
        moves.check_moved(side, move)
        moves.back("%s %s" % (side, move))
        rows.append([seconds[move], cpu - base_cpu, simulator - base_simulator])
    return rows


def run(args):
    vcsim = importlib.import_module("vcsim")
    workdir = tempfile.mkdtemp(prefix=PREFIX)
    began, load = time.perf_counter(), os.getloadavg()[0]
    samples = dict((side, []) for side in SIDES)
    run_dir = os.path.join(workdir, "vsphere")
    bin_dir = os.path.join(vcsim.DEFAULT_RUN_DIR, "vcsim", "bin")
    try:
        settings = dict(vcsim.start(run_dir, bin_dir=bin_dir, datastores=2))
        try:
            pid = vcsim.status(run_dir)["pid"]
            runner = Runner(workdir)
            # the peer has no CA option: OpenSSL's default trust reads SSL_CERT_FILE
            runner.env = dict(runner.env, SSL_CERT_FILE=settings["ca_path"])
            session = _Session(settings)
            try:
                moves = Moves(settings, "sqlite:///" + os.path.join(workdir, "vmotion.db"),
                              session)
                _check(session, "start", moves.home.name, moves.home_ds.name)
                for number in range(args.rounds):
                    for side in (SIDES if number % 2 == 0 else SIDES[::-1]):
                        samples[side].append(side_round(runner, moves, pid, side, number))
                places = {"host": moves.home.name, "away": moves.away.name,
                          "datastore": moves.home_ds.name, "away_datastore": moves.away_ds.name}
            finally:
                session.close()
        finally:
            vcsim.stop(run_dir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    keys = ("wall", "cpu", "simulator_cpu")
    medians = dict((side, dict((move, dict(
        (key, statistics.median(r[i][k] for r in samples[side])) for k, key in enumerate(keys)))
        for i, move in enumerate(MOVES))) for side in SIDES)
    return {"settings": {"rounds": args.rounds, "vm": VM, "python": sys.version.split()[0],
                         "cpus": os.cpu_count(), "load": [load, os.getloadavg()[0]], **places},
            "medians": medians,
            "ratios": dict((move, dict((key, medians["ours"][move][key]
                                        / medians["peer"][move][key]) for key in ("wall", "cpu")))
                           for move in MOVES),
            "samples": dict((side, [[[round(x, 3) for x in row] for row in rounds]
                                    for rounds in samples[side]]) for side in SIDES),
            "seconds": time.perf_counter() - began}


def print_report(result):
    s = result["settings"]
    print("vMotion of the powered-on VM %s of a vSphere simulator (the lab's, two datastores, "
          "HTTPS verified with the lab CA) from %s to %s and back, its files from %s to %s in "
          "the storage case: resilient.virt.vm_migrate (in-process) against "
          "community.vmware.vmware_vmotion; each move in a playbook of its own after a warm-up "
          "task, checked and moved back by the bench's own pyVmomi session; medians of %d "
          "rounds, interleaved. Wall: the task's duration (ansible.posix.json callback); CPU: "
          "ansible-playbook and its children, minus the warm-up playbook's; simulator CPU: the "
          "same, of the simulator process. Load average (1 min) at the start %.1f, at the end %.1f, "
          "on %d CPUs.\n"
          % (s["vm"], s["host"], s["away"], s["datastore"], s["away_datastore"], s["rounds"],
             s["load"][0], s["load"][1], s["cpus"]))
    print("| move | vm_migrate wall s | CPU s | simulator CPU s | vmware_vmotion wall s | CPU s "
          "| simulator CPU s | wall ours / peer | CPU ours / peer |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for move, title in (("vmotion", "vMotion (host)"),
                        ("storage", "vMotion + storage vMotion (host and datastore)")):
        ours, peer = result["medians"]["ours"][move], result["medians"]["peer"][move]
        ratio = result["ratios"][move]
        print("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
            title, ours["wall"], ours["cpu"], ours["simulator_cpu"], peer["wall"], peer["cpu"],
            peer["simulator_cpu"], ratio["wall"], ratio["cpu"]))
    print("\nWhole bench: %.0f s." % result["seconds"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds")
    parser.add_argument("--rounds", type=int, help="rounds (default 5, quick 3)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (3 if args.quick else 5)
    return run_and_report("bench_vmotion", run, print_report, args)


if __name__ == "__main__":
    sys.exit(main())
