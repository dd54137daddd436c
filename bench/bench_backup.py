"""Backups: resilient.virt.backup against virsh backup-begin and qemu-img convert, on the lab.

Everything runs on one lab hypervisor (``--hypervisor``, default hv3, so that the benches that
use hv1 and hv2 are not disturbed), in one go, so that the ratios compare numbers taken on the
same machine at the same time. The test VMs are tiny TCG domains without an OS (64 MiB, 1
vCPU) whose only disk is a qcow2 v3 volume of pool ``default``, filled with data once (``qemu-io
write -P 0x5a`` over the whole disk, run in the hypervisor's mount namespace with ``nsenter``):
nothing but the bench writes to it.

1. **Full backup of a running VM**, for each disk size (``--sizes``, MiB; default 1024 and 256:
   how the costs scale with the data), ``--rounds`` rounds (default 7), the three cases
   interleaved (each round starts with a different one), the median kept:

   * **backup task**: one ``ansible-playbook`` run of ``resilient.virt.vm_info`` on the VM (a
     warm-up: it loads the collection, which a playbook does once) then one
     ``resilient.virt.backup`` task (``wait: true``, a private SQLite state store), then the
     same backup with ``state: absent``. The figure is the backup task's duration as Ansible's
     ``ansible.posix.json`` callback reports it (task start to result), not the playbook's;
   * **virsh backup-begin**: the same libvirt job by hand - ``virsh backup-begin DOM
     backup.xml checkpoint.xml`` (push mode, a qcow2 target file in the directory of pool
     ``backups``, a checkpoint with a bitmap, as the task makes), then ``virsh domjobinfo DOM``
     polled until no job runs; timed from before backup-begin until the job is seen finished
     (its completed statistics must say Completed); then the checkpoint and file are deleted;
   * **qemu-img convert** (the physical limit: read the whole disk, write a qcow2 image):
     ``qemu-img convert -U -O qcow2 DISK`` into the same pool directory, through ``nsenter``.

   Ratios: task / virsh, task / convert, virsh / convert; beside them the time libvirt itself
   gives for the job of each (``virsh domjobinfo --completed``, read after the job), which
   separates the job from what surrounds it (process starts, polling, records). Target: the
   backup task takes at most 1.5x ``virsh backup-begin`` at the largest size (the same job,
   plus the task's records, plan, marker and polling).
2. **Incremental backup after a 1 % change**, on the largest disk, ``--chain-rounds`` times
   (default 5) on a VM of its own: a full backup task (as above, the warm-up first), then the
   VM is stopped, 1 % of its disk is written with ``qemu-io`` (the checkpoint's persistent
   bitmap records it), the VM started again, and one ``resilient.virt.backup`` task with
   ``incremental: true`` runs; both backups are then deleted. Seconds (task duration, median)
   and size (the artifact's ``size_bytes``: the allocation of its volumes) of each, and
   incremental / full in both. Target: the incremental backup takes at most 0.25x the full one.
   The task polls its job as soon as it started it, then waits a fifth of the time elapsed
   between two polls (``operations.poll_interval``): a job that short is seen done within a
   few polls.
3. **Guarded status write**: ``status_write.write(..., critical=True)`` (the retried write of
   a record leaving InProgress, with its deadline and reopening of the store) against a plain
   ``store.update`` of the same record with the same update function (a lease renewal of a
   real record taken from step 1), median per call in microseconds over ``--calls`` calls after
   a warm-up, on a private SQLite file and, when ``redis-server`` is installed, a private Redis.

Every VM, volume, file and checkpoint this bench makes is named ``bench-backup-*``; such
domains and volumes are removed from the hypervisor before it starts and when it ends, whatever
happens, and the bench fails if any is left.

    python3 bench/bench_backup.py [--lab-dir DIR] [--quick] [--json PATH]

``--quick``: the 1 GiB disk only (the targets are set for it: on a smaller disk the task's
fixed costs weigh more), 3 rounds, 3 incremental rounds, 500 status writes: about 35 s. The
full run takes about 2 minutes on 2 cores.

Prints markdown tables with the targets and pass/fail; exits 0 when the bench ran (a missed
target is reported, not an error) and 1 when it could not run.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

import libvirt
from checkout import ROOT, use_checkout

use_checkout()

from bench_core import REDIS_SERVER, _Redis, time_calls  # noqa: E402
from bench_tasks import BenchError, Runner, print_targets, run_and_report  # noqa: E402

from ansible_collections.resilient.virt.plugins.module_utils._backup import (  # noqa: E402
    records, status_write)
from ansible_collections.resilient.virt.plugins.module_utils._backup.operations import (  # noqa: E402
    poll_interval)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import (  # noqa: E402
    open_store)

PREFIX = "bench-backup-"
POOLS = ("default", "backups")
PATTERN, CHANGE_PATTERN = "0x5a", "0x77"
CHANGE_FRACTION = 0.01      # the incremental backup follows a change of 1 % of the disk
CLUSTER = 64 * 1024         # qcow2's default cluster size: the change is whole clusters
TARGET_VS_VIRSH = 1.5       # backup task / virsh backup-begin, full backup, largest disk
TARGET_INCREMENTAL = 0.25   # incremental after a 1 % change / full, task duration
JOB_POLL = 0.02             # seconds between two virsh domjobinfo of the virsh case
COMMAND_TIMEOUT = 600
MIB = 1024 * 1024


# ---------------------------------------------------------------- the hypervisor

class Hypervisor:
    """One lab hypervisor: its libvirt connection and commands in its mount namespace."""

    def __init__(self, lab_dir, name, prefix=PREFIX):
        self.prefix = prefix
        try:
            with open(os.path.join(lab_dir, "lab.json")) as handle:
                state = json.load(handle)
        except OSError as exc:
            raise BenchError("no lab in %s (%s): run `python3 lab/lab.py up --run-dir %s` first"
                             % (lab_dir, exc.strerror, lab_dir)) from exc
        found = dict((hv["name"], hv) for hv in state["hypervisors"])
        if name not in found:
            raise BenchError("the lab in %s has no %s: run `python3 lab/lab.py up --count 3`"
                             % (lab_dir, name))
        self.name, self.uri = name, found[name]["uri"]
        try:
            with open(found[name]["pid_files"]["libvirtd"]) as handle:
                self.pid = int(handle.read().strip())
        except (OSError, ValueError) as exc:
            raise BenchError("libvirtd of %s is not running (%s): run `python3 lab/lab.py up`"
                             % (name, exc)) from exc
        try:
            self.conn = libvirt.open(self.uri)
        except libvirt.libvirtError as exc:
            raise BenchError("cannot reach %s at %s: %s" % (name, self.uri, exc)) from exc
        self.pools = dict((p, self.conn.storagePoolLookupByName(p)) for p in POOLS)
        self.dirs = dict((p, ET.fromstring(pool.XMLDesc(0)).findtext("target/path"))
                         for p, pool in self.pools.items())

    def provider(self):
        return {"type": "libvirt", "name": self.name, "uri": self.uri, "domain_type": "qemu"}

    def run(self, *command):
        """Run ``command`` inside the hypervisor's mount namespace; its stdout."""
        done = subprocess.run(["nsenter", "-t", str(self.pid), "-m", "--"] + list(command),
                              capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                              check=False)
        if done.returncode != 0:
            raise BenchError("%s in %s's namespace failed (exit %d): %s%s" % (
                " ".join(command), self.name, done.returncode, done.stdout[-1000:],
                done.stderr[-1000:]))
        return done.stdout

    def virsh(self, *command):
        done = subprocess.run(["virsh", "-c", self.uri] + list(command), capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT, check=False)
        if done.returncode != 0:
            raise BenchError("virsh %s failed (exit %d): %s" % (
                " ".join(command), done.returncode, (done.stderr or done.stdout)[-1000:]))
        return done.stdout

    def refresh(self):
        for pool in self.pools.values():
            pool.refresh(0)

    def leftovers(self):
        """(domains, volumes) named after this bench's prefix on the hypervisor."""
        self.refresh()
        domains = sorted(d.name() for d in self.conn.listAllDomains(0)
                         if d.name().startswith(self.prefix))
        volumes = sorted("%s/%s" % (p, v.name()) for p, pool in self.pools.items()
                         for v in pool.listAllVolumes(0) if v.name().startswith(self.prefix))
        return domains, volumes

    def clean(self):
        """Remove every domain (with its checkpoints) and volume named after the prefix."""
        for dom in self.conn.listAllDomains(0):
            if not dom.name().startswith(self.prefix):
                continue
            try:
                if dom.isActive():
                    dom.destroy()
                dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA)
            except libvirt.libvirtError:
                pass  # the caller's check names what is left
        self.refresh()  # files made behind libvirt's back (virsh, qemu-img) become volumes
        for pool in self.pools.values():
            for vol in pool.listAllVolumes(0):
                if vol.name().startswith(self.prefix):
                    try:
                        vol.delete(0)
                    except libvirt.libvirtError:
                        pass

    def close(self):
        self.conn.close()


def make_vm(hv, name, size_mib):
    """A running VM ``name`` whose disk, a ``size_mib`` qcow2 v3 volume of pool default, is full
    of data; (domain, disk path, seconds the fill took)."""
    root = ET.Element("volume")
    ET.SubElement(root, "name").text = name + "-disk.qcow2"
    ET.SubElement(root, "capacity", unit="MiB").text = str(size_mib)
    target = ET.SubElement(root, "target")
    ET.SubElement(target, "format", type="qcow2")
    ET.SubElement(target, "compat").text = "1.1"
    vol = hv.pools["default"].createXML(ET.tostring(root, encoding="unicode"), 0)
    path = vol.path()
    began = time.perf_counter()
    hv.run("qemu-io", "-f", "qcow2", "-c", "write -P %s 0 %dM" % (PATTERN, size_mib), path)
    filled = time.perf_counter() - began
    xml = ("<domain type='qemu'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
           "<os><type arch='x86_64'>hvm</type></os><devices><disk type='file' device='disk'>"
           "<driver name='qemu' type='qcow2'/><source file='%s'/>"
           "<target dev='vda' bus='virtio'/></disk></devices></domain>" % (name, path))
    dom = hv.conn.defineXML(xml)
    dom.create()
    return dom, path, filled


# ---------------------------------------------------------------- playbooks

def _when(text):
    return datetime.datetime.fromisoformat(text.rstrip("Z"))


def play(runner, name, tasks):
    """Run a playbook of ``tasks`` with the ansible.posix.json callback; [{name, seconds,
    result}] of its tasks (result: of host ``bench``). BenchError when a task fails."""
    path = runner.write(name, tasks)
    env = dict(runner.env, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    proc = subprocess.run([runner.command, "-i", runner.inventory, "-f", "1", path],
                          cwd=runner.workdir, env=env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT, check=False)
    try:
        output = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError as exc:
        raise BenchError("%s (exit %d) printed no JSON (is the ansible.posix collection "
                         "installed? pip install ansible):\n%s%s" % (
                             name, proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
                         ) from exc
    found = []
    for task in output["plays"][0]["tasks"]:
        result = task["hosts"].get("bench", {})
        duration = task["task"]["duration"]
        found.append({"name": task["task"]["name"], "result": result,
                      "seconds": (_when(duration["end"]) - _when(duration["start"])
                                  ).total_seconds()})
        if result.get("failed") or result.get("unreachable"):
            raise BenchError("%s: task %r failed: %s" % (
                name, task["task"]["name"], result.get("msg") or json.dumps(result)[-2000:]))
    if proc.returncode != 0:
        raise BenchError("%s failed (exit %d):\n%s" % (name, proc.returncode,
                                                       proc.stderr[-2000:]))
    return found


class Tasks:
    """The tasks of this bench on one VM, with a private state store."""

    def __init__(self, hv, store_url):
        self.hv, self.store_url = hv, store_url

    def _args(self, **args):
        return dict(args, provider=self.hv.provider(), state_store=self.store_url)

    def warm_up(self, vm):
        return {"name": "warm-up (loads the collection)",
                "resilient.virt.vm_info": self._args(name=vm)}

    def backup(self, vm, name, incremental=False):
        return {"name": "backup %s" % name, "resilient.virt.backup": self._args(
            vm=vm, name=name, incremental=incremental, wait=True)}

    def delete(self, name):
        return {"name": "delete %s" % name, "resilient.virt.backup": self._args(
            name=name, state="absent")}


def _completed(task, incremental):
    """{seconds, size_bytes, record} of a backup task; BenchError unless it completed as asked."""
    record = task["result"].get("record") or {}
    artifact = record.get("artifact") or {}
    if record.get("phase") != "Completed" or bool(artifact.get("incremental")) != incremental:
        raise BenchError("%s: expected a Completed %s backup, got phase %s (artifact %r)" % (
            task["name"], "incremental" if incremental else "full", record.get("phase"),
            artifact))
    return {"seconds": task["seconds"], "size_bytes": artifact.get("size_bytes"),
            "record": record}


# ---------------------------------------------------------------- 1. full backups

def task_case(runner, hv, tasks, vm, name):
    """One backup task (after the warm-up), then its deletion: {seconds, size_bytes, record}."""
    done = play(runner, name, [tasks.warm_up(vm), tasks.backup(vm, name), tasks.delete(name)])
    return dict(_completed(done[1], False),
                job_seconds=_finished_backup(hv, vm, "the backup task"))


def _job(hv, vm, completed=False):
    """{field: value} of ``virsh domjobinfo`` (``--completed``: the last job that ended)."""
    out = hv.virsh("domjobinfo", vm, *(["--completed"] if completed else []))
    return dict((k.strip(), v.strip()) for k, _s, v in
                (line.partition(":") for line in out.splitlines() if ":" in line))


def _finished_backup(hv, vm, what):
    """Seconds libvirt gives for the last job of ``vm``, which must be a completed backup."""
    job = _job(hv, vm, completed=True)
    if job.get("Job type") != "Completed" or job.get("Operation") != "Backup":
        raise BenchError("%s of %s: the last job is %s (%s), not a completed backup"
                         % (what, vm, job.get("Job type"), job.get("Operation")))
    elapsed = (job.get("Time elapsed") or "").split()
    return float(elapsed[0]) / 1000.0 if elapsed and elapsed[-1] == "ms" else None


def virsh_case(hv, workdir, vm, name):
    """``virsh backup-begin`` of the same full push-mode backup with a checkpoint, polled with
    ``virsh domjobinfo`` until the job ends: seconds; the checkpoint and file are removed."""
    target = os.path.join(hv.dirs["backups"], name + ".qcow2")
    backup_xml = os.path.join(workdir, name + "-backup.xml")
    checkpoint_xml = os.path.join(workdir, name + "-checkpoint.xml")
    with open(backup_xml, "w") as handle:
        handle.write("<domainbackup mode='push'><disks><disk name='vda' backup='yes' type='file'>"
                     "<driver type='qcow2'/><target file='%s'/></disk></disks></domainbackup>"
                     % target)
    with open(checkpoint_xml, "w") as handle:
        handle.write("<domaincheckpoint><name>%s</name><disks><disk name='vda' "
                     "checkpoint='bitmap'/></disks></domaincheckpoint>" % name)
    began = time.perf_counter()
    try:
        hv.virsh("backup-begin", vm, backup_xml, checkpoint_xml)
        while _job(hv, vm).get("Job type") not in ("None", None):
            time.sleep(JOB_POLL)
        took = time.perf_counter() - began
        job = _finished_backup(hv, vm, "virsh backup-begin")
    finally:
        try:
            hv.virsh("checkpoint-delete", vm, name)
        finally:
            hv.run("rm", "-f", target)
    return {"seconds": took, "job_seconds": job}


def convert_case(hv, disk, name):
    """``qemu-img convert -U -O qcow2`` of the running VM's disk into the backups pool's
    directory, in the hypervisor's namespace: seconds; the copy is removed."""
    target = os.path.join(hv.dirs["backups"], name + ".qcow2")
    began = time.perf_counter()
    try:
        hv.run("qemu-img", "convert", "-U", "-O", "qcow2", disk, target)
        took = time.perf_counter() - began
    finally:
        hv.run("rm", "-f", target)
    return {"seconds": took}


def measure_full(runner, hv, tasks, size_mib, rounds, workdir):
    """Step 1 for one disk size: {size_mib, fill_seconds, samples, median, ratios, sample
    record}."""
    vm = "%s%dm" % (PREFIX, size_mib)
    _dom, disk, filled = make_vm(hv, vm, size_mib)
    cases = ("task", "virsh", "convert")
    samples = dict((case, []) for case in cases)
    record = None
    for number in range(rounds):
        order = cases[number % 3:] + cases[:number % 3]
        for case in order:
            name = "%s%dm-%s-%d" % (PREFIX, size_mib, case, number + 1)
            if case == "task":
                row = task_case(runner, hv, tasks, vm, name)
                record = row.pop("record")
            elif case == "virsh":
                row = virsh_case(hv, workdir, vm, name)
            else:
                row = convert_case(hv, disk, name)
            samples[case].append(row)
    median = dict((case, statistics.median(r["seconds"] for r in rows))
                  for case, rows in samples.items())
    job = dict((case, statistics.median(r["job_seconds"] for r in samples[case]))
               for case in ("task", "virsh") if all(r["job_seconds"] for r in samples[case]))
    return {"size_mib": size_mib, "fill_seconds": filled, "samples": samples, "median": median,
            "job_median": job,
            "size_bytes": samples["task"][-1]["size_bytes"],
            "ratios": {"task_virsh": median["task"] / median["virsh"],
                       "task_convert": median["task"] / median["convert"],
                       "virsh_convert": median["virsh"] / median["convert"]},
            "record": record}


# ---------------------------------------------------------------- 2. incremental backups

def measure_incremental(runner, hv, tasks, size_mib, rounds):
    """Step 2 on a new VM of ``size_mib``: full, 1 % change, incremental, ``rounds`` times."""
    vm = "%s%dm-chain" % (PREFIX, size_mib)
    dom, disk, _filled = make_vm(hv, vm, size_mib)
    size = size_mib * MIB
    change = max(1, int(size * CHANGE_FRACTION) // CLUSTER) * CLUSTER
    full, incremental, restart = [], [], []
    for number in range(rounds):
        full_name = "%s-full-%d" % (vm, number + 1)
        inc_name = "%s-inc-%d" % (vm, number + 1)
        done = play(runner, full_name, [tasks.warm_up(vm), tasks.backup(vm, full_name)])
        full.append(dict(_completed(done[1], False),
                         job_seconds=_finished_backup(hv, vm, "the full backup task")))
        began = time.perf_counter()
        dom.destroy()  # QEMU ends cleanly: the checkpoint's bitmap is stored in the image
        offset = (number * 7 * change) % (size - change) // CLUSTER * CLUSTER
        hv.run("qemu-io", "-f", "qcow2", "-c", "write -P %s %d %d"
               % (CHANGE_PATTERN, offset, change), disk)
        dom.create()
        restart.append(time.perf_counter() - began)
        done = play(runner, inc_name, [tasks.warm_up(vm), tasks.backup(vm, inc_name, True),
                                       tasks.delete(inc_name), tasks.delete(full_name)])
        row = dict(_completed(done[1], True),
                   job_seconds=_finished_backup(hv, vm, "the incremental backup task"))
        if row["record"].get("parent") != full_name:
            raise BenchError("incremental backup %s builds on %r, not on %s"
                             % (inc_name, row["record"].get("parent"), full_name))
        incremental.append(row)
    for row in full + incremental:
        row.pop("record")
    out = {"size_mib": size_mib, "change_bytes": change, "rounds": rounds,
           "restart_seconds": statistics.median(restart), "full": full,
           "incremental": incremental}
    for key, rows in (("full", full), ("incremental", incremental)):
        out[key + "_median"] = dict((unit, statistics.median(r[unit] for r in rows))
                                    for unit in ("seconds", "size_bytes", "job_seconds")
                                    if all(r[unit] is not None for r in rows))
    out["ratios"] = dict((unit, out["incremental_median"][unit] / out["full_median"][unit])
                         for unit in ("seconds", "size_bytes"))
    return out


# ---------------------------------------------------------------- 3. status writes

def measure_status_write(url, record, calls):
    """{plain_us, guarded_us, ratio} of one write of ``record`` on the store at ``url``."""
    record = dict(record, phase="InProgress", completed_at=None)
    owner = record["owner"]
    store = open_store(url)
    key = record["name"]
    store.update(records.NAMESPACE, key, lambda _current, _now: (record, None))
    fn = records.change(key, owner, lease=120.0, progress=50)  # a write that always writes

    def reopen():  # what the backup task's ledger gives status_write
        return open_store(url, environ={}, timeout=store.timeout)

    def plain():
        store.update(records.NAMESPACE, key, fn)

    def guarded():
        status_write.write(reopen, records.NAMESPACE, key, fn, True)

    plain_us, guarded_us = [], []
    for number in range(4):  # interleaved in blocks, each starting with a different one
        for which in ((plain, plain_us), (guarded, guarded_us))[::1 if number % 2 else -1]:
            which[1].append(time_calls(which[0], max(1, calls // 4))[0] * 1000.0)  # us
    version = store.get(records.NAMESPACE, key)["version"]
    store.delete(records.NAMESPACE, key)
    out = {"plain_us": statistics.median(plain_us), "guarded_us": statistics.median(guarded_us),
           "record_bytes": len(json.dumps(record)), "writes": version - record["version"]}
    out["ratio"] = out["guarded_us"] / out["plain_us"]
    return out


def measure_status_writes(workdir, record, calls):
    rows = []
    redis = None
    try:
        stores = [("SQLite", "sqlite:///" + os.path.join(workdir, "status-write.db"))]
        if os.access(REDIS_SERVER, os.X_OK):
            redis = _Redis()
            stores.append(("Redis", redis.url))
        for label, url in stores:
            row = measure_status_write(url, record, calls)
            row["store"] = label
            rows.append(row)
            open_store(url).close()
    finally:
        if redis is not None:
            redis.stop()
    return rows


# ---------------------------------------------------------------- run

def run(args):
    hv = Hypervisor(args.lab_dir, args.hypervisor)
    workdir = tempfile.mkdtemp(prefix="bench-backup-")
    began = time.perf_counter()
    result = {"settings": {"hypervisor": hv.name, "sizes_mib": args.sizes, "rounds": args.rounds,
                           "chain_rounds": args.chain_rounds, "calls": args.calls,
                           "poll_times": [round(t, 3) for t in poll_times()],
                           "python": sys.version.split()[0], "cpus": os.cpu_count()},
              "full": [], "incremental": None, "status_write": []}
    left = None
    try:
        runner = Runner(workdir)
        tasks = Tasks(hv, "sqlite:///" + os.path.join(workdir, "state.db"))
        hv.clean()
        result["settings"]["leftovers_found"] = sum(map(len, hv.leftovers()))
        record = None
        try:
            for size in args.sizes:
                row = measure_full(runner, hv, tasks, size, args.rounds, workdir)
                record = record or row["record"]
                result["full"].append(row)
                hv.clean()
            if args.chain_rounds:
                result["incremental"] = measure_incremental(runner, hv, tasks, max(args.sizes),
                                                            args.chain_rounds)
        finally:
            hv.clean()
            domains, volumes = hv.leftovers()
            left = domains + volumes
            if left:
                print("bench_backup: left on %s: %s" % (hv.name, ", ".join(left)),
                      file=sys.stderr)
        for row in result["full"]:
            row.pop("record")
        if record is not None and args.calls:
            result["status_write"] = measure_status_writes(workdir, record, args.calls)
    finally:
        hv.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if left:
        raise BenchError("%d bench-backup-* domains or volumes are left on %s: %s"
                         % (len(left), hv.name, ", ".join(left)))
    result["seconds"] = time.perf_counter() - began
    result["targets"] = targets(result)
    return result


# ---------------------------------------------------------------- report

def targets(result):
    """The bench's targets: {name, measured, target, passed}."""
    rows = []
    largest = max(result["full"], key=lambda r: r["size_mib"], default=None)
    if largest is not None:
        ratio = largest["ratios"]["task_virsh"]
        rows.append({"name": "full backup of a running VM, %d MiB disk: backup task / virsh "
                             "backup-begin" % largest["size_mib"],
                     "measured": round(ratio, 2), "target": "<= %g" % TARGET_VS_VIRSH,
                     "passed": ratio <= TARGET_VS_VIRSH})
    inc = result["incremental"]
    if inc is not None:
        ratio = inc["ratios"]["seconds"]
        rows.append({"name": "incremental backup after a 1 %% change / full backup, %d MiB "
                             "disk, task duration" % inc["size_mib"],
                     "measured": round(ratio, 2), "target": "<= %g" % TARGET_INCREMENTAL,
                     "passed": ratio <= TARGET_INCREMENTAL})
    return rows


def poll_times(until=3.0):
    """Seconds after the start of its job at which the backup task polls it (``wait: true``),
    as ``Operations.follow`` does (``poll_interval``), not counting the polls' own time."""
    times = [0.0]
    while times[-1] < until:
        times.append(times[-1] + poll_interval(times[-1]))
    return times


def _mib(size_bytes):
    return size_bytes / float(MIB)


def print_report(result):
    s = result["settings"]
    print("Full backup of a running VM (TCG, no OS) on %s, its qcow2 v3 disk full of data; "
          "median of %d rounds, the cases interleaved. Backup task: its duration from the "
          "ansible.posix.json callback, after a warm-up task in the same playbook. virsh: "
          "backup-begin with a checkpoint, domjobinfo polled until the job ends. qemu-img "
          "convert: the disk copied to a qcow2 file, the physical limit.\n"
          % (s["hypervisor"], s["rounds"]))
    print("| disk | backup task s | virsh backup-begin s | qemu-img convert s | task / virsh "
          "| task / convert | virsh / convert | task - virsh s | libvirt's job s, task / virsh "
          "| convert MiB/s | backup size MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for row in result["full"]:
        m, r, job = row["median"], row["ratios"], row["job_median"]
        print("| %d MiB | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %.0f | %.0f |" % (
            row["size_mib"], m["task"], m["virsh"], m["convert"], r["task_virsh"],
            r["task_convert"], r["virsh_convert"], m["task"] - m["virsh"],
            " / ".join("%.2f" % job[c] if c in job else "?" for c in ("task", "virsh")),
            row["size_mib"] / m["convert"], _mib(row["size_bytes"])))
    print("\nThe backup task polls its job as soon as it has started it, then %s s later "
          "(each wait a fifth of the time elapsed, at least %g s): it sees the job end at the "
          "first poll after it, at most about 20 %% late. Each round, seconds:\n"
          % (", ".join("%.2f" % t for t in s["poll_times"][1:]), poll_interval(0)))
    for row in result["full"]:
        for case, label in (("task", "backup task"), ("virsh", "virsh backup-begin")):
            print("- %d MiB, %s: %s (libvirt's job: %s)" % (
                row["size_mib"], label,
                ", ".join("%.2f" % r["seconds"] for r in row["samples"][case]),
                ", ".join("%.2f" % r["job_seconds"] if r["job_seconds"] is not None else "?"
                          for r in row["samples"][case])))
    inc = result["incremental"]
    if inc is not None:
        print("\nIncremental backup after writing %.1f MiB (1 %%) of the %d MiB disk (VM "
              "stopped, written with qemu-io, started: %.1f s), against the full backup it "
              "builds on; backup tasks, median of %d rounds\n"
              % (_mib(inc["change_bytes"]), inc["size_mib"], inc["restart_seconds"],
                 inc["rounds"]))
        print("| backup | task s | size MiB | libvirt's job s | task s, each round |")
        print("|---|---:|---:|---:|---|")
        for label, key in (("full", "full"), ("incremental, 1 % changed", "incremental")):
            median = inc[key + "_median"]
            print("| %s | %.2f | %.1f | %s | %s |" % (
                label, median["seconds"], _mib(median["size_bytes"]),
                "%.2f" % median["job_seconds"] if "job_seconds" in median else "?",
                ", ".join("%.2f" % r["seconds"] for r in inc[key])))
        print("| incremental / full | %.2f | %.3f | | |"
              % (inc["ratios"]["seconds"], inc["ratios"]["size_bytes"]))
    if result["status_write"]:
        row = result["status_write"][0]
        print("\nOne status write of a backup record (%d bytes of JSON): status_write.write "
              "with critical=True (deadline, retry loop, store reopened through the cache) "
              "against a plain store.update with the same update function; median per call "
              "over %d calls\n" % (row["record_bytes"], s["calls"]))
        print("| store | store.update us | status_write.write(critical) us | ratio |")
        print("|---|---:|---:|---:|")
        for row in result["status_write"]:
            print("| %s | %.0f | %.0f | %.2f |"
                  % (row["store"], row["plain_us"], row["guarded_us"], row["ratio"]))
    print_targets(result["targets"])
    print("\nWhole bench: %.0f s." % result["seconds"])


# ---------------------------------------------------------------- main

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab-dir", default=os.environ.get("RESILIENT_VIRT_LAB_DIR",
                                                            os.path.join(ROOT, "lab", "run")))
    parser.add_argument("--hypervisor", default="hv3", help="lab hypervisor (default hv3)")
    parser.add_argument("--quick", action="store_true",
                        help="the 1 GiB disk only, fewer rounds and calls (about 30 s)")
    parser.add_argument("--sizes", type=int, nargs="+",
                        help="disk sizes in MiB (default 1024 256, quick 1024)")
    parser.add_argument("--rounds", type=int, help="rounds of full backups (default 7, quick 3)")
    parser.add_argument("--chain-rounds", type=int,
                        help="full + incremental rounds, 0 to skip (default 5, quick 3)")
    parser.add_argument("--calls", type=int,
                        help="status writes per case, 0 to skip (default 2000, quick 500)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    defaults = {"sizes": ([1024], [1024, 256]), "rounds": (3, 7), "chain_rounds": (3, 5),
                "calls": (500, 2000)}
    for name, (quick, full) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    args.lab_dir = os.path.abspath(args.lab_dir)
    return run_and_report("bench_backup", run, print_report, args)


if __name__ == "__main__":
    sys.exit(main())
