"""Real Ansible tasks: resilient.virt against community.libvirt and ansible.builtin.ping.

Everything runs in one go against the lab (``python3 lab/lab.py up``), so the ratios compare
numbers taken on the same machine at the same time:

1. **Per task** on hypervisor hv1: one playbook per case with ``--tasks`` identical tasks
   (inventory host with ``ansible_connection: local``, ``gather_facts: false``, ``-f 1``). The
   wall time of the playbook minus that of an empty playbook, divided by the number of tasks,
   is the cost of one task; each case runs ``--repeats`` times (cases interleaved) and the
   median is kept. The CPU time (user + system of ansible-playbook and of every process it
   waited for) is taken the same way; it moves far less than the wall time when other programs
   load the machine or a process waits, so the comparison with the peer is judged on it (the
   wall time is reported beside it). The equivalent community.libvirt.virt calls are: describe one VM
   (``vm_info name=X``) vs ``command: status, name: X``; list the VMs (``vm_info``) vs
   ``command: info``; a no-change ``vm state=running`` on a running VM vs ``state: running``.
   The list pair is measured again with filler VMs (defined, stopped) to show how it scales
   with the number of VMs. The test VM is a diskless 64 MiB TCG domain, created before and
   deleted after.
2. **Module process**: the AnsiballZ payload of each case, kept with
   ``ANSIBLE_KEEP_REMOTE_FILES``, is run directly (``--profile-runs`` rounds, cases
   interleaved): CPU and wall time of the module process alone, the runs that waited (wall
   time at least 0.5 s above CPU time), and with ``python -X importtime`` the import time split
   into this collection's code, other libraries (also one by one), and ansible + standard
   library. The module's code path is this collection plus the libraries it loads: its import,
   above the peer's, is held to the same budget as a whole task (a quarter of the peer's CPU
   per task).
3. **Outage**: libvirtd of hv2 is killed (``Lab.stop``) and ``vm_info`` tasks with
   ``ignore_errors`` run against it, with the circuit breaker on (failure_threshold 3,
   reset_timeout 60s) and off (failure_threshold 10000), both with retry_preset ``default``
   and a fresh SQLite state store each; hv2 is restarted afterwards, whatever happens. The
   breaker's counters in the store give the provider attempts (``failures_total``: every
   attempt reached the dead provider and failed) and the calls it refused. With the breaker
   off every task pays the full retry backoff, so only ``--outage-off-tasks`` tasks run: the
   two are compared per task, as measured; the total for ``--outage-tasks`` tasks without the
   breaker is also shown, projected from them (each task is independent: same attempts, same
   waits) and labelled as a projection.

    python3 bench/bench_tasks.py [--lab-dir DIR] [--quick] [--json PATH]

Prints markdown tables with the targets and pass/fail; exits 0 when the bench ran (a missed
target is reported, not an error) and 1 when it could not run.
"""
import argparse
import glob
import importlib
import importlib.metadata
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from checkout import COLLECTIONS, ROOT, use_checkout
DEFAULT_LAB_DIR = os.path.join(ROOT, "lab", "run")
VM_NAME = "bench-tasks-vm"
FILLER_PREFIX = "bench-tasks-fill-"
BREAKER_ON = {"retry_preset": "default", "failure_threshold": 3, "reset_timeout": "60s"}
BREAKER_OFF = {"retry_preset": "default", "failure_threshold": 10000}  # the largest allowed
TARGET_RATIO_PEER = 1.25    # a resilient.virt task costs at most 25 % more CPU than the peer's
TARGET_OUTAGE_SPEEDUP = 5.0  # breaker on: a task on a dead provider takes at least 5x less time
STALL_MS = 500.0            # wall minus CPU of one module process run: it waited that long
PLAYBOOK_TIMEOUT = 1800


class BenchError(Exception):
    """The bench could not run; the message says why and what to do."""


use_checkout()

from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (  # noqa: E402
    list_breakers)
from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound  # noqa: E402
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (  # noqa: E402
    LibvirtProvider)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import (  # noqa: E402
    open_store)


# ---------------------------------------------------------------- running playbooks

class Runner:
    """Writes JSON playbooks (valid YAML) in a work directory and times ansible-playbook."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.inventory = os.path.join(workdir, "inventory.json")
        _write_json(self.inventory, {"all": {"hosts": {"bench": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}})
        local = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        self.command = local if os.access(local, os.X_OK) else shutil.which("ansible-playbook")
        if self.command is None:
            raise BenchError("ansible-playbook not found: pip install ansible-core")
        # RESILIENT_VIRT_* settings of the caller would change what is measured: drop them
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RESILIENT_VIRT_")}
        self.env.update(
            ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_LOCALHOST_WARNING="false",
            ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOWS="1", ANSIBLE_NOCOLOR="1",
            ANSIBLE_RETRY_FILES_ENABLED="false",
            ANSIBLE_REMOTE_TMP=os.path.join(workdir, "remote-tmp"))

    def write(self, name, tasks):
        path = os.path.join(self.workdir, name + ".yml")
        _write_json(path, [{"name": name, "hosts": "bench", "gather_facts": False,
                            "tasks": tasks}])
        return path

    def run(self, path, env=None):
        """(wall s, CPU s, PLAY RECAP counters) of one ansible-playbook run; BenchError if it fails.

        The CPU time is user + system time of ansible-playbook and every process it waited
        for (workers, module processes): unlike the wall time, it hardly moves when other
        programs compete for the CPUs. libvirtd's own work is not in it.
        """
        cpu_before = _children_cpu()
        started = time.perf_counter()
        proc = subprocess.run([self.command, "-i", self.inventory, "-f", "1", path],
                              cwd=self.workdir, env=dict(self.env, **(env or {})),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=PLAYBOOK_TIMEOUT, check=False)
        took = time.perf_counter() - started
        cpu = _children_cpu() - cpu_before
        if proc.returncode != 0:
            raise BenchError("%s failed (exit %d):\n%s" % (os.path.basename(path), proc.returncode,
                                                           proc.stdout[-3000:]))
        counters = re.findall(r"\b(ok|changed|failed|ignored)=(\d+)", proc.stdout)
        recap = dict((k, int(v)) for k, v in counters)
        return took, cpu, recap


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _write_json(path, data):
    with open(path, "w") as handle:
        json.dump(data, handle, indent=1)


# ---------------------------------------------------------------- cases

def _cases(hv, store_url, with_peer):
    """{case: (label, module, args, expect_no_change)} of the per-task comparison on ``hv``."""
    provider = {"type": "libvirt", "name": hv["name"], "uri": hv["uri"]}
    cases = {
        "ping": ("ansible.builtin.ping", "ansible.builtin.ping", {}, False),
        "ours_describe": ("vm_info name=%s" % VM_NAME, "resilient.virt.vm_info",
                          {"provider": provider, "name": VM_NAME, "state_store": store_url}, False),
        "ours_list": ("vm_info (list)", "resilient.virt.vm_info",
                      {"provider": provider, "state_store": store_url}, False),
        "ours_running": ("vm state=running (no change)", "resilient.virt.vm",
                         {"provider": provider, "name": VM_NAME, "state": "running",
                          "state_store": store_url}, True),
    }
    if with_peer:
        cases.update({
            "peer_describe": ("virt command=status name=%s" % VM_NAME, "community.libvirt.virt",
                              {"uri": hv["uri"], "name": VM_NAME, "command": "status"}, False),
            "peer_list": ("virt command=info", "community.libvirt.virt",
                          {"uri": hv["uri"], "command": "info"}, False),
            "peer_running": ("virt state=running (no change)", "community.libvirt.virt",
                             {"uri": hv["uri"], "name": VM_NAME, "state": "running"}, True),
        })
    return cases


PAIRS = (("describe one VM", "ours_describe", "peer_describe"),
         ("list VMs", "ours_list", "peer_list"),
         ("state=running, already running", "ours_running", "peer_running"))


def _tasks(module, args, count):
    return [{"name": "task %d" % (i + 1), module: dict(args)} for i in range(count)]


def measure_per_task(runner, cases, count, repeats, tag=""):
    """Per task seconds: ({case: wall}, {case: CPU}), medians over ``repeats`` interleaved
    rounds minus the empty playbook, and the raw {case: [(wall, cpu), ...]}."""
    paths = {"empty": runner.write("empty" + tag, [])}
    for case, (_label, module, args, _same) in cases.items():
        paths[case] = runner.write(case + tag, _tasks(module, args, count))
    samples = {case: [] for case in paths}
    order = list(paths)
    for round_no in range(repeats):
        shift = round_no % len(order)  # a different case starts each round
        for case in order[shift:] + order[:shift]:
            took, cpu, recap = runner.run(paths[case])
            if case != "empty" and cases[case][3] and recap.get("changed", 0):
                raise BenchError("%s reported changed=%d: the test VM was not running, so this "
                                 "is not a no-change task" % (case, recap["changed"]))
            samples[case].append((took, cpu))
    per_task = []
    for index in (0, 1):
        empty = statistics.median(s[index] for s in samples["empty"])
        per_task.append({case: (statistics.median(x[index] for x in s) - empty) / count
                         for case, s in samples.items() if case != "empty"})
    return per_task[0], per_task[1], samples


# ---------------------------------------------------------------- module process profile

_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)")


_DISTRIBUTIONS = []


def _distribution(top):
    """The installed distribution that provides top-level module ``top`` (libvirtmod ->
    libvirt-python), or ``top`` itself."""
    if not _DISTRIBUTIONS:
        _DISTRIBUTIONS.append(importlib.metadata.packages_distributions())
    names = _DISTRIBUTIONS[0].get(top) or _DISTRIBUTIONS[0].get(top.lstrip("_")) or [top]
    return names[0]


def _import_groups(stderr):
    """Self import time (ms) per group: this collection, other libraries, ansible + stdlib;
    ``code_path`` is the first two (what the module's own code brings in) and ``by_library``
    splits the libraries by top-level package. Self times add up without double counting."""
    stdlib = getattr(sys, "stdlib_module_names", frozenset())
    groups = {"collection": 0.0, "libraries": 0.0, "ansible_stdlib": 0.0}
    by_library = {}
    for micros, name in _IMPORT_LINE.findall(stderr):
        top = name.split(".")[0]
        ms = int(micros) / 1000.0
        if top == "ansible_collections":
            group = "collection"
        elif top == "ansible" or top in stdlib or top.startswith("_") and top[1:] in stdlib \
                or top in ("encodings", "zipimport", "sitecustomize"):
            group = "ansible_stdlib"
        else:
            group = "libraries"
            lib = _distribution(top)
            by_library[lib] = by_library.get(lib, 0.0) + ms
        groups[group] += ms
    groups["total"] = sum(groups.values())
    groups["code_path"] = groups["collection"] + groups["libraries"]
    groups["by_library"] = by_library
    return groups


def _kept_payload(runner, case, module, args):
    """Run one task keeping its AnsiballZ file; return the file's path."""
    keep = os.path.join(runner.workdir, "keep", case)
    os.makedirs(keep, exist_ok=True)
    runner.run(runner.write("keep-" + case, _tasks(module, args, 1)),
               env={"ANSIBLE_KEEP_REMOTE_FILES": "1", "ANSIBLE_REMOTE_TMP": keep})
    found = glob.glob(os.path.join(keep, "*", "AnsiballZ_*.py"))
    if len(found) != 1:
        raise BenchError("expected one kept AnsiballZ file in %s, found %d" % (keep, len(found)))
    return found[0]


def _run_payload(path, importtime):
    """(wall s, CPU s, stderr) of one run of a kept AnsiballZ file; BenchError if it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESILIENT_VIRT_")}
    command = [sys.executable] + (["-X", "importtime"] if importtime else []) + [path]
    cpu_before = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True,
                          env=env, cwd=os.path.dirname(path), timeout=300, check=False)
    took = time.perf_counter() - started
    cpu = _children_cpu() - cpu_before
    if proc.returncode != 0 or '"failed": true' in proc.stdout:
        raise BenchError("module payload %s failed:\n%s%s" % (path, proc.stdout[-2000:],
                                                              proc.stderr[-2000:]))
    return took, cpu, proc.stderr


def measure_module_process(runner, cases, runs):
    """{case: module process wall and CPU (ms), payload size, import split}, medians of
    ``runs`` rounds with the cases interleaved."""
    paths = dict((case, _kept_payload(runner, case, module, args))
                 for case, (_label, module, args, _same) in cases.items())
    samples = dict((case, []) for case in paths)
    for _round in range(runs):
        for case, path in paths.items():
            took, cpu, _err = _run_payload(path, False)
            samples[case].append((took * 1000.0, cpu * 1000.0,
                                  _import_groups(_run_payload(path, True)[2])))
    result = {}
    for case, rows in samples.items():
        libraries = sorted(set(lib for r in rows for lib in r[2]["by_library"]))
        result[case] = {
            "median_ms": statistics.median(r[0] for r in rows),
            "cpu_ms": statistics.median(r[1] for r in rows),
            # a run whose wall time exceeds its CPU time by STALL_MS waited on something
            "stalled_runs": sum(1 for r in rows if r[0] - r[1] >= STALL_MS),
            "runs": len(rows),
            "payload_kb": os.path.getsize(paths[case]) / 1024.0,
            "imports_ms": dict((k, statistics.median(r[2][k] for r in rows))
                               for k in rows[0][2] if k != "by_library"),
            "libraries_ms": dict((lib, statistics.median(r[2]["by_library"].get(lib, 0.0)
                                                         for r in rows)) for lib in libraries),
        }
    return result


# ---------------------------------------------------------------- lab and VMs

def _lab(lab_dir):
    try:
        with open(os.path.join(lab_dir, "lab.json")) as handle:
            state = json.load(handle)
    except OSError as exc:
        raise BenchError("no lab in %s (%s): run `python3 lab/lab.py up --run-dir %s` first"
                         % (lab_dir, exc.strerror, lab_dir)) from exc
    hypervisors = dict((hv["name"], hv) for hv in state["hypervisors"])
    missing = [n for n in ("hv1", "hv2") if n not in hypervisors]
    if missing:
        raise BenchError("the lab in %s lacks %s: run `python3 lab/lab.py up --count 2`"
                         % (lab_dir, ", ".join(missing)))
    return hypervisors


def _provider(hv):
    return LibvirtProvider({"type": "libvirt", "name": hv["name"], "uri": hv["uri"]})


def _delete_quietly(provider, names):
    for name in names:
        try:
            provider.delete(name)
        except NotFound:
            pass


def _set_fillers(hv, count):
    """Make exactly ``count`` stopped filler VMs exist on ``hv``."""
    provider = _provider(hv)
    try:
        existing = sorted(vm["name"] for vm in provider.list_vms()
                          if vm["name"].startswith(FILLER_PREFIX))
        wanted = ["%s%02d" % (FILLER_PREFIX, i + 1) for i in range(count)]
        _delete_quietly(provider, [n for n in existing if n not in wanted])
        for name in wanted:
            if name not in existing:
                provider.create({"name": name, "vcpus": 1, "memory_mb": 64})
        return len(provider.list_vms())
    finally:
        provider.close()


def _vm_task(hv, store_url, state):
    args = {"provider": {"type": "libvirt", "name": hv["name"], "uri": hv["uri"]},
            "name": VM_NAME, "state": state, "state_store": store_url}
    if state != "absent":
        args.update(vcpus=1, memory_mb=64)
    return _tasks("resilient.virt.vm", args, 1)


# ---------------------------------------------------------------- outage

def _breaker_counts(store_url, name):
    store = open_store(store_url, environ={})
    try:
        snap = next((s for s in list_breakers(store) if s["name"] == name), {})
    finally:
        store.close()
    return {k: snap.get(k, 0) for k in ("failures_total", "rejected_total", "opened_total")}


def _outage_case(runner, hv, resilience, tasks, label):
    store_url = "sqlite:///" + os.path.join(runner.workdir, "outage-%s.db" % label)
    args = {"provider": {"type": "libvirt", "name": hv["name"], "uri": hv["uri"]},
            "name": VM_NAME, "state_store": store_url, "resilience": resilience}
    path = runner.write("outage-" + label, [dict(t, ignore_errors=True)
                                            for t in _tasks("resilient.virt.vm_info", args,
                                                            tasks)])
    took, _cpu, recap = runner.run(path)
    result = {"tasks": tasks, "seconds": took, "failed_tasks": recap.get("ignored", 0),
              "resilience": resilience}
    result.update(_breaker_counts(store_url, "libvirt:" + hv["name"]))
    if result["failures_total"] == 0:  # e.g. an option refused: then nothing was measured
        raise BenchError("no outage task reached %s (breaker %s); run %s by hand to see why"
                         % (hv["name"], label, path))
    return result


def measure_outage(runner, lab_dir, hv, tasks, off_tasks, baseline):
    """Breaker on vs off on a killed hypervisor; hv is restarted before returning."""
    lab = importlib.import_module("lab").Lab(lab_dir)
    if lab.hypervisor(hv["name"]).state() != "running":
        raise BenchError("%s is not running; run `python3 lab/lab.py up --run-dir %s`"
                         % (hv["name"], lab_dir))
    lab.stop(hv["name"])
    try:
        on = _outage_case(runner, hv, BREAKER_ON, tasks, "on")
        off = _outage_case(runner, hv, BREAKER_OFF, off_tasks, "off")
    finally:
        started = time.perf_counter()
        lab.start(hv["name"])
        restart = time.perf_counter() - started
    # Every task is independent (same attempts, same waits): the per-task times compare the two
    # as measured; the total for ``tasks`` tasks without the breaker is a projection.
    off["projected_tasks"] = tasks
    off["projected_seconds"] = baseline + (off["seconds"] - baseline) * tasks / off_tasks
    off["projected_attempts"] = off["failures_total"] * tasks / off_tasks
    per_task = dict((label, (row["seconds"] - baseline) / row["tasks"])
                    for label, row in (("on", on), ("off", off)))
    return {"hypervisor": hv["name"], "on": on, "off": off, "restart_seconds": restart,
            "per_task": per_task, "speedup": per_task["off"] / per_task["on"]}


# ---------------------------------------------------------------- report

def _targets(per_task_cpu, module_process, outage):
    rows = []
    for label, ours, peer in PAIRS:
        if peer in per_task_cpu:
            ratio = per_task_cpu[ours] / per_task_cpu[peer]
            rows.append({"name": "%s: resilient.virt / community.libvirt, CPU per task" % label,
                         "target": "<= %.2f" % TARGET_RATIO_PEER, "measured": round(ratio, 2),
                         "passed": ratio <= TARGET_RATIO_PEER})
    if module_process and "peer_describe" in module_process and "peer_describe" in per_task_cpu:
        ours = module_process["ours_describe"]["imports_ms"]["code_path"]
        peer = module_process["peer_describe"]["imports_ms"]["code_path"]
        budget = (TARGET_RATIO_PEER - 1) * per_task_cpu["peer_describe"] * 1000.0
        rows.append({"name": "describe one VM: import of the module's code path (this "
                             "collection + libraries) over the peer's",
                     "target": "<= %.0f ms (%d %% of the peer's CPU per task)"
                               % (budget, round((TARGET_RATIO_PEER - 1) * 100)),
                     "measured": "%.1f ms" % (ours - peer), "passed": ours - peer <= budget})
    if outage:
        rows.append({"name": "outage: seconds per task, breaker off / on (both measured)",
                     "target": ">= %g" % TARGET_OUTAGE_SPEEDUP,
                     "measured": round(outage["speedup"], 1),
                     "passed": outage["speedup"] >= TARGET_OUTAGE_SPEEDUP})
        threshold = BREAKER_ON["failure_threshold"]
        attempts = outage["on"]["failures_total"]
        rows.append({"name": "outage: provider attempts with the breaker on",
                     "target": "<= %d (failure_threshold)" % threshold, "measured": attempts,
                     "passed": attempts <= threshold})
    return rows


def _ratio(a, b):
    return "%.2f" % (a / b) if b > 0 else "n/a"


def _print_per_task(result):
    s = result["settings"]
    wall, cpu = result["per_task"], result["per_task_cpu"]
    print("Per task on %s: %d tasks per playbook, median of %d runs minus an empty playbook "
          "(%.2f s); %d VM(s) on the hypervisor. CPU: user + system time of ansible-playbook "
          "and its module processes.\n" % (s["hypervisor"], s["tasks"], s["repeats"],
                                           result["baseline_seconds"], s["vms_on_hypervisor"]))
    print("| operation | resilient.virt | CPU s/task | wall s/task | community.libvirt.virt | "
          "CPU s/task | wall s/task | ours / peer, CPU | ours / peer, wall | ours / ping, CPU |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|")
    print("| reference | ansible.builtin.ping | %.3f | %.3f | | | | | | |"
          % (cpu["ping"], wall["ping"]))
    for label, ours, peer in PAIRS:
        if peer in wall:
            peer_cells = "%s | %.3f | %.3f" % (result["cases"][peer], cpu[peer], wall[peer])
        else:
            peer_cells = "not measured: %s | | " % s["peer_note"]
        print("| %s | %s | %.3f | %.3f | %s | %s | %s | %s |" % (
            label, result["cases"][ours], cpu[ours], wall[ours], peer_cells,
            _ratio(cpu[ours], cpu.get(peer, 0)), _ratio(wall[ours], wall.get(peer, 0)),
            _ratio(cpu[ours], cpu["ping"])))


def _print_scaling(result):
    scale, base = result["scaling"], result["settings"]["vms_on_hypervisor"]
    print("\nList scaling on %s: %d VMs (stopped fillers added) vs %d\n"
          % (result["settings"]["hypervisor"], scale["vms"], base))
    print("| case | CPU s/task, %d VM(s) | CPU s/task, %d VMs | CPU growth | wall growth |"
          % (base, scale["vms"]))
    print("|---|---:|---:|---:|---:|")
    for case in ("ours_list", "peer_list"):
        if case in scale["per_task"]:
            print("| %s | %.3f | %.3f | %s | %s |" % (
                result["cases"][case], result["per_task_cpu"][case],
                scale["per_task_cpu"][case],
                _ratio(scale["per_task_cpu"][case], result["per_task_cpu"][case]),
                _ratio(scale["per_task"][case], result["per_task"][case])))
    if "peer_list" in scale["per_task"]:
        print("\nAt %d VMs, resilient.virt / community.libvirt: %s CPU, %s wall." % (
            scale["vms"],
            _ratio(scale["per_task_cpu"]["ours_list"], scale["per_task_cpu"]["peer_list"]),
            _ratio(scale["per_task"]["ours_list"], scale["per_task"]["peer_list"])))


def _print_profile(result):
    print("\nModule process alone (the AnsiballZ payload run directly, median of %d runs): wall "
          "and CPU time, payload size, and self import time (python -X importtime) by origin\n"
          % result["settings"]["profile_runs"])
    print("| case | CPU | wall | runs stalled >= %.1f s | payload | imports | code path: this "
          "collection + libraries | this collection | libraries | ansible + stdlib |"
          % (STALL_MS / 1000.0))
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for case, row in result["module_process"].items():
        imp = row["imports_ms"]
        print("| %s | %.0f ms | %.0f ms | %d of %d | %.0f KiB | %.0f ms | %.1f ms | %.1f ms | "
              "%.1f ms | %.0f ms |" % (
                  result["cases"][case], row["cpu_ms"], row["median_ms"], row["stalled_runs"],
                  row["runs"], row["payload_kb"], imp["total"], imp["code_path"],
                  imp["collection"], imp["libraries"], imp["ansible_stdlib"]))
    print("\nLibraries in each code path (self import time of each installed distribution, "
          "median; 0.5 ms and more)\n")
    print("| case | libraries |")
    print("|---|---|")
    for case, row in result["module_process"].items():
        libs = sorted(row["libraries_ms"].items(), key=lambda item: -item[1])
        print("| %s | %s |" % (result["cases"][case], ", ".join(
            "%s %.1f ms" % (lib, ms) for lib, ms in libs if ms >= 0.5) or "none"))


def _print_outage(outage):
    on, off = outage["on"], outage["off"]
    print("\nOutage: libvirtd of %s killed; vm_info tasks with ignore_errors; retry_preset "
          "default (5 attempts, waits of 0.5, 1, 2 and 4 s plus up to 10 %% jitter)\n"
          % outage["hypervisor"])
    print("| breaker | tasks | wall time | per task | tasks failed | provider attempts | "
          "refused by breaker | times opened |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key, label, row in (("on", "on (failure_threshold 3, reset_timeout 60s), measured", on),
                            ("off", "off (failure_threshold 10000), measured", off)):
        print("| %s | %d | %.1f s | %.2f s | %d | %d | %d | %d |" % (
            label, row["tasks"], row["seconds"], outage["per_task"][key],
            row["failed_tasks"], row["failures_total"], row["rejected_total"],
            row["opened_total"]))
    print("| off, PROJECTED to %d tasks from the %d measured | %d | %.0f s | | | %.0f | | |" % (
        off["projected_tasks"], off["tasks"], off["projected_tasks"], off["projected_seconds"],
        off["projected_attempts"]))
    print("\nPer task (minus an empty playbook), breaker off / on: %.1fx, both measured. %s "
          "answered again %.1f s after its restart."
          % (outage["speedup"], outage["hypervisor"], outage["restart_seconds"]))


def print_report(result):
    _print_per_task(result)
    if result["scaling"]:
        _print_scaling(result)
    if result["module_process"]:
        _print_profile(result)
    if result["outage"]:
        _print_outage(result["outage"])
    print("\n| target | measured | goal | result |")
    print("|---|---:|---|---|")
    for row in result["targets"]:
        print("| %s | %s | %s | %s |" % (row["name"], row["measured"], row["target"],
                                         "pass" if row["passed"] else "FAIL"))


# ---------------------------------------------------------------- main

def _peer_available():
    """None when community.libvirt.virt can run here, else why not."""
    if importlib.util.find_spec("ansible_collections.community.libvirt") is None:
        return "community.libvirt is not installed (pip install ansible)"
    if importlib.util.find_spec("lxml") is None:
        return "community.libvirt.virt needs lxml (pip install lxml)"
    return None


def _measure(args, runner, hv, down, cases, result):
    """Fill ``result`` with every measurement; the test VM exists on ``hv`` meanwhile."""
    result["settings"]["vms_on_hypervisor"] = _set_fillers(hv, 0)
    wall, cpu, samples = measure_per_task(runner, cases, args.tasks, args.repeats)
    result.update(per_task=wall, per_task_cpu=cpu, samples=samples,
                  baseline_seconds=statistics.median(x[0] for x in samples["empty"]))
    if args.profile_runs:
        result["module_process"] = measure_module_process(runner, cases, args.profile_runs)
    if args.scale_vms > result["settings"]["vms_on_hypervisor"]:
        vms = _set_fillers(hv, args.scale_vms - result["settings"]["vms_on_hypervisor"])
        lists = dict((c, cases[c]) for c in ("ours_list", "peer_list") if c in cases)
        wall, cpu, samples = measure_per_task(runner, lists, args.tasks, args.repeats, "-scaled")
        result["scaling"] = {"vms": vms, "per_task": wall, "per_task_cpu": cpu,
                             "samples": samples}
        _set_fillers(hv, 0)
    if args.outage_tasks:
        result["outage"] = measure_outage(runner, args.lab_dir, down, args.outage_tasks,
                                          args.outage_off_tasks, result["baseline_seconds"])


def run(args):
    hypervisors = _lab(args.lab_dir)
    hv, down = hypervisors["hv1"], hypervisors["hv2"]
    workdir = tempfile.mkdtemp(prefix="bench-tasks-")
    store_url = "sqlite:///" + os.path.join(workdir, "state.db")
    runner = Runner(workdir)
    peer_note = _peer_available()
    cases = _cases(hv, store_url, peer_note is None)
    result = {"settings": {"hypervisor": hv["name"], "tasks": args.tasks,
                           "repeats": args.repeats, "profile_runs": args.profile_runs,
                           "vm": VM_NAME, "peer_note": peer_note,
                           "python": sys.version.split()[0], "cpus": os.cpu_count()},
              "cases": {case: c[0] for case, c in cases.items()},
              "scaling": None, "module_process": None, "outage": None}
    try:
        _set_fillers(hv, 0)
        runner.run(runner.write("create-vm", _vm_task(hv, store_url, "running")))
        _measure(args, runner, hv, down, cases, result)
    finally:
        try:
            _set_fillers(hv, 0)
            runner.run(runner.write("delete-vm", _vm_task(hv, store_url, "absent")))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    result["targets"] = _targets(result["per_task_cpu"], result["module_process"],
                                 result["outage"])
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab-dir", default=os.environ.get("RESILIENT_VIRT_LAB_DIR",
                                                            DEFAULT_LAB_DIR))
    parser.add_argument("--quick", action="store_true",
                        help="fewer tasks and runs (about a minute and a half)")
    parser.add_argument("--tasks", type=int, help="tasks per playbook (default 20, quick 8)")
    parser.add_argument("--repeats", type=int, help="runs per case (default 3, quick 2)")
    parser.add_argument("--profile-runs", type=int,
                        help="runs of each module payload, 0 to skip (default 7, quick 3)")
    parser.add_argument("--scale-vms", type=int,
                        help="VMs on hv1 for the list scaling, 0 to skip (default 25, quick 10)")
    parser.add_argument("--outage-tasks", type=int, default=50,
                        help="tasks against the killed hypervisor, 0 to skip (default 50)")
    parser.add_argument("--outage-off-tasks", type=int,
                        help="of which measured with the breaker off (default 10, quick 3)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    defaults = {"tasks": (20, 8), "repeats": (3, 2), "profile_runs": (7, 3),
                "scale_vms": (25, 10), "outage_off_tasks": (10, 3)}
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    args.outage_off_tasks = max(1, min(args.outage_off_tasks, args.outage_tasks or 1))
    args.lab_dir = os.path.abspath(args.lab_dir)
    try:
        result = run(args)
    except BenchError as exc:
        print("bench_tasks: %s" % exc, file=sys.stderr)
        return 1
    print_report(result)
    if args.json:
        _write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
