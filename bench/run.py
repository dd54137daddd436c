"""Run every benchmark of the collection and print one markdown report.

Runs, one after the other, each in its own process:

* ``bench_core.py``: guarded call on SQLite, Redis, Redis through Sentinel and a Redis Cluster,
  the calls a Sentinel failover costs, import time of the core;
* ``bench_failover.py``: failover plans against the lower bound, today's planner and a greedy;
* ``bench_vsphere.py``: vsphere provider against plain pyVmomi on the simulator it starts;
* ``bench_tasks.py``: real Ansible tasks against the lab (``--lab-dir``), in-process (the
  default) and through the module path (``RESILIENT_VIRT_IN_PROCESS=false``), next to
  community.libvirt, ansible.builtin.ping and ansible.builtin.debug (the floor); the one-time
  load of the collection by the first task of a playbook; a hypervisor outage with and without
  the circuit breaker; failover_reservation on fleets of 1,000 and 10,000 VMs given as
  variables, end to end and next to Ansible's own cost of loading and templating them;
* ``bench_inventory.py``: ``ansible-inventory`` with the hypervisors inventory plugin next to
  community.vmware's and community.libvirt's, on a large simulator and the lab;
* ``bench_fleet.py``: one vm_fleet task creating a fleet on the lab next to loops of
  resilient.virt.vm and community.libvirt.virt tasks, its no-change runs above an empty play,
  and a full run of a large fleet on a simulator it starts;
* ``bench_images.py``: VMs created from a base image (libvirt) and cloned from a template
  (vSphere simulator) against virsh + community.libvirt.virt and community.vmware.vmware_guest;
* ``bench_backup.py``: full backups of a running VM's 1 GiB disk (and 256 MiB) on the lab's hv3,
  one resilient.virt.backup task next to ``virsh backup-begin`` of the same job and ``qemu-img
  convert`` of the disk (the physical limit); an incremental backup after a 1 % change against
  the full one, in time and size; a guarded status write against a plain store update;
* ``bench_snapshots.py``: snapshot and revert of a running VM's 1 GiB qcow2 disk on the lab's
  hv3, resilient.virt.vm_snapshot tasks next to ``virsh snapshot-create-as`` /
  ``snapshot-revert``; on a simulator it starts, a snapshot with memory taken, reverted to and
  removed by vm_snapshot tasks next to community.vmware.vmware_guest_snapshot tasks (CPU and
  wall per task);
* ``bench_proxmox.py``: on a Proxmox VE simulator it starts (fakepve), the inventory of 1,000
  VMs on three nodes next to community.proxmox's inventory plugin, a vm_info task next to
  community.proxmox.proxmox_vm_info, a create and a start next to proxmox_kvm's (CPU and wall),
  and what each side ends with under injected faults (a locked VM, a slow shutdown, an offline
  node, a node in maintenance, an expired ticket).
* ``bench_migrate.py``: live migration of a running VM with a 256 MiB disk between the lab's hv1
  and hv2, a resilient.virt.vm_migrate task next to ``virsh migrate --live --copy-storage-all``,
  and the guest's downtime each reports.
* ``bench_drain.py``: draining the lab's hv1 of 10 running VMs to hv2 with a
  resilient.virt.hypervisor task: its time, the guests' downtimes, and, sampled throughout by the
  bench's own libvirt connections, that no VM stopped and no hypervisor went over capacity.
* ``bench_vmotion.py``: on a simulator it starts (two datastores), a running VM moved to another
  ESXi host of its cluster, and with its files to the other datastore, by resilient.virt.vm_migrate
  tasks next to community.vmware.vmware_vmotion tasks (CPU and wall per move).
* ``bench_observability.py``: what the resilience_summary callback's metrics and traces cost per
  in-process task (spans sent to an OTLP/HTTP sink it runs), against the same tasks without the
  callback, as a difference and a ratio.
* ``bench_recovery.py``: on a lab of three hypervisors of its own, 10 VMs of hv1 (some with a disk
  on the shared pool, some with a local disk restored from its backup) that hold failover
  reservations; hv1 powered off (and, apart, its libvirtd frozen) while the shipped rulebook runs
  under ansible-rulebook: seconds to the event, to the fence and to every VM running on its
  reservation's host, per kind of VM, the grace shown apart, whether the shared disks' data is
  intact and the restored disks' data is as of their backup, and the recovery points reported.

The lab must be up (``python3 lab/lab.py up``; ``make bench`` does it). Every bench's own
markdown tables are folded into the report, after a summary of the targets.

    python3 bench/run.py [--lab-dir DIR] [--quick] [--json PATH] [--report PATH]

Exits 1 when a bench crashed (did not produce its results), 0 otherwise: a missed target is
shown as FAIL in the report, not turned into an error.
"""
import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH_TIMEOUT = 3600

# name, title, script, arguments, arguments with --quick
BENCHES = (
    ("core", "Resilience core: guarded call and import time", "bench_core.py",
     [], ["--calls", "1000", "--runs", "7"]),
    ("failover", "Failover plans: capacity held against the lower bound, by fleet size",
     "bench_failover.py",
     [], ["--quick"]),
    ("vsphere", "vSphere provider vs pyVmomi on the simulator", "bench_vsphere.py",
     [], ["--vms", "10", "--rounds", "10"]),
    ("tasks", "Ansible tasks, in-process and module path, vs community.libvirt, ping and debug; "
     "outage with and without breaker; failover at fleet size", "bench_tasks.py", [], ["--quick"]),
    ("inventory", "Inventory plugin vs community.vmware and community.libvirt",
     "bench_inventory.py", [], ["--quick"]),
    ("fleet", "Fleet reconcile: one vm_fleet task vs loops of tasks", "bench_fleet.py",
     [], ["--quick"]),
    ("backup", "Backups: backup task vs virsh backup-begin and qemu-img convert; incremental vs "
     "full; guarded status write", "bench_backup.py", [], ["--quick"]),
    ("snapshots", "Snapshots: vm_snapshot take and revert vs virsh snapshot-create-as / "
     "snapshot-revert; take, revert and remove vs community.vmware.vmware_guest_snapshot",
     "bench_snapshots.py", [], ["--quick"]),
    ("proxmox", "Proxmox VE: inventory of 1,000 VMs vs community.proxmox's; vm_info vs "
     "proxmox_vm_info; create and start vs proxmox_kvm; faults, on the fakepve simulator",
     "bench_proxmox.py", [], ["--quick"]),
    ("images", "VMs from images: base image overlay and copy vs virsh + community.libvirt; "
     "template clone vs community.vmware", "bench_images.py", [], ["--quick"]),
    ("migrate", "Live migration: vm_migrate vs virsh migrate --live --copy-storage-all, and the "
     "guest's downtime", "bench_migrate.py", [], ["--quick"]),
    ("drain", "Hypervisor drain: running VMs moved off a hypervisor, no VM stopped, no "
     "hypervisor over capacity", "bench_drain.py", [], ["--quick"]),
    ("vmotion", "vMotion and storage vMotion on the simulator: vm_migrate vs "
     "community.vmware.vmware_vmotion", "bench_vmotion.py", [], ["--quick"]),
    ("observability", "Metrics and traces: the summary callback's cost per task vs the same tasks "
     "without it", "bench_observability.py", [], ["--quick"]),
    ("recovery", "Hands-off recovery: a hypervisor powered off, its VMs running on their failover "
     "reservations through the shipped rulebook, shared disks' data intact, local ones restored "
     "from their backups", "bench_recovery.py", [], ["--quick"]),
)


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _collection_version(name):
    spec = importlib.util.find_spec("ansible_collections." + name)
    if spec is None:
        return "not installed"
    try:
        with open(os.path.join(list(spec.submodule_search_locations)[0], "MANIFEST.json")) as f:
            return json.load(f)["collection_info"]["version"]
    except (OSError, KeyError, ValueError):
        return "unknown"


def machine():
    return {"cpus": os.cpu_count(), "python": sys.version.split()[0],
            "ansible_core": _version("ansible-core"), "ansible": _version("ansible"),
            "community_libvirt": _collection_version("community.libvirt"),
            "libvirt_python": _version("libvirt-python"), "pyvmomi": _version("pyvmomi")}


def _shown(argument):
    """``argument`` with a path inside the checkout made relative to it, for the report."""
    if os.path.isabs(argument) and argument.startswith(ROOT + os.sep):
        return os.path.relpath(argument, ROOT)
    return argument


def run_bench(script, arguments, workdir):
    """Run one bench; return its record (status ok|targets missed|crashed, output, results)."""
    json_path = os.path.join(workdir, os.path.splitext(script)[0] + ".json")
    command = [sys.executable, os.path.join(HERE, script)] + arguments + ["--json", json_path]
    shown = ["python3", "bench/" + script] + [_shown(a) for a in arguments]
    record = {"command": " ".join(shlex.quote(a) for a in shown), "load_before": _loadavg()}
    started = time.perf_counter()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=BENCH_TIMEOUT, check=False)
        exit_code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        exit_code, stdout = None, exc.stdout or ""
        stderr = "timed out after %d s" % BENCH_TIMEOUT
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
    record.update(seconds=round(time.perf_counter() - started, 1), exit_code=exit_code,
                  load_after=_loadavg(), output=stdout.strip(), stderr_tail=stderr[-4000:])
    try:
        with open(json_path) as handle:
            record["result"] = json.load(handle)
    except (OSError, ValueError):
        record["result"] = None
    if record["result"] is None or exit_code not in (0, 1):
        record["status"] = "crashed"
    else:  # bench_core exits 1 when it misses a target, after writing its results
        record["status"] = "ok" if exit_code == 0 else "targets missed"
    return record


def targets(records):
    """Every target of every bench: bench, name, measured, goal, passed."""
    rows = []
    core = (records.get("core") or {}).get("result") or {}
    for row in core.get("rows", []):
        if row.get("target_ms") is not None:
            rows.append({"bench": "core", "name": row["case"],
                         "measured": "%.3f ms" % row["median_ms"],
                         "goal": "< %g ms" % row["target_ms"], "passed": row["passed"]})
    for bench in ("failover", "tasks", "inventory", "fleet", "backup", "snapshots", "proxmox",
                  "migrate",
                  "observability", "recovery"):
        result = (records.get(bench) or {}).get("result") or {}
        for row in result.get("targets", []):
            rows.append({"bench": bench, "name": row["name"], "measured": str(row["measured"]),
                         "goal": row["target"], "passed": row["passed"]})
    return rows


def _task_headlines(tasks):
    """The tasks bench: in-process vs module path vs community.libvirt vs debug, the first task,
    the import of the module path's code, scaling, outage and failover at fleet size."""
    lines = []
    wall, cpu = tasks.get("per_task") or {}, tasks.get("per_task_cpu") or {}
    m_wall, m_cpu = tasks.get("marginal") or {}, tasks.get("marginal_cpu") or {}
    for label, key in (("describe", "describe"), ("list", "list"),
                       ("no-change state=running", "running")):
        ours, module, peer = "ours_" + key, "module_" + key, "peer_" + key
        if ours not in m_wall or "debug" not in m_wall:
            continue
        line = ("Task, %s, in-process: %.3f s wall per task marginal (%.3f amortised), %.2fx "
                "debug's" % (label, m_wall[ours], wall[ours], m_wall[ours] / m_wall["debug"]))
        if peer in wall:
            line += ", %.2fx community.libvirt.virt's wall and %.2fx its CPU" % (
                m_wall[ours] / wall[peer], m_cpu[ours] / cpu[peer])
        if module in cpu:
            line += "; module path: CPU %.3f s per task" % cpu[module]
            if peer in cpu:
                line += ", %.2fx community.libvirt.virt (wall %.2fx)" % (
                    cpu[module] / cpu[peer], wall[module] / wall[peer])
        lines.append(line)
    first = tasks.get("first_task") or {}
    if "ours_describe" in first:
        line = ("First in-process task of a playbook (loads the collection once per "
                "ansible-playbook run): %.2f s wall above the empty playbook" % first["ours_describe"])
        if "debug" in first:
            line += " (one debug task: %.2f s)" % first["debug"]
        lines.append(line)
    process = tasks.get("module_process") or {}
    if "module_describe" in process:
        ours = process["module_describe"]["imports_ms"]
        line = ("Import of the describe code path, module path: %.1f ms (this collection %.1f, "
                "libraries %.1f)" % (ours["code_path"], ours["collection"], ours["libraries"]))
        if "peer_describe" in process:
            line += ", community.libvirt.virt %.1f ms" % (
                process["peer_describe"]["imports_ms"]["code_path"])
        lines.append(line)
    scaling = tasks.get("scaling")
    if scaling and "ours_list" in cpu:
        scaled = scaling["per_task_cpu"]
        growth = ["%s %.2fx" % (name, scaled[case] / cpu[case])
                  for name, case in (("in-process", "ours_list"), ("module path", "module_list"),
                                     ("community.libvirt", "peer_list")) if case in scaled]
        lines.append("Task, list at %d VMs vs %d, CPU (amortised): %s"
                     % (scaling["vms"], tasks["settings"]["vms_on_hypervisor"], ", ".join(growth)))
    outage = tasks.get("outage")
    if outage:
        on, off = outage["on"], outage["off"]
        lines.append("Outage, tasks on a dead hypervisor: %d with the breaker in %.1f s (%d "
                     "provider attempts); %d without it in %.1f s (%d attempts); per task %.1fx; "
                     "projected to %d tasks without it: %.0f s, %.0f attempts"
                     % (on["tasks"], on["seconds"], on["failures_total"], off["tasks"],
                        off["seconds"], off["failures_total"], outage["speedup"],
                        off["projected_tasks"], off["projected_seconds"],
                        off["projected_attempts"]))
    for row in tasks.get("failover") or []:
        plays = row["plays"]
        lines.append("failover_reservation task, %d VMs / %d hypervisors given as variables, "
                     "in-process: the task %.2f s end to end with the fleet in play vars read by "
                     "lookup (the whole run %.2f s); with the fleet in a vars file the task %.2f s "
                     "(the whole run %.2f s, module path %.2f s), where Ansible alone, loading and "
                     "templating the fleet (set_fact play), takes %.2f s (empty play with the vars "
                     "file %.2f s)"
                     % (row["vms"], row["hypervisors"], row["task"]["lookup"],
                        plays["lookup"]["wall"], row["task"]["vars_file"], plays["ours"]["wall"],
                        plays["module"]["wall"], plays["set_fact"]["wall"],
                        plays["empty_vars"]["wall"]))
    return lines


def _backup_headlines(backup):
    """The backup bench: the task against virsh and qemu-img, incremental against full, the
    guarded status write."""
    lines = []
    for row in backup.get("full") or []:
        median, ratios = row["median"], row["ratios"]
        lines.append("Full backup of a running VM, %d MiB disk: backup task %.2f s, %.2fx virsh "
                     "backup-begin of the same job (%.2f s), %.1fx qemu-img convert of the disk "
                     "(%.2f s)" % (row["size_mib"], median["task"], ratios["task_virsh"],
                                   median["virsh"], ratios["task_convert"], median["convert"]))
    inc = backup.get("incremental")
    if inc:
        lines.append("Incremental backup after a 1 %% change of a %d MiB disk: %.2f s, %.2fx the "
                     "full backup's time and %.3fx its size"
                     % (inc["size_mib"], inc["incremental_median"]["seconds"],
                        inc["ratios"]["seconds"], inc["ratios"]["size_bytes"]))
    for row in backup.get("status_write") or []:
        lines.append("Guarded status write (critical) on %s: %.0f us, %.2fx a plain store update "
                     "(%.0f us)" % (row["store"], row["guarded_us"], row["ratio"],
                                    row["plain_us"]))
    return lines


def _snapshot_headlines(snapshots):
    """The snapshots bench: tasks against virsh, and against community.vmware on the simulator."""
    lines = []
    if snapshots.get("ratio") is not None:
        lines.append("Snapshot take + revert of a running VM, %d MiB qcow2 disk: vm_snapshot tasks "
                     "%.2f s, %.2fx virsh (%.2f s)" % (
                         snapshots["settings"]["size_mib"], snapshots["task"]["both"],
                         snapshots["ratio"], snapshots["virsh"]["both"]))
    vsphere = snapshots.get("vsphere")
    if vsphere:
        ours, peer = vsphere["medians"]["ours"]["all"], vsphere["medians"]["peer"]["all"]
        lines.append("Snapshot with memory taken, reverted to and removed on the vSphere simulator: "
                     "vm_snapshot tasks %.2f s wall, %.2f s CPU; "
                     "community.vmware.vmware_guest_snapshot %.2f s wall, %.2f s CPU (ours / "
                     "peer: wall %.2fx, CPU %.2fx)" % (
                         ours["wall"], ours["cpu"], peer["wall"], peer["cpu"],
                         vsphere["ratios"]["all"]["wall"], vsphere["ratios"]["all"]["cpu"]))
    return lines


def _proxmox_headlines(proxmox):
    """The Proxmox bench: the inventory, vm_info, create and start against community.proxmox's."""
    inventory, info = proxmox["inventory"], proxmox["vm_info"]
    return [
        "Inventory of %d VMs on the Proxmox VE simulator: %.2f s wall, %.2f s CPU; "
        "community.proxmox.proxmox %.2f s (%.2fx), with want_facts %.2f s (%.2fx)" % (
            proxmox["settings"]["vms"], inventory["ours"]["wall"], inventory["ours"]["cpu"],
            inventory["peer"]["wall"], proxmox["ratio"], inventory["peer_want_facts"]["wall"],
            proxmox["want_facts_ratio"]),
        "vm_info task on the Proxmox VE simulator: %.2f s wall, %.2f s CPU (its playbook's); "
        "community.proxmox.proxmox_vm_info %.2f s wall, %.2f s CPU" % (
            info["ours"]["wall"], info["ours"]["cpu"], info["peer"]["wall"], info["peer"]["cpu"])
    ] + ["%s task on the Proxmox VE simulator, ours / proxmox_kvm: task wall %.2fx, "
         "playbook CPU %.2fx" % (step.capitalize(), proxmox["create_start"][step + "_ratio"]["wall"],
                                 proxmox["create_start"][step + "_ratio"]["cpu"])
         for step in ("create", "start") if "create_start" in proxmox]


def headlines(records):
    """A few ratios and scaling figures drawn from the benches' results."""
    lines = []
    tasks = (records.get("tasks") or {}).get("result") or {}
    lines += _task_headlines(tasks)
    inventory = (records.get("inventory") or {}).get("result") or {}
    if inventory:
        vs = inventory["vsphere"]
        empty = vs["empty"]["median"]
        lines.append("Inventory of %d hosts and %d VMs: %.2f s cold, %.2f s cached above an empty "
                     "ansible-inventory (%.2f s); community.vmware.vmware_vm_inventory %.2f s"
                     % (vs["ours_hosts"]["hosts"], vs["ours_vms_cold"]["hosts"] - vs["ours_hosts"]["hosts"],
                        vs["ours_vms_cold"]["median"] - empty,
                        vs["ours_vms_cached"]["median"] - empty, empty,
                        vs["peer_vms"]["median"] - empty))
    fleet = (records.get("fleet") or {}).get("result") or {}
    if fleet:
        create, ratios, inc = fleet["create"], fleet["ratios"], fleet["incremental"]
        line = ("Fleet of %d VMs on hv1..hv3: one vm_fleet task creates it in %.2f s, a loop of "
                "vm tasks takes %.1fx that as module processes (CPU %.1fx), %.1fx in the worker "
                "(CPU %.1fx)" % (
                    fleet["settings"]["vms"], create["fleet"]["wall"],
                    ratios["vm_loop_module_wall"], ratios["vm_loop_module_cpu"],
                    ratios["vm_loop_wall"], ratios["vm_loop_cpu"]))
        if "peer_loop_wall" in ratios:
            line += ", a loop of community.libvirt.virt define %.1fx (CPU %.1fx)" % (
                ratios["peer_loop_wall"], ratios["peer_loop_cpu"])
        line += "; no-change run %.2f s above an empty play (%.2f s)" % (
            inc["above_empty"], inc["empty"]["wall"])
        vs = fleet.get("vsphere")
        if vs:
            line += ("; %d vSphere VMs: created in %.1f s, no-change full run %.2f s above empty"
                     % (vs["vms"], vs["create"]["wall"], vs["full"]["above_empty"]))
        lines.append(line)
    lines += _backup_headlines((records.get("backup") or {}).get("result") or {})
    lines += _snapshot_headlines((records.get("snapshots") or {}).get("result") or {})
    proxmox = (records.get("proxmox") or {}).get("result") or {}
    if proxmox:
        lines += _proxmox_headlines(proxmox)
    fleets = (records.get("failover") or {}).get("result") or {}
    for row in fleets.get("rows") or []:
        bound, ours = row["bound"]["memory_mb"], row["ours"]["settled"]
        text = ("Failover plan, %s VMs/hypervisors: this planner holds %d GiB, %.2fx the lower "
                "bound (%.2fx in count), slowest cycle %.2f s; plain greedy %.2fx"
                % (row["fleet"], ours["reserved_memory_mb"] // 1024,
                   ours["reserved_memory_mb"] / bound, ours["reservations"] / row["bound"]["reservations"],
                   ours["seconds"], row["greedy"]["reserved_memory_mb"] / bound))
        if row.get("today"):
            text += "; planner of %s %.2fx" % (fleets["baseline"],
                                               row["today"]["settled"]["reserved_memory_mb"] / bound)
        lines.append(text)
    if fleets.get("spread_seeds"):
        entries = [entry for row in fleets["spread"] for entry in row["seeds"]]
        lines.append("Failover plans, the same fleets drawn with seeds %s: this planner holds up to "
                     "%.2fx the lower bound in memory and %.2fx in count"
                     % (", ".join(map(str, fleets["spread_seeds"])),
                        max(entry[1] for entry in entries), max(entry[2] for entry in entries)))
    vsphere = (records.get("vsphere") or {}).get("result") or []
    medians = dict(((r["operation"], r["how"]), r["median_ms"]) for r in vsphere)
    for operation in ("describe", "list_vms", "list_hypervisors"):
        guarded = medians.get((operation, "guarded"))
        raw = medians.get((operation, "raw attributes"))
        floor = medians.get((operation, "raw collector"))
        if guarded and raw and floor:
            lines.append("vSphere %s: guarded %.1f ms, %.2fx plain pyVmomi attributes, %.2fx a "
                         "hand-written PropertyCollector" % (operation, guarded, guarded / raw,
                                                             guarded / floor))
    return lines


def report(records, meta):
    out = ["# resilient.virt benchmarks", ""]
    out.append("%s; %s CPUs; Python %s, ansible-core %s, ansible %s (community.libvirt %s), "
               "libvirt-python %s, pyvmomi %s; load average at start %s. Command: `%s`."
               % (meta["started"], meta["cpus"], meta["python"], meta["ansible_core"],
                  meta["ansible"], meta["community_libvirt"], meta["libvirt_python"],
                  meta["pyvmomi"], meta["load_start"], meta["command"]))
    out += ["", "| bench | status | time | load before -> after |", "|---|---|---:|---|"]
    for name, record in records.items():
        out.append("| %s | %s | %.0f s | %s -> %s |" % (
            name, record["status"], record["seconds"],
            (record["load_before"] or ["?"])[0], (record["load_after"] or ["?"])[0]))
    rows = targets(records)
    if rows:
        out += ["", "| bench | target | measured | goal | result |", "|---|---|---:|---|---|"]
        for r in rows:
            out.append("| %s | %s | %s | %s | %s |" % (
                r["bench"], r["name"], r["measured"], r["goal"], "pass" if r["passed"] else "FAIL"))
    lines = headlines(records)
    if lines:
        out += [""] + ["- " + line for line in lines]
    for name, title, _script, _full, _quick in BENCHES:
        record = records.get(name)
        if record is None:
            continue
        out += ["", "## %s (`%s`)" % (title, record["command"])]
        if record["output"]:
            out += ["", record["output"]]
        if record["status"] == "crashed":
            out += ["", "CRASHED (exit %s):" % record["exit_code"], "", "```",
                    record["stderr_tail"].strip(), "```"]
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab-dir", default=os.environ.get(
        "RESILIENT_VIRT_LAB_DIR", os.path.join(ROOT, "lab", "run")), help="lab run directory")
    parser.add_argument("--quick", action="store_true", help="short run (about 6 minutes)")
    parser.add_argument("--only", action="append", choices=[b[0] for b in BENCHES],
                        help="run only this bench (repeatable)")
    parser.add_argument("--json", metavar="PATH", help="also write every number as JSON")
    parser.add_argument("--report", metavar="PATH", help="also write the report to PATH")
    args = parser.parse_args(argv)
    meta = machine()
    meta.update(started=datetime.datetime.now(datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M UTC"), load_start=_loadavg(),
        command=" ".join(["python3", "bench/run.py"] + [
            _shown(a) for a in (sys.argv[1:] if argv is None else argv)]))
    records = {}
    with tempfile.TemporaryDirectory(prefix="bench-run-") as workdir:
        for name, _title, script, full, quick in BENCHES:
            if args.only and name not in args.only:
                continue
            arguments = list(quick if args.quick else full)
            if name in ("tasks", "inventory", "fleet", "backup", "snapshots", "images"):
                arguments += ["--lab-dir", os.path.abspath(args.lab_dir)]
            print("bench %s ..." % name, end=" ", file=sys.stderr, flush=True)
            records[name] = run_bench(script, arguments, workdir)
            print("%s in %.0f s" % (records[name]["status"], records[name]["seconds"]),
                  file=sys.stderr, flush=True)
    text = report(records, meta)
    print(text)
    if args.report:
        os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
        with open(args.report, "w") as handle:
            handle.write(text + "\n")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"meta": meta, "benches": records, "targets": targets(records)}, handle,
                      indent=2)
    return 1 if any(r["status"] == "crashed" for r in records.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
