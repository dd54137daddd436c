"""Benchmark of hands-off recovery: seconds from a hypervisor's power-off to its VMs running elsewhere.

A lab of three hypervisors of its own (in a temporary directory, taken down at the end), whose
providers keep backups in the lab's shared pool (``backup_pool: shared``). On hv1, ``--vms``
small VMs (TCG, no OS, 64 MiB) of three kinds: every third one (from the first) with a 64 MiB
qcow2 disk on the lab's shared pool holding a known pattern (written with ``qemu-io`` before the
failure); every third one from the second with such a disk on hv1's own pool ``default``,
holding pattern A, backed up (``resilient.virt.backup``, into the shared pool), then holding
pattern B (written after the backup, lost with hv1); the others diskless. Each holds a failover
reservation on hv2 or hv3 (``failover_reservation`` ``state: present``). The shipped rulebook
``resilient.virt.hypervisor_recovery`` runs under a real ``ansible-rulebook`` (the recovery path
a fleet uses, not the playbook started by hand), with the lab's power control as the fence agent,
``--grace`` seconds of grace and ``recovery_restore_from_backup`` naming the VMs with a local
disk. Then hv1 is powered off with the lab's power control (``Lab.down(["hv1"])``: libvirtd,
virtlogd and every QEMU process of hv1 killed).

The bench's own observations, polled every 0.2 s: the event (the source's record of hv1 turning
unreachable in the state store, written right after the event is queued), the fence (the
``fenced`` mark in the store), and each VM running on its reservation's host (libvirt-python
connections of the bench's own to hv2 and hv3). After the recovery, the disks are read with
``qemu-io`` on the host each VM now runs on: a shared disk holds its pattern, a restored one
pattern A and not B. The recovery point of each restored VM is read in the playbook's output (the
role's report, printed by ansible-rulebook) and compared with the backup's creation time in the
state store; the bench gives its age at the failure and when the VM ran again. Target (the HA
issue): every VM running within 60 s after the grace period.

Two scenarios, each on a lab of its own: ``power-off`` as above, and ``freeze``: hv1's libvirtd
stopped (SIGSTOP) while its guests run on, found by the source's keepalive (no VM restored from a
backup there: every third one from the second is diskless). In both, every poll
also counts each guest's QEMU processes on all three hypervisors (/proc): never two for one VM,
and none on hv2 or hv3 before the fence mark (read first in each poll).

    python3 bench/bench_recovery.py [--quick] [--vms N] [--grace S] [--only SCENARIO] [--json PATH]

``--quick``: 4 VMs (one restored from a backup in ``power-off``). Prints markdown tables with the
target and pass/fail; exits 0 when the bench ran (a missed target is reported, not an error) and
1 when it could not run.
"""
import argparse
import glob
import json
import os
import re
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
from ansible_collections.resilient.virt.plugins.module_utils._backup.records import NAMESPACE as BACKUPS  # noqa: E402
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store  # noqa: E402
from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time  # noqa: E402
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import (  # noqa: E402
    build_domain_xml, validate_spec)

JAVA_HOMES = sorted(glob.glob("/usr/lib/jvm/java-17-openjdk-*"))
WAIT = 600.0  # seconds for the whole recovery of one scenario at most
POLL = 0.2
TARGET_AFTER_GRACE = 60.0
PATTERN, DATA = "0x5a", "4M"
BEFORE_BACKUP, AFTER_BACKUP = "0x22", "0x33"  # patterns A and B of the restored VMs' disks
CREATOR = "bench-recovery"
NAMES = ("hv1", "hv2", "hv3")
SCENARIOS = {"power-off": "hv1 powered off", "freeze": "hv1's libvirtd frozen"}
KINDS = {"diskless": "diskless", "shared": "a disk on the shared pool", "restored": "restored from a backup"}
# the role's report line of the restored VMs, as the playbook prints it: "NAME as of RECOVERY_POINT"
RESTORED_LINE = re.compile(r"(rec-\d+) as of (\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d))")


def _in_hv(hv, *command):
    """Run ``command`` in the hypervisor's mount namespace (where the pools' paths are valid)."""
    return subprocess.run(["nsenter", "-t", str(hv.daemon_pid("libvirtd")), "-m", "--"] + list(command),
                          capture_output=True, text=True, timeout=120, check=False)


def _kind(index, restore):
    """The kind (a key of :data:`KINDS`) of the VM ``index``; ``restored`` only with ``restore``."""
    if index % 3 == 0:
        return "shared"
    return "restored" if index % 3 == 1 and restore else "diskless"


def _write(hv, path, pattern):
    done = _in_hv(hv, "qemu-io", "-f", "qcow2", "-c", "write -P %s 0 %s" % (pattern, DATA), path)
    if done.returncode != 0:
        raise BenchError("qemu-io could not write %s: %s" % (path, done.stderr))


def _make_vms(hv, count, restore):
    """``count`` VMs on ``hv`` (:func:`_kind`): a shared disk holds :data:`PATTERN`, a local one
    (pool ``default``) :data:`BEFORE_BACKUP`; every VM runs but those with a local disk, left
    defined for their backup. {name: {"uuid", "kind", "path" (None when diskless)}}."""
    conn = libvirt.open(hv.uri)
    made = {}
    try:
        for index in range(count):
            name, kind = "rec-%02d" % index, _kind(index, restore)
            spec = {"name": name, "vcpus": 1, "memory_mb": 64, "metadata": {"flavor": "small"}}
            volumes, path = {}, None
            if kind != "diskless":
                pool = "shared" if kind == "shared" else "default"
                root = ET.Element("volume")
                ET.SubElement(root, "name").text = name + "-disk0.qcow2"
                ET.SubElement(root, "capacity", unit="MiB").text = "64"
                target = ET.SubElement(root, "target")
                ET.SubElement(target, "format", type="qcow2")
                ET.SubElement(target, "compat").text = "1.1"
                vol = conn.storagePoolLookupByName(pool).createXML(ET.tostring(root, encoding="unicode"), 0)
                path = vol.path()
                _write(hv, path, PATTERN if kind == "shared" else BEFORE_BACKUP)
                spec["disks"] = [{"path": path, "format": "qcow2"}]
                volumes = {0: {"pool": pool, "name": vol.name(), "path": path, "size_gb": 1}}
            vm_uuid = str(uuid.uuid4())
            dom = conn.defineXML(build_domain_xml(validate_spec(spec), "qemu", vm_uuid, volumes))
            if kind != "restored":
                dom.create()
            made[name] = {"uuid": vm_uuid, "kind": kind, "path": path}
    finally:
        conn.close()
    return made


def _back_up(hv, work, env, providers, store, vms):
    """The VMs of kind ``restored`` backed up (one resilient.virt.backup task each) while they
    hold pattern A, then given pattern B and started: {name: the backup's creation time, read in
    the state store}."""
    names = sorted(name for name, vm in vms.items() if vm["kind"] == "restored")
    if not names:
        return {}
    _ansible_playbook(work, env, "the backups", [
        {"name": "back up " + name, "resilient.virt.backup": {
            "provider": "hv1", "vm": name, "providers": providers, "state_store": store}}
        for name in names])
    created = dict((record["vm"], record["artifact"]["created_at"])
                   for record in _records(os.path.join(work, "state.db"), BACKUPS).values()
                   if record.get("kind") == "backup" and record.get("phase") == "Completed")
    if sorted(created) != names:
        raise BenchError("completed backups of %s, not of every one of %s" % (sorted(created), names))
    conn = libvirt.open(hv.uri)
    try:
        for name in names:
            _write(hv, vms[name]["path"], AFTER_BACKUP)  # after the backup: lost with hv1
            conn.lookupByName(name).create()
    finally:
        conn.close()
    return created


def _holds(hv, path, pattern):
    done = _in_hv(hv, "qemu-io", "-r", "-U", "-f", "qcow2", "-c", "read -P %s 0 %s" % (pattern, DATA), path)
    return done.returncode == 0 and "Pattern verification failed" not in done.stdout


def _disk_path(uri, name):
    """The path of the disk of the domain ``name`` at ``uri``."""
    conn = libvirt.open(uri)
    try:
        root = ET.fromstring(conn.lookupByName(name).XMLDesc(0))
    finally:
        conn.close()
    return root.find("devices/disk[@device='disk']/source").get("file")


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


def _tail(path, size=3000):
    """The last ``size`` characters of the file at ``path`` (all of it with None)."""
    with open(path) as handle:
        text = handle.read()
    return text[-size:] if size else text


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


def _ansible_playbook(workdir, env, what, tasks):
    path = os.path.join(workdir, "play.yml")
    with open(path, "w") as handle:
        yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}], handle)
    done = subprocess.run(["ansible-playbook", "-i", "inventory.yml", path], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise BenchError("%s could not be made: %s" % (what, done.stdout[-3000:]))


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
    providers = {name: dict(lab.provider_config(the_lab.hypervisor(name)), az="lab", backup_pool="shared")
                 for name in NAMES}
    db = os.path.join(work, "state.db")
    store = "sqlite://" + db
    vms = _make_vms(the_lab.hypervisor("hv1"), args.vms, restore=failure == "power-off")
    env = dict(os.environ, JAVA_HOME=JAVA_HOMES[0], ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR="1",
               RESILIENT_VIRT_PLUGINS="lab_only_power",
               PYTHONPATH=os.pathsep.join(filter(None, [LAB_DIR, os.environ.get("PYTHONPATH")])))
    with open(os.path.join(work, "inventory.yml"), "w") as handle:
        yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                        "ansible_python_interpreter": sys.executable}}}}, handle)
    backed_up = _back_up(the_lab.hypervisor("hv1"), work, env, providers, store, vms)
    _ansible_playbook(work, env, "the reservations", [{"name": "reserve", "resilient.virt.failover_reservation": {
        "all_providers": True, "requirements": {"*": 1}, "creator": CREATOR,
        "limit_one_new_per_hypervisor": False, "providers": providers, "state_store": store}}])
    by_uuid = dict((vm["uuid"], name) for name, vm in vms.items())
    targets = {}
    for res in ReservationBook(open_store(store), CREATOR).load().reservations:
        targets.update((by_uuid[vm], res.host) for vm in res.allocations if vm in by_uuid)
    if len(targets) < len(vms):
        raise BenchError("only %d of %d VMs hold a reservation" % (len(targets), len(vms)))
    settings = {"recovery_providers": providers, "recovery_state_store": store,
                "recovery_fencing_by_hypervisor": {name: {"type": "lab_only_power", "run_dir": the_lab.run_dir}
                                                   for name in NAMES},
                "recovery_requirements": {"*": 1}, "recovery_priorities": [], "recovery_creator": CREATOR,
                "recovery_grace": args.grace,
                "recovery_restore_from_backup": [{"match": name} for name in sorted(backed_up)]}
    with open(os.path.join(work, "recovery.yml"), "w") as handle:
        yaml.safe_dump(settings, handle)
    log_path = os.path.join(work, "rulebook.log")
    uris = dict((name, the_lab.hypervisor(name).uri) for name in ("hv2", "hv3"))
    names = sorted(vms)
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
        off, off_wall = time.monotonic(), time.time()
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
        # the role reports the recovery points at the playbook's end, after the plan made again
        while backed_up and "PLAY RECAP" not in _tail(log_path, None):
            if time.monotonic() > off + WAIT or rulebook.poll() is not None:
                raise BenchError("the playbook never ended: %s" % _tail(log_path))
            time.sleep(POLL)
    finally:
        rulebook.kill()
        rulebook.wait()
    where = {}
    for host, uri in uris.items():
        for name in _running(uri, names):
            where[name] = host
    intact = dict((name, _holds(the_lab.hypervisor(where[name]), vm["path"], PATTERN))
                  for name, vm in vms.items() if vm["kind"] == "shared")
    restored = {}
    for name in backed_up:
        hv, path = the_lab.hypervisor(where[name]), _disk_path(uris[where[name]], name)
        restored[name] = path != vms[name]["path"] and _holds(hv, path, BEFORE_BACKUP) and not _holds(
            hv, path, AFTER_BACKUP)
    # the recovery points the role reported (printed by the playbook), against the backups made
    reported = dict(RESTORED_LINE.findall(_tail(log_path, None)))
    points = dict((name, {"reported": reported.get(name), "backup": created,
                          "age_at_failure_s": round(off_wall - parse_time(created), 1),
                          "age_when_running_s": round(off_wall + seen[name] - parse_time(created), 1)})
                  for name, created in backed_up.items())
    by_kind = {}
    for name, vm in vms.items():
        by_kind.setdefault(vm["kind"], []).append(seen[name])
    return {"vms": len(names), "shared_disk_vms": len(intact), "restored_vms": len(restored), "grace_s": args.grace,
            "all_running_by_kind_s": dict((kind, {"vms": len(times), "first": round(min(times), 2),
                                                  "all": round(max(times), 2)})
                                          for kind, times in by_kind.items()),
            "restored_as_of_backup": "%d of %d" % (sum(restored.values()), len(restored)),
            "recovery_points": points,
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
        if one["restored_vms"]:
            matching = sum(point["reported"] == point["backup"] for point in one["recovery_points"].values())
            result["targets"] += [
                {"name": "%s: data of the restored VMs as of their backup (A, not B)" % label,
                 "measured": one["restored_as_of_backup"], "target": "all",
                 "passed": one["restored_as_of_backup"] == "%d of %d" % ((one["restored_vms"],) * 2)},
                {"name": "%s: recovery point reported, the backup's creation time" % label,
                 "measured": "%d of %d" % (matching, one["restored_vms"]), "target": "all",
                 "passed": matching == one["restored_vms"]}]
    result["load_end"] = round(os.getloadavg()[0], 1)
    return result


def report(result):
    first = next(iter(result["scenarios"].values()))
    mixes = []
    for failure, one in result["scenarios"].items():
        counts = one["all_running_by_kind_s"]
        mixes.append("%s: %s" % (SCENARIOS[failure], ", ".join(
            "%d %s" % (counts[kind]["vms"], KINDS[kind]) for kind in KINDS if kind in counts)))
    print("Hands-off recovery: %d VMs on hv1 (%s), the shipped rulebook under ansible-rulebook, grace %d s; "
          "load %.1f at the start, %.1f at the end"
          % (first["vms"], "; ".join(mixes), first["grace_s"], result["load_start"], result["load_end"]))
    print("\n| seconds from the failure to | %s |" % " | ".join(SCENARIOS[f] for f in result["scenarios"]))
    print("|---|%s" % ("---:|" * len(result["scenarios"])))
    for label, key in (("the event (`hypervisor_unreachable`)", "event_s"), ("fenced", "fenced_s"),
                       ("the first VM running on its reservation's host", "first_running_s"),
                       ("every VM running on its reservation's host", "all_running_s"),
                       ("grace period used (included above)", "grace_s"),
                       ("load at the failure", "load_before")):
        print("| %s | %s |" % (label, " | ".join("%.2f" % one[key] for one in result["scenarios"].values())))
    print("\n| seconds from the failure to every VM of a kind running on its reservation's host (first one) | %s |"
          % " | ".join(SCENARIOS[f] for f in result["scenarios"]))
    print("|---|%s" % ("---:|" * len(result["scenarios"])))
    for kind, label in KINDS.items():
        cells = [one["all_running_by_kind_s"].get(kind) for one in result["scenarios"].values()]
        print("| %s | %s |" % (label, " | ".join("%.2f (%.2f), %d VMs" % (cell["all"], cell["first"], cell["vms"])
                                                 if cell else "-" for cell in cells)))
    for failure, one in result["scenarios"].items():
        if one["recovery_points"]:
            print("\n%s, restored from a backup: data as of the backup %s"
                  % (SCENARIOS[failure], one["restored_as_of_backup"]))
            print("\n| VM | recovery point reported | backup made | age at the failure (s) "
                  "| age when running again (s) |")
            print("|---|---|---|---:|---:|")
            for name, point in sorted(one["recovery_points"].items()):
                print("| %s | %s | %s | %.1f | %.1f |" % (
                    name, point["reported"] or "not found", point["backup"], point["age_at_failure_s"],
                    point["age_when_running_s"]))
    for failure, one in result["scenarios"].items():
        print("\n%s: shared-disk data intact %s; most QEMU processes of one VM at a poll: %d; VMs started "
              "elsewhere before the fence: %s" % (SCENARIOS[failure], one["data_intact"], one["most_qemu_per_vm"],
                                                  ", ".join(one["restarted_before_fence"]) or "none"))
    print_targets(result["targets"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="4 VMs (one restored from a backup)")
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
