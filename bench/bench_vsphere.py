"""Per-call wall time of the vsphere provider against the vSphere API simulator (lab/vcsim).

Compares, on one simulator (1 datacenter, 2 clusters, 3 hosts each, ``--vms`` VMs per
cluster; HTTPS with a certificate of the lab CA, verified by every session):

* ``provider``: VSphereProvider methods (one PropertyCollector query per read);
* ``guarded``: the same through GuardedProvider (policy, breaker and rate limit on SQLite);
* ``raw attributes``: plain pyVmomi the usual way: a container view, then attribute access,
  which costs one SOAP call per property read (names compared VM by VM; fewer properties
  than the provider returns, no devices);
* ``raw collector``: plain pyVmomi with hand-written PropertyCollector queries fetching the
  same properties as the provider, without converting them (the floor).

It also times a login (SmartConnect), paid once per Ansible task since each task is a new
process. Prints a markdown table of medians and 95th percentiles in milliseconds.

    python3 bench/bench_vsphere.py [--vms N] [--rounds N] [--json PATH]
"""
import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time

from checkout import use_checkout


use_checkout()
vcsim = importlib.import_module("vcsim")

from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import (  # noqa: E402
    VSphereProvider)

TARGET = "DC0_C1_RP0_VM0"


def timed(fn, rounds):
    """Milliseconds of each of ``rounds`` calls of ``fn`` (after one warm-up call)."""
    fn()
    out = []
    for _dummy in range(rounds):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def _connect(settings):
    """A pyVmomi session verified with the simulator's CA (``ca_path``), as the provider's."""
    import ssl

    from pyVim.connect import SmartConnect

    return SmartConnect(protocol="https", host=settings["host"], port=settings["port"],
                        user=settings["username"], pwd=settings["password"],
                        sslContext=ssl.create_default_context(cafile=settings["ca_path"]))


def raw_attr_describe(content, name):
    """A VM read the common way: container view, then attribute access (a SOAP call each)."""
    from pyVmomi import vim

    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    try:
        for vm in view.view:
            if vm.name == name:
                host = vm.runtime.host
                return {"name": vm.name, "uuid": vm.config.instanceUuid,
                        "state": vm.runtime.powerState, "vcpus": vm.config.hardware.numCPU,
                        "memory_mb": vm.config.hardware.memoryMB, "hypervisor": host.name,
                        "az": host.parent.name}
    finally:
        view.Destroy()
    return None


def raw_attr_list(content):
    from pyVmomi import vim

    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.VirtualMachine], True)
    try:
        return [{"name": vm.name, "state": vm.runtime.powerState,
                 "vcpus": vm.config.hardware.numCPU, "memory_mb": vm.config.hardware.memoryMB,
                 "hypervisor": vm.runtime.host.name} for vm in view.view]
    finally:
        view.Destroy()


def raw_attr_hosts(content):
    from pyVmomi import vim

    view = content.viewManager.CreateContainerView(content.rootFolder, [vim.HostSystem], True)
    try:
        return [{"name": h.name, "az": h.parent.name, "cpu": h.summary.hardware.numCpuCores,
                 "memory": h.summary.hardware.memorySize,
                 "used_cpu": h.summary.quickStats.overallCpuUsage,
                 "used_memory_mb": h.summary.quickStats.overallMemoryUsage,
                 "state": h.runtime.connectionState} for h in view.view]
    finally:
        view.Destroy()


def raw_collector(content, view, kind, paths):
    """One PropertyCollector query over a container view (no conversion)."""
    from pyVmomi import vim, vmodl

    pc = vmodl.query.PropertyCollector
    traverse = pc.TraversalSpec(name="v", path="view", skip=False, type=vim.view.ContainerView)
    spec = pc.FilterSpec(objectSet=[pc.ObjectSpec(obj=view, skip=True, selectSet=[traverse])],
                         propSet=[pc.PropertySpec(type=kind, pathSet=paths)])
    return content.propertyCollector.RetrievePropertiesEx([spec], pc.RetrieveOptions())


def raw_collector_describe(content, view, name, paths):
    """Two PropertyCollector queries: every VM's name, then the properties of the match."""
    from pyVmomi import vim, vmodl

    pc = vmodl.query.PropertyCollector
    names = raw_collector(content, view, vim.VirtualMachine, ["name"])
    ref = next(o.obj for o in names.objects if o.propSet[0].val == name)
    spec = pc.FilterSpec(objectSet=[pc.ObjectSpec(obj=ref, skip=False)],
                         propSet=[pc.PropertySpec(type=vim.VirtualMachine, pathSet=paths)])
    return content.propertyCollector.RetrievePropertiesEx([spec], pc.RetrieveOptions())


def _guarded(settings, run_dir):
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
    from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
        open_provider)
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    resolved = resolve_settings(None, environ={})
    store = open_store("sqlite:///" + os.path.join(run_dir, "state.db"), environ={})
    return open_provider(settings, resolved, store, environ={})


def run(vms, rounds):
    from pyVim.connect import Disconnect
    from pyVmomi import vim

    run_dir = tempfile.mkdtemp(prefix="bench-vsphere-")
    bin_dir = os.path.join(vcsim.DEFAULT_RUN_DIR, "vcsim", "bin")
    settings = vcsim.start(run_dir, bin_dir=bin_dir, vms=vms)
    try:
        provider = VSphereProvider(settings)
        guarded = _guarded(settings, run_dir)
        si = _connect(settings)
        content = si.RetrieveContent()
        vm_view = content.viewManager.CreateContainerView(content.rootFolder,
                                                          [vim.VirtualMachine], True)
        host_view = content.viewManager.CreateContainerView(content.rootFolder,
                                                            [vim.HostSystem], True)
        # the same properties as the provider reads (devices give disks and interfaces)
        vm_paths = ["name", "config.instanceUuid", "config.hardware.numCPU",
                    "config.hardware.memoryMB", "config.hardware.device", "runtime.powerState",
                    "runtime.host", "customValue"]
        host_paths = ["name", "parent", "summary.hardware", "summary.quickStats",
                      "runtime.connectionState"]
        cases = [
            ("login (SmartConnect)", "raw", lambda: Disconnect(_connect(settings))),
            ("describe", "provider", lambda: provider.describe(TARGET)),
            ("describe", "guarded", lambda: guarded.describe(TARGET)),
            ("describe", "raw attributes", lambda: raw_attr_describe(content, TARGET)),
            ("describe", "raw collector", lambda: raw_collector_describe(content, vm_view, TARGET,
                                                                         vm_paths)),
            ("list_vms", "provider", provider.list_vms),
            ("list_vms", "guarded", guarded.list_vms),
            ("list_vms", "raw attributes", lambda: raw_attr_list(content)),
            ("list_vms", "raw collector", lambda: raw_collector(content, vm_view,
                                                                vim.VirtualMachine, vm_paths)),
            ("list_hypervisors", "provider", provider.list_hypervisors),
            ("list_hypervisors", "guarded", guarded.list_hypervisors),
            ("list_hypervisors", "raw attributes", lambda: raw_attr_hosts(content)),
            ("list_hypervisors", "raw collector", lambda: raw_collector(
                content, host_view, vim.HostSystem, host_paths)),
        ]
        rows = []
        for operation, how, fn in cases:
            samples = timed(fn, rounds)
            samples.sort()
            rows.append({"operation": operation, "how": how, "rounds": rounds,
                         "median_ms": round(statistics.median(samples), 2),
                         "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2)})
        provider.close()
        guarded.close()
        Disconnect(si)
        return rows
    finally:
        vcsim.stop(run_dir)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vms", type=int, default=50, help="VMs per cluster (default 50)")
    parser.add_argument("--rounds", type=int, default=30, help="timed calls per case")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = run(args.vms, args.rounds)
    print("vsphere provider vs pyVmomi, simulator with %d VMs and 6 hosts, %d calls each\n"
          % (2 * args.vms, args.rounds))
    print("| operation | how | median ms | p95 ms |")
    print("|---|---|---:|---:|")
    for row in rows:
        print("| %s | %s | %.2f | %.2f |" % (row["operation"], row["how"], row["median_ms"], row["p95_ms"]))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
