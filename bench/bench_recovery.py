"""Benchmark of hands-off recovery: seconds from a hypervisor's power-off to its VMs running elsewhere.

A lab of three hypervisors of its own (in a temporary directory, taken down at the end). On hv1,
``--vms`` small VMs (TCG, no OS, 64 MiB), every third one with a 64 MiB qcow2 disk on the lab's
shared pool holding a known pattern (written with ``qemu-io`` before the failure), the others
diskless; each holds a failover reservation on hv2 or hv3 (``failover_reservation``
``state: present``). The shipped rulebook ``resilient.virt.hypervisor_recovery`` runs under a real
``ansible-rulebook`` (the recovery path a fleet uses, not the playbook started by hand), with the
lab's power control as the fence agent and ``--grace`` seconds of grace. Then hv1 is powered off
with the lab's power control (``Lab.down(["hv1"])``: libvirtd, virtlogd and every QEMU process of
hv1 killed).

The bench's own observations, polled every 0.2 s: the event (the source's record of hv1 turning
unreachable in the state store, written right after the event is queued), the fence (the
``fenced`` mark in the store), and each VM running on its reservation's host (libvirt-python
connections of the bench's own to hv2 and hv3). After the recovery, the shared disks' pattern is
read back with ``qemu-io`` on the host each VM now runs on. Target (the HA issue): every VM
running within 60 s after the grace period.

Two scenarios, each on a lab of its own: ``power-off`` as above, and ``freeze``: hv1's libvirtd
stopped (SIGSTOP) while its guests run on, found by the source's keepalive. In both, every poll
also counts each guest's QEMU processes on all three hypervisors (/proc): never two for one VM,
and none on hv2 or hv3 before the fence mark (read first in each poll).

    python3 bench/bench_recovery.py [--quick] [--vms N] [--grace S] [--only SCENARIO] [--json PATH]

``--quick``: 4 VMs. Prints markdown tables with the target and pass/fail; exits 0 when the bench
ran (a missed target is reported, not an error) and 1 when it could not run.
"""
import argparse
import glob
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET

import libvirt
import yaml
from checkout import COLLECTIONS, LAB_DIR, use_checkout

use_checkout()

import lab  # noqa: E402 - lab/lab.py, on sys.path only now
from bench_tasks import BenchError, print_targets, run_and_report  # noqa: E402
from ansible_collections.resilient.virt.plugins.module_utils._failover.storage import (  # noqa: E402
    ReservationBook)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store  # noqa: E402
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import (  # noqa: E402
    build_domain_xml, validate_spec)

JAVA_HOMES = sorted(glob.glob("/usr/lib/jvm/java-17-openjdk-*"))
WAIT = 600.0  # seconds for the whole recovery of one scenario at most
POLL = 0.2
TARGET_AFTER_GRACE = 60.0
PATTERN, DATA = "0x5a", "4M"
CREATOR = "bench-recovery"
NAMES = ("hv1", "hv2", "hv3")
SCENARIOS = {"power-off": "hv1 powered off", "freeze": "hv1's libvirtd frozen"}


def _in_hv(hv, *command):
    """Run ``command`` in the hypervisor's mount namespace (where the pools' paths are valid)."""
    return subprocess.run(["nsenter", "-t", str(hv.daemon_pid("libvirtd")), "-m", "--"] + list(command),
                          capture_output=True, text=True, timeout=120, check=False)


def _make_vms(hv, count):
    """``count`` running VMs on ``hv``, every third with a disk on the shared pool holding
    :data:`PATTERN`: {name: (uuid, disk path or None)}."""
    conn = libvirt.open(hv.uri)
    made = {}
    try:
        for index in range(count):
            name = "rec-%02d" % index
            spec = {"name": name, "vcpus": 1, "memory_mb": 64, "metadata": {"flavor": "small"}}
            volumes, path = {}, None
            if index % 3 == 0:
                root = ET.Element("volume")
                ET.SubElement(root, "name").text = name + "-disk0.qcow2"
                ET.SubElement(root, "capacity", unit="MiB").text = "64"
                target = ET.SubElement(root, "target")
                ET.SubElement(target, "format", type="qcow2")
                ET.SubElement(target, "compat").text = "1.1"
                vol = conn.storagePoolLookupByName("shared").createXML(ET.tostring(root, encoding="unicode"), 0)
                path = vol.path()
                done = _in_hv(hv, "qemu-io", "-f", "qcow2", "-c", "write -P %s 0 %s" % (PATTERN, DATA), path)
                if done.returncode != 0:
                    raise BenchError("qemu-io could not write %s: %s" % (path, done.stderr))
                spec["disks"] = [{"path": path, "format": "qcow2"}]
                volumes = {0: {"pool": "shared", "name": vol.name(), "path": path, "size_gb": 1}}
            vm_uuid = str(uuid.uuid4())
            conn.defineXML(build_domain_xml(validate_spec(spec), "qemu", vm_uuid, volumes)).create()
            made[name] = (vm_uuid, path)
    finally:
        conn.close()
    return made


def _holds(hv, path):
    done = _in_hv(hv, "qemu-io", "-r", "-U", "-f", "qcow2", "-c", "read -P %s 0 %s" % (PATTERN, DATA), path)
    return done.returncode == 0 and "Pattern verification failed" not in done.stdout


def _records(db, namespace):
    """{key: record} of ``namespace`` in the SQLite state store, read with sqlite3."""
    if not os.path.exists(db):
        return {}
    conn = sqlite3.connect(db, timeout=30)
    try:
        rows = conn.execute("SELECT key, value FROM records WHERE namespace = ?", (namespace,)).fetchall()
    except sqlite3.OperationalError:  # the table is not made yet
        return {}
    finally:
        conn.close()
    return dict((key, json.loads(value)) for key, value in rows)


def _tail(path):
    with open(path) as handle:
        return handle.read()[-3000:]


def _running(uri, names):
    """The names among ``names`` that run on the libvirtd at ``uri``."""
    try:
        conn = libvirt.open(uri)
    except libvirt.libvirtError:
        return set()
    try:
        return set(dom.name() for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)) & set(names)
    finally:
        conn.close()


def _ansible_playbook(workdir, env, tasks):
    path = os.path.join(workdir, "reserve.yml")
    with open(path, "w") as handle:
        yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}], handle)
    done = subprocess.run(["ansible-playbook", "-i", "inventory.yml", path], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise BenchError("the reservations could not be made: %s" % done.stdout[-3000:])


def _qemu_counts(the_lab, names):
    """{hypervisor: {name: the number of QEMU processes of that guest there}}, read in /proc."""
    found = {}
    for hv_name in NAMES:
        counts = found[hv_name] = dict((name, 0) for name in names)
        for pid in the_lab.hypervisor(hv_name).qemu_pids():
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as handle:
                    words = handle.read().split(b"\0")
            except OSError:
                continue
            for name in names:
                if ("guest=%s" % name).encode() in b",".join(words):
                    counts[name] += 1
    return found


def _scenario(the_lab, work, args, failure):
    providers = {name: dict(lab.provider_config(the_lab.hypervisor(name)), az="lab") for name in NAMES}
    db = os.path.join(work, "state.db")
    store = "sqlite://" + db
    disks = _make_vms(the_lab.hypervisor("hv1"), args.vms)
    env = dict(os.environ, JAVA_HOME=JAVA_HOMES[0], ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1",
               RESILIENT_VIRT_PLUGINS="lab_only_power",
               PYTHONPATH=os.pathsep.join(filter(None, [LAB_DIR, os.environ.get("PYTHONPATH")])))
    with open(os.path.join(work, "inventory.yml"), "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                        "ansible_python_interpreter": sys.executable}}}}, handle)
    _ansible_playbook(work, env, [{"name": "reserve", "resilient.virt.failover_reservation": {
        "all_providers": True, "requirements": {"*": 1}, "creator": CREATOR,
        "limit_one_new_per_hypervisor": False, "providers": providers, "state_store": store}}])
    by_uuid = dict((vm_uuid, name) for name, (vm_uuid, path) in disks.items())
    targets = {}
    for res in ReservationBook(open_store(store), CREATOR).load().reservations:
        targets.update((by_uuid[vm], res.host) for vm in res.allocations if vm in by_uuid)
    if len(targets) < len(disks):
        raise BenchError("only %d of %d VMs hold a reservation" % (len(targets), len(disks)))
    settings = {"recovery_providers": providers, "recovery_state_store": store,
                "recovery_fencing_by_hypervisor": {name: {"type": "lab_only_power", "run_dir": the_lab.run_dir}
                                                   for name in NAMES},
                "recovery_requirements": {"*": 1}, "recovery_priorities": [], "recovery_creator": CREATOR,
                "recovery_grace": args.grace}
    with open(os.path.join(work, "recovery.yml"), "w") as handle:
        yaml.safe_dump(settings, handle)
    log_path = os.path.join(work, "rulebook.log")
    uris = dict((name, the_lab.hypervisor(name).uri) for name in ("hv2", "hv3"))
    names = sorted(disks)
    with open(log_path, "w") as log:
        rulebook = subprocess.Popen(["ansible-rulebook", "-r", "resilient.virt.hypervisor_recovery", "-i",
                                     "inventory.yml", "--vars", "recovery.yml"],
                                    cwd=work, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        end = time.monotonic() + WAIT
        while len(_records(db, "hypervisor_events")) < len(NAMES):
            if time.monotonic() > end or rulebook.poll() is not None:
                raise BenchError("the rulebook's source never recorded the hypervisors: %s"
                                 % _tail(log_path))
            time.sleep(POLL)
        load_before = os.getloadavg()[0]
        off = time.monotonic()
        if failure == "freeze":
            the_lab.freeze("hv1")  # libvirtd answers nothing; its guests run on
        else:
            the_lab.down(["hv1"])
        seen, most_qemu, early = {}, 0, []
        while time.monotonic() < off + WAIT:
            now = time.monotonic() - off
            if "event" not in seen and any(
                    "hv1" in key and record.get("reachable") is False
                    for key, record in _records(db, "hypervisor_events").items() if isinstance(record, dict)):
                seen["event"] = now
            if "fenced" not in seen and _records(db, "fenced"):
                seen["fenced"] = now
            # read after the store: a QEMU process on a target seen before the fence mark is a
            # restart before the fence
            counts = _qemu_counts(the_lab, names)
            most_qemu = max([most_qemu] + [sum(counts[hv][name] for hv in NAMES) for name in names])
            if "fenced" not in seen:
                early += [name for name in names if counts["hv2"][name] + counts["hv3"][name]]
            for host, uri in uris.items():
                for name in _running(uri, names):
                    if targets[name] == host:
                        seen.setdefault(name, now)
            if all(name in seen for name in names) and "fenced" in seen:
                break
            time.sleep(POLL)
        else:
            raise BenchError("not every VM ran again within %.0f s: %s; log: %s"
                             % (WAIT, seen, _tail(log_path)))
    finally:
        rulebook.kill()
        rulebook.wait()
    where = {}
    for host, uri in uris.items():
        for name in _running(uri, names):
            where[name] = host
    intact = dict((name, _holds(the_lab.hypervisor(where[name]), path)) for name, (vm_uuid, path) in disks.items()
                  if path)
    return {"vms": len(names), "shared_disk_vms": len(intact), "grace_s": args.grace,
            "event_s": round(seen.get("event", float("nan")), 2), "fenced_s": round(seen["fenced"], 2),
            "first_running_s": round(min(seen[name] for name in names), 2),
            "all_running_s": round(max(seen[name] for name in names), 2),
            "data_intact": "%d of %d" % (sum(intact.values()), len(intact)), "hosts": where,
            "most_qemu_per_vm": most_qemu, "restarted_before_fence": sorted(set(early)),
            "load_before": round(load_before, 1), "load_after": round(os.getloadavg()[0], 1)}


def _one(args, failure):
    """One scenario on a lab of its own."""
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as work:
        the_lab = lab.Lab(os.path.join(work, "lab"))
        the_lab.up(3, vsphere=False, proxmox=False)
        try:
            return _scenario(the_lab, work, args, failure)
        finally:
            the_lab.thaw("hv1")
            the_lab.down()


def run(args):
    if not JAVA_HOMES:
        raise BenchError("ansible-rulebook needs Java 17: run lab/install-deps.sh")
    result = {"load_start": round(os.getloadavg()[0], 1), "scenarios": {}, "targets": []}
    for failure in [args.only] if args.only else SCENARIOS:
        one = result["scenarios"][failure] = _one(args, failure)
        after = one["all_running_s"] - one["grace_s"]
        label = SCENARIOS[failure]
        result["targets"] += [
            {"name": "%s: every VM running, after the grace" % label, "measured": "%.1f s" % after,
             "target": "< %g s" % TARGET_AFTER_GRACE, "passed": after < TARGET_AFTER_GRACE},
            {"name": "%s: data of the shared-disk VMs intact" % label, "measured": one["data_intact"],
             "target": "all", "passed": one["data_intact"] == "%d of %d" % ((one["shared_disk_vms"],) * 2)},
            {"name": "%s: QEMU processes of one VM at any poll" % label, "measured": one["most_qemu_per_vm"],
             "target": "at most 1", "passed": one["most_qemu_per_vm"] <= 1},
            {"name": "%s: VMs started elsewhere before the fence" % label,
             "measured": len(one["restarted_before_fence"]), "target": "0",
             "passed": not one["restarted_before_fence"]}]
    result["load_end"] = round(os.getloadavg()[0], 1)
    return result


def report(result):
    first = next(iter(result["scenarios"].values()))
    print("Hands-off recovery: %d VMs on hv1 (%d with a disk on the shared pool), the shipped rulebook "
          "under ansible-rulebook, grace %d s; load %.1f at the start, %.1f at the end"
          % (first["vms"], first["shared_disk_vms"], first["grace_s"], result["load_start"], result["load_end"]))
    print("\n| seconds from the failure to | %s |" % " | ".join(SCENARIOS[f] for f in result["scenarios"]))
    print("|---|%s" % ("---:|" * len(result["scenarios"])))
    for label, key in (("the event (`hypervisor_unreachable`)", "event_s"), ("fenced", "fenced_s"),
                       ("the first VM running on its reservation's host", "first_running_s"),
                       ("every VM running on its reservation's host", "all_running_s"),
                       ("grace period used (included above)", "grace_s"),
                       ("load at the failure", "load_before")):
        print("| %s | %s |" % (label, " | ".join("%.2f" % one[key] for one in result["scenarios"].values())))
    for failure, one in result["scenarios"].items():
        print("\n%s: shared-disk data intact %s; most QEMU processes of one VM at a poll: %d; VMs started "
              "elsewhere before the fence: %s" % (SCENARIOS[failure], one["data_intact"], one["most_qemu_per_vm"],
                                                  ", ".join(one["restarted_before_fence"]) or "none"))
    print_targets(result["targets"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="4 VMs")
    parser.add_argument("--vms", type=int, default=10)
    parser.add_argument("--grace", type=int, default=10)
    parser.add_argument("--only", choices=sorted(SCENARIOS), help="one scenario")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.quick:
        args.vms = 4
    return run_and_report("bench_recovery", run, report, args)


if __name__ == "__main__":
    sys.exit(main())
