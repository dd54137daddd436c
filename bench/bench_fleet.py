"""Fleet reconcile: one resilient.virt.vm_fleet task against loops of tasks, on the lab.

Every case is one ``ansible-playbook`` run timed by ``bench_tasks.Runner`` (wall time, and CPU
time: user + system of ansible-playbook and every process it waited for), with a private SQLite
state store and no ``RESILIENT_VIRT_*`` settings of the caller:

1. **Creating** ``--vms`` stopped diskless VMs (1 vCPU, 64 MiB, no disks, no interfaces) spread
   round robin over the lab's hypervisors hv1..hv3 (``--lab-dir``), once each way: one
   ``resilient.virt.vm_fleet`` task (owner ``bench``); a ``loop`` over ``resilient.virt.vm``
   (``state: present``), its tasks in the worker (the default), then again as module processes
   (``RESILIENT_VIRT_IN_PROCESS=false``); a ``loop`` over ``community.libvirt.virt`` (``command: define``, the
   domain XML built per item by a Jinja template, ``uri`` per hypervisor). After each case the
   VMs are counted on the hypervisors, then deleted with libvirt-python (not measured).
2. **No-change incremental run** of the same fleet (the fleet task again, its VMs in place):
   median of ``--repeats`` runs, interleaved with as many runs of an empty play (no tasks),
   whose median is Ansible's start-up, subtracted.
3. **vSphere at fleet size**: a private simulator (HTTPS; ``--clusters`` clusters of
   ``--hosts-per-cluster`` hosts, started without VMs) where one vm_fleet task creates
   ``--vsphere-vms`` VMs (one run, measured), then the no-change ``full: true`` run (every VM
   read from one listing), median of ``--repeats`` runs interleaved with the empty play.

Targets: creating the fleet at least 20x faster (wall) with vm_fleet than with the loop of
``vm`` tasks as module processes (the loop in the worker is reported beside it); the no-change
incremental run at most 1 s above the empty play. Every VM this bench makes is named
``bench-fleet-*``; such VMs are deleted from hv1..hv3 before it starts and when it ends,
whatever happens, and the simulator is stopped.

    python3 bench/bench_fleet.py [--lab-dir DIR] [--quick] [--json PATH]

``--quick`` keeps the 200 VMs on the lab (the targets are set for them) but runs the no-change
cases 3 times instead of 5 and makes 200 VMs on the simulator instead of 1,000.

Prints markdown tables with the targets and pass/fail; exits 0 when the bench ran (a missed
target is reported, not an error) and 1 when it could not run.
"""
import argparse
import importlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import libvirt
from checkout import ROOT, use_checkout

use_checkout()

from bench_inventory import _simulator  # noqa: E402
from bench_tasks import BenchError, Runner, _peer_available, print_targets, run_and_report  # noqa: E402

from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import (  # noqa: E402
    VSphereProvider)

vcsim = importlib.import_module("vcsim")

PREFIX = "bench-fleet-"
OWNER = "bench"
HYPERVISORS = ("hv1", "hv2", "hv3")
VCPUS, MEMORY_MB = 1, 64
TARGET_SPEEDUP = 20.0       # loop of vm tasks as module processes / one vm_fleet task, wall time
MODULE_PATH = {"RESILIENT_VIRT_IN_PROCESS": "false"}  # tasks as module processes
TARGET_NO_CHANGE_S = 1.0    # no-change incremental run, seconds above the empty play
PASSWORD_ENV = "BENCH_FLEET_VCENTER_PASSWORD"
DOMAIN_XML = ("<domain type='qemu'><name>{{ item.name }}</name><memory unit='MiB'>%d</memory>"
              "<vcpu>%d</vcpu><os><type arch='x86_64'>hvm</type></os><devices/></domain>"
              % (MEMORY_MB, VCPUS))


# ---------------------------------------------------------------- lab domains

def _providers(lab_dir):
    """{hv: libvirt provider dict} of hv1..hv3 from the lab's ``lab.json``."""
    try:
        with open(os.path.join(lab_dir, "lab.json")) as handle:
            state = json.load(handle)
    except OSError as exc:
        raise BenchError("no lab in %s (%s): run `python3 lab/lab.py up --run-dir %s` first"
                         % (lab_dir, exc.strerror, lab_dir)) from exc
    found = dict((hv["name"], hv["uri"]) for hv in state["hypervisors"])
    missing = [name for name in HYPERVISORS if name not in found]
    if missing:
        raise BenchError("the lab in %s lacks %s: run `python3 lab/lab.py up --count 3`"
                         % (lab_dir, ", ".join(missing)))
    return dict((name, {"type": "libvirt", "name": name, "uri": found[name], "domain_type": "qemu"})
                for name in HYPERVISORS)


def _domains(providers):
    """{hv: {name: active}} of the ``bench-fleet-*`` domains on each hypervisor."""
    found = {}
    for hv, provider in providers.items():
        conn = libvirt.open(provider["uri"])
        try:
            found[hv] = dict((dom.name(), bool(dom.isActive())) for dom in conn.listAllDomains()
                             if dom.name().startswith(PREFIX))
        finally:
            conn.close()
    return found


def _remove_domains(providers):
    """Delete every ``bench-fleet-*`` domain of hv1..hv3; return how many were deleted."""
    removed = 0
    for provider in providers.values():
        conn = libvirt.open(provider["uri"])
        try:
            for dom in conn.listAllDomains():
                if not dom.name().startswith(PREFIX):
                    continue
                try:
                    if dom.isActive():
                        dom.destroy()
                    dom.undefine()
                    removed += 1
                except libvirt.libvirtError:
                    pass  # counted by the caller's final check
        finally:
            conn.close()
    return removed


def _check_created(providers, vms):
    """{hv: count} of the fleet's domains; BenchError unless exactly ``vms`` exist, stopped."""
    found = _domains(providers)
    wanted = dict((vm["name"], vm["provider"]) for vm in vms)
    have = dict((name, hv) for hv, names in found.items() for name in names)
    running = sorted(name for names in found.values() for name, active in names.items() if active)
    if have != wanted or running:
        raise BenchError("expected the %d VMs stopped on their hypervisors; found %d (%d "
                         "misplaced or extra, %d missing, %d running)" % (
                             len(wanted), len(have),
                             sum(1 for n, hv in have.items() if wanted.get(n) != hv),
                             sum(1 for n in wanted if n not in have), len(running)))
    return dict((hv, len(names)) for hv, names in found.items())


# ---------------------------------------------------------------- tasks

def _fleet_vms(count, providers, width=3):
    """``count`` VM dicts of vm_fleet's ``vms`` list, spread round robin over ``providers``."""
    names = sorted(providers)
    return [{"name": "%s%0*d" % (PREFIX, width, index + 1), "provider": names[index % len(names)],
             "state": "present", "vcpus": VCPUS, "memory_mb": MEMORY_MB}
            for index in range(count)]


def _fleet_task(providers, vms, store_url, **options):
    args = {"owner": OWNER, "providers": providers, "vms": vms, "state_store": store_url}
    args.update(options)
    return {"name": "fleet of %d VMs" % len(vms), "resilient.virt.vm_fleet": args}


def _vm_loop_task(providers, vms, store_url):
    return {"name": "vm, one per item",
            "resilient.virt.vm": {"providers": providers, "provider": "{{ item.provider }}",
                                  "name": "{{ item.name }}", "state": "{{ item.state }}",
                                  "vcpus": "{{ item.vcpus }}", "memory_mb": "{{ item.memory_mb }}",
                                  "state_store": store_url},
            "loop": vms, "loop_control": {"label": "{{ item.name }}"}}


def _peer_loop_task(providers, vms):
    items = [{"name": vm["name"], "uri": providers[vm["provider"]]["uri"]} for vm in vms]
    return {"name": "community.libvirt.virt define, one per item",
            "community.libvirt.virt": {"command": "define", "uri": "{{ item.uri }}",
                                       "xml": DOMAIN_XML},
            "loop": items, "loop_control": {"label": "{{ item.name }}"}}


# ---------------------------------------------------------------- measuring

def _sample(runner, path, env=None, changed=None):
    """{wall, cpu, recap} of one run; BenchError when ``changed`` is given and the recap's
    changed count differs."""
    wall, cpu, recap = runner.run(path, env=env)
    if changed is not None and recap.get("changed", 0) != changed:
        raise BenchError("%s reported changed=%d, expected %d" % (
            os.path.basename(path), recap.get("changed", 0), changed))
    return {"wall": wall, "cpu": cpu, "recap": recap}


def _against_empty(runner, path, empty, repeats, env=None):
    """Medians of ``repeats`` no-change runs of ``path`` interleaved with the empty play:
    {"case": {wall, cpu, samples}, "empty": {...}, "above_empty": wall s}."""
    samples = {"case": [], "empty": []}
    for number in range(repeats):
        order = ("case", "empty") if number % 2 == 0 else ("empty", "case")
        for which in order:
            if which == "case":
                samples[which].append(_sample(runner, path, env, changed=0))
            else:
                samples[which].append(_sample(runner, empty, env))
    out = dict((which, {"wall": statistics.median(s["wall"] for s in rows),
                        "cpu": statistics.median(s["cpu"] for s in rows),
                        "samples": [[round(s["wall"], 3), round(s["cpu"], 3)] for s in rows]})
               for which, rows in samples.items())
    out["above_empty"] = out["case"]["wall"] - out["empty"]["wall"]
    return out


def measure_libvirt(runner, providers, args, result):
    """Cases 1 and 2 on hv1..hv3; every VM made is deleted before returning normally."""
    vms = _fleet_vms(args.vms, providers)
    store = os.path.join(runner.workdir, "%s.db")
    fleet = runner.write("fleet-create", [_fleet_task(providers, vms, "sqlite:///" + store % "fleet")])
    create = result["create"]
    create["fleet"] = _sample(runner, fleet, changed=1)
    create["fleet"]["per_hypervisor"] = _check_created(providers, vms)
    empty = runner.write("empty", [])
    result["incremental"] = _against_empty(runner, fleet, empty, args.repeats)
    _remove_domains(providers)

    loop = runner.write("vm-loop", [_vm_loop_task(providers, vms, "sqlite:///" + store % "loop")])
    create["vm_loop"] = _sample(runner, loop, changed=1)
    create["vm_loop"]["per_hypervisor"] = _check_created(providers, vms)
    _remove_domains(providers)

    # the same loop with every task a module process, as tasks ran before the action plugins
    loop = runner.write("vm-loop-module", [_vm_loop_task(providers, vms, "sqlite:///" + store % "loop-module")])
    create["vm_loop_module"] = _sample(runner, loop, env=MODULE_PATH, changed=1)
    create["vm_loop_module"]["per_hypervisor"] = _check_created(providers, vms)
    _remove_domains(providers)

    if result["settings"]["peer_note"] is None:
        peer = runner.write("peer-loop", [_peer_loop_task(providers, vms)])
        create["peer_loop"] = _sample(runner, peer, changed=1)
        create["peer_loop"]["per_hypervisor"] = _check_created(providers, vms)
        _remove_domains(providers)
    fleet_run = create["fleet"]
    result["ratios"] = dict(
        ("%s_%s" % (case, unit), create[case][unit] / fleet_run[unit])
        for case in ("vm_loop", "vm_loop_module", "peer_loop") if case in create
        for unit in ("wall", "cpu"))


def measure_vsphere(runner, args, result):
    """Case 3 on a private simulator, stopped before returning, whatever happens."""
    run_dir = os.path.join(runner.workdir, "vcsim")
    model = {"clusters": args.clusters, "hosts_per_cluster": args.hosts_per_cluster, "vms": 0}
    try:
        began = time.perf_counter()
        try:
            settings, password = _simulator(run_dir, **model)
        except RuntimeError as exc:
            raise BenchError("the vSphere simulator did not start: %s" % exc) from exc
        started = time.perf_counter() - began
        provider = dict(settings, password="{{ lookup('ansible.builtin.env', '%s') }}"
                        % PASSWORD_ENV)
        env = {PASSWORD_ENV: password}
        providers = {settings["name"]: provider}
        vms = _fleet_vms(args.vsphere_vms, providers, width=4)
        store_url = "sqlite:///" + os.path.join(runner.workdir, "vsphere.db")
        create = runner.write("vsphere-create", [_fleet_task(providers, vms, store_url)])
        full = runner.write("vsphere-full", [_fleet_task(providers, vms, store_url, full=True)])
        out = {"model": dict(model, hosts=args.clusters * args.hosts_per_cluster, tls=True),
               "start_seconds": started, "vms": len(vms)}
        out["create"] = _sample(runner, create, env, changed=1)
        out["vms_found"] = _count_vsphere(settings, password)
        if out["vms_found"] != len(vms):
            raise BenchError("the fleet task created %d VMs on the simulator, not %d"
                             % (out["vms_found"], len(vms)))
        out["full"] = _against_empty(runner, full, runner.write("empty", []), args.repeats, env)
        result["vsphere"] = out
    finally:
        vcsim.stop(run_dir)


def _count_vsphere(settings, password):
    """How many ``bench-fleet-*`` VMs the simulator holds."""
    provider = VSphereProvider(dict(settings, password=password))
    try:
        return sum(1 for vm in provider.list_vm_summaries() if vm["name"].startswith(PREFIX))
    finally:
        provider.close()


def run(args):
    providers = _providers(args.lab_dir)
    workdir = tempfile.mkdtemp(prefix="bench-fleet-")
    began = time.perf_counter()
    result = {"settings": {"vms": args.vms, "vsphere_vms": args.vsphere_vms,
                           "repeats": args.repeats, "owner": OWNER,
                           "hypervisors": list(providers), "peer_note": _peer_available(),
                           "python": sys.version.split()[0], "cpus": os.cpu_count()},
              "create": {}, "vsphere": None}
    left = None
    try:
        runner = Runner(workdir)
        result["settings"]["leftovers_removed"] = _remove_domains(providers)
        try:
            measure_libvirt(runner, providers, args, result)
        finally:
            _remove_domains(providers)
            left = sum(len(names) for names in _domains(providers).values())
            if left:
                print("bench_fleet: %d %s* VMs could not be deleted from %s"
                      % (left, PREFIX, ", ".join(providers)), file=sys.stderr)
        if args.vsphere_vms:
            measure_vsphere(runner, args, result)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if left:
        raise BenchError("%d %s* VMs are left on the lab's hypervisors" % (left, PREFIX))
    result["seconds"] = time.perf_counter() - began
    result["targets"] = targets(result)
    return result


# ---------------------------------------------------------------- report

def targets(result):
    """The bench's targets: {name, measured, target, passed}."""
    vms = result["settings"]["vms"]
    speedup = result["ratios"]["vm_loop_module_wall"]
    above = result["incremental"]["above_empty"]
    return [
        {"name": "creating %d VMs: loop of resilient.virt.vm as module processes / one vm_fleet "
                 "task, wall" % vms,
         "measured": round(speedup, 1), "target": ">= %g" % TARGET_SPEEDUP,
         "passed": speedup >= TARGET_SPEEDUP},
        {"name": "no-change incremental run of %d VMs: seconds above the empty play" % vms,
         "measured": round(above, 2), "target": "< %g" % TARGET_NO_CHANGE_S,
         "passed": above < TARGET_NO_CHANGE_S},
    ]


def _ratio(a, b):
    return "%.1f" % (a / b) if b > 0 else "n/a"


def print_report(result):
    s, create = result["settings"], result["create"]
    fleet = create["fleet"]
    print("Creating %d stopped diskless VMs (%d vCPU, %d MiB, no disks, no interfaces) spread "
          "over %s; one ansible-playbook run each. CPU: user + system time of ansible-playbook "
          "and its module processes.\n" % (s["vms"], VCPUS, MEMORY_MB, ", ".join(s["hypervisors"])))
    print("| case | wall s | CPU s | wall / vm_fleet | CPU / vm_fleet |")
    print("|---|---:|---:|---:|---:|")
    rows = (("one resilient.virt.vm_fleet task", "fleet"),
            ("loop over resilient.virt.vm (state: present), tasks in the worker", "vm_loop"),
            ("loop over resilient.virt.vm (state: present), tasks as module processes",
             "vm_loop_module"),
            ("loop over community.libvirt.virt (command: define, templated xml)", "peer_loop"))
    for label, case in rows:
        if case in create:
            row = create[case]
            print("| %s | %.2f | %.2f | %s | %s |" % (label, row["wall"], row["cpu"],
                                                      _ratio(row["wall"], fleet["wall"]),
                                                      _ratio(row["cpu"], fleet["cpu"])))
        else:
            print("| %s | not measured: %s | | | |" % (label, s["peer_note"]))
    inc = result["incremental"]
    print("\nNo-change incremental run of the same %d-VM fleet: median of %d runs, interleaved "
          "with an empty play\n" % (s["vms"], s["repeats"]))
    print("| case | wall s | CPU s | above the empty play s |")
    print("|---|---:|---:|---:|")
    print("| empty play (Ansible's start-up) | %.2f | %.2f | |" % (inc["empty"]["wall"],
                                                                   inc["empty"]["cpu"]))
    print("| vm_fleet, incremental, no change | %.2f | %.2f | %.2f |" % (
        inc["case"]["wall"], inc["case"]["cpu"], inc["above_empty"]))
    vs = result["vsphere"]
    if vs:
        model = vs["model"]
        print("\nvSphere simulator over HTTPS: %d hosts (%d clusters), started without VMs in "
              "%.1f s; one vm_fleet task creates %d VMs, then a no-change run with full: true "
              "(median of %d runs, interleaved with an empty play)\n"
              % (model["hosts"], model["clusters"], vs["start_seconds"], vs["vms"],
                 s["repeats"]))
        print("| case | wall s | CPU s | above the empty play s |")
        print("|---|---:|---:|---:|")
        empty = vs["full"]["empty"]
        print("| empty play (Ansible's start-up) | %.2f | %.2f | |" % (empty["wall"],
                                                                       empty["cpu"]))
        print("| vm_fleet, create %d VMs (one run) | %.2f | %.2f | %.2f |" % (
            vs["vms"], vs["create"]["wall"], vs["create"]["cpu"],
            vs["create"]["wall"] - empty["wall"]))
        print("| vm_fleet, full: true, no change | %.2f | %.2f | %.2f |" % (
            vs["full"]["case"]["wall"], vs["full"]["case"]["cpu"], vs["full"]["above_empty"]))
    print_targets(result["targets"])
    print("\nWhole bench: %.0f s." % result["seconds"])


# ---------------------------------------------------------------- main

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab-dir", default=os.environ.get("RESILIENT_VIRT_LAB_DIR",
                                                            os.path.join(ROOT, "lab", "run")))
    parser.add_argument("--quick", action="store_true",
                        help="3 no-change runs and 200 vSphere VMs (about 2.5 minutes)")
    parser.add_argument("--vms", type=int, default=200, help="VMs created on hv1..hv3 (default 200)")
    parser.add_argument("--vsphere-vms", type=int,
                        help="VMs created on the simulator, 0 to skip (default 1000, quick 200)")
    parser.add_argument("--repeats", type=int, help="runs of each no-change case (default 5, quick 3)")
    parser.add_argument("--clusters", type=int, default=4, help="simulator clusters (default 4)")
    parser.add_argument("--hosts-per-cluster", type=int, default=5,
                        help="simulator hosts per cluster (default 5)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.vsphere_vms is None:
        args.vsphere_vms = 200 if args.quick else 1000
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    args.lab_dir = os.path.abspath(args.lab_dir)
    return run_and_report("bench_fleet", run, print_report, args)


if __name__ == "__main__":
    sys.exit(main())
