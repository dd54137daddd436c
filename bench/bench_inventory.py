"""ansible-inventory with resilient.virt.hypervisors next to the peer inventory plugins.

Every case is ``ansible-inventory -i SOURCE --list --export`` (what AWX runs), ``--rounds``
rounds with the cases interleaved, the median wall time kept. "Above empty" is that median minus
the median of ansible-inventory on an empty inventory (what the command costs by itself), so
that the plugins are compared on their own work:

1. **vSphere at fleet size**: a private simulator serving HTTPS (the peers speak nothing else)
   with ``--clusters`` clusters of ``--hosts-per-cluster`` hosts and ``--vms-per-cluster`` VMs
   in each (default 200 hosts, 1,000 VMs). resilient.virt with hypervisors only, with VMs
   (cold: no cache), and with VMs from a warm inventory cache (jsonfile); against
   community.vmware.vmware_host_inventory and vmware_vm_inventory (their defaults, tags off;
   the VM inventory runs ``--peer-rounds`` times, it is slow). Each run's host count is checked
   against the simulator's.
2. **Several providers at once**: three small simulators that answer slowly (``--slow-delay`` ms
   on every SOAP call, like distant vCenters), each alone and all three in one source (host
   names prefixed with the provider: the simulators use the same names).
3. **libvirt**: the lab's hypervisors (hv1..hv3, ``--lab-vms`` stopped domains added to each):
   resilient.virt (one source, three providers, VMs included) against community.libvirt.libvirt
   (one source per hypervisor).

Targets: with VMs, cold, at most 1 s above empty and at most 0.1x community.vmware's VM
inventory (above empty); cached at most 0.5 s above empty; the three slow providers together at
most 1.25x the slowest one alone (above empty), where one after the other would cost their sum.

    python3 bench/bench_inventory.py [--lab-dir DIR] [--quick] [--json PATH]
"""
import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml
from bench_tasks import print_targets
from checkout import COLLECTIONS, ROOT, use_checkout

use_checkout()
vcsim = importlib.import_module("vcsim")

TARGET_COLD_S = 1.0
TARGET_COLD_RATIO = 0.1
TARGET_CACHED_S = 0.5
TARGET_TOGETHER = 1.25
PASSWORD_ENV = "BENCH_VCENTER_PASSWORD"
SLOW_COUNT = 3
PREFIXED = ["resilient_virt_provider ~ '_' ~ resilient_virt_name"]
PEERS = os.path.dirname(os.path.dirname(importlib.util.find_spec("ansible").origin))


class BenchError(Exception):
    """The bench could not run; the message says why."""


def _write(path, data):
    with open(path, "w") as handle:
        yaml.safe_dump(data, handle, sort_keys=False)
    return path


def _ours(settings, env_name, **options):
    provider = dict(settings, password="{{ lookup('ansible.builtin.env', '%s') }}" % env_name)
    source = {"plugin": "resilient.virt.hypervisors", "providers": {settings["name"]: provider}}
    source.update(options)
    return source


def _peer(plugin, settings, env_name):
    return {"plugin": plugin, "hostname": settings["host"], "port": settings["port"],
            "username": settings["username"],
            "password": "{{ lookup('ansible.builtin.env', '%s') }}" % env_name,
            "validate_certs": False, "with_tags": False}


class Runner:
    def __init__(self, workdir, env):
        self.workdir = workdir
        self.env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([COLLECTIONS, PEERS]),
                        ANSIBLE_INVENTORY_UNPARSED_FAILED="1", PYTHONDONTWRITEBYTECODE="1",
                        RESILIENT_VIRT_STATE_STORE="sqlite:///" + os.path.join(workdir, "state.db"))
        self.env.update(env)

    def run(self, sources):
        """(wall seconds, hosts listed) of one ansible-inventory run over ``sources``."""
        command = ["ansible-inventory"]
        for source in sources:
            command += ["-i", source]
        began = time.perf_counter()
        proc = subprocess.run(command + ["--list", "--export"], capture_output=True, text=True,
                              env=self.env, cwd=self.workdir, timeout=900, check=False)
        took = time.perf_counter() - began
        if proc.returncode != 0:
            raise BenchError("ansible-inventory %s failed:\n%s" % (" ".join(sources),
                                                                   proc.stderr[-3000:]))
        data = json.loads(proc.stdout)
        return took, len(data.get("_meta", {}).get("hostvars", {}))


def measure(runner, cases, rounds, slow_cases=(), slow_rounds=1):
    """{case: {"median": s, "hosts": n, "samples": [...]}}, rounds interleaved."""
    samples = dict((name, []) for name in cases)
    hosts = {}
    order = list(cases)
    for number in range(rounds):
        shift = number % len(order)
        for name in order[shift:] + order[:shift]:
            if name in slow_cases and len(samples[name]) >= slow_rounds:
                continue
            took, count = runner.run(cases[name])
            samples[name].append(took)
            if hosts.setdefault(name, count) != count:
                raise BenchError("%s listed %d hosts, then %d" % (name, hosts[name], count))
    return dict((name, {"median": statistics.median(samples[name]), "hosts": hosts[name],
                        "samples": samples[name]}) for name in cases)


def _simulator(run_dir, **model):
    settings = vcsim.start(run_dir, bin_dir=os.path.join(vcsim.DEFAULT_RUN_DIR, "vcsim", "bin"),
                           tls=True, **model)
    return settings, settings["password"]


def _lab_domains(lab_dir, count):
    """Define ``count`` stopped filler domains on hv1..hv3; return a function that removes them."""
    import libvirt

    lab = importlib.import_module("lab").Lab(lab_dir)
    made = []
    for hv in ("hv1", "hv2", "hv3"):
        conn = libvirt.open(lab.hypervisor(hv).uri)
        for index in range(count):
            name = "bench-inv-%s-%d" % (hv, index)
            conn.defineXML("<domain type='qemu'><name>%s</name><memory unit='MiB'>64</memory>"
                           "<vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os><devices/>"
                           "</domain>" % name)
            made.append((lab.hypervisor(hv).uri, name))
        conn.close()

    def remove():
        for uri, name in made:
            conn = libvirt.open(uri)
            try:
                conn.lookupByName(name).undefine()
            except libvirt.libvirtError:
                pass
            finally:
                conn.close()

    return lab, remove


def run(args):
    workdir = tempfile.mkdtemp(prefix="bench-inventory-")
    big_dir = os.path.join(workdir, "big")
    slow_dirs = [os.path.join(workdir, "slow%d" % i) for i in range(SLOW_COUNT)]
    result = {"settings": {"clusters": args.clusters, "hosts_per_cluster": args.hosts_per_cluster,
                           "vms_per_cluster": args.vms_per_cluster, "rounds": args.rounds,
                           "peer_rounds": args.peer_rounds, "slow_delay_ms": args.slow_delay,
                           "lab_vms": args.lab_vms}}
    remove = None
    try:
        began = time.perf_counter()
        big, big_password = _simulator(big_dir, clusters=args.clusters,
                                       hosts_per_cluster=args.hosts_per_cluster,
                                       vms=args.vms_per_cluster)
        result["settings"]["simulator_start_s"] = round(time.perf_counter() - began, 1)
        env = {PASSWORD_ENV: big_password}
        slows = []
        for index, slow_dir in enumerate(slow_dirs):
            slow, env["BENCH_SLOW%d_PASSWORD" % index] = _simulator(
                slow_dir, clusters=2, hosts_per_cluster=5, vms=20, delay_ms=args.slow_delay)
            slows.append((dict(slow, name="slow%d" % index), "BENCH_SLOW%d_PASSWORD" % index))
        runner = Runner(workdir, env)

        def path(name):
            return os.path.join(workdir, name)

        cache = {"cache": True, "cache_plugin": "ansible.builtin.jsonfile",
                 "cache_connection": path("cache"), "cache_timeout": 86400}
        sources = {
            "empty": [_write(path("empty.yml"), {"all": {}})],
            "ours_hosts": [_write(path("hosts.hypervisors.yml"), _ours(big, PASSWORD_ENV))],
            "ours_vms_cold": [_write(path("cold.hypervisors.yml"),
                                     _ours(big, PASSWORD_ENV, include_vms=True))],
            "ours_vms_cached": [_write(path("cached.hypervisors.yml"),
                                       _ours(big, PASSWORD_ENV, include_vms=True, **cache))],
            "peer_hosts": [_write(path("hosts.vmware.yml"), _peer(
                "community.vmware.vmware_host_inventory", big, PASSWORD_ENV))],
            "peer_vms": [_write(path("vms.vmware.yml"), _peer(
                "community.vmware.vmware_vm_inventory", big, PASSWORD_ENV))],
        }
        runner.run(sources["ours_vms_cached"])  # warms the cache
        result["vsphere"] = measure(runner, sources, args.rounds, ("peer_vms",), args.peer_rounds)
        expected = args.clusters * args.hosts_per_cluster
        counts = {"ours_hosts": expected, "peer_hosts": expected,
                  "ours_vms_cold": expected + args.clusters * args.vms_per_cluster,
                  "ours_vms_cached": expected + args.clusters * args.vms_per_cluster,
                  "peer_vms": args.clusters * args.vms_per_cluster}
        for case, count in counts.items():
            if result["vsphere"][case]["hosts"] != count:
                raise BenchError("%s listed %d hosts where the simulator holds %d" % (
                    case, result["vsphere"][case]["hosts"], count))

        together = {"empty": sources["empty"]}
        every = _ours(slows[0][0], slows[0][1], include_vms=True, hostnames=PREFIXED)
        for slow, env_name in slows:
            every["providers"].update(_ours(slow, env_name)["providers"])
            together[slow["name"]] = [_write(path("%s.hypervisors.yml" % slow["name"]), _ours(
                slow, env_name, include_vms=True, hostnames=PREFIXED))]
        together["together"] = [_write(path("all.hypervisors.yml"), every)]
        result["concurrency"] = measure(runner, together, args.rounds)
        if together and result["concurrency"]["together"]["hosts"] != 50 * SLOW_COUNT:
            raise BenchError("the slow simulators together listed %d hosts, not %d" % (
                result["concurrency"]["together"]["hosts"], 50 * SLOW_COUNT))

        lab, remove = _lab_domains(args.lab_dir, args.lab_vms)
        with open(lab.source_file) as handle:
            lab_source = yaml.safe_load(handle)
        lab_source["providers"] = dict((name, config) for name, config in
                                       lab_source["providers"].items() if config["type"] == "libvirt")
        libvirt_cases = {
            "empty": sources["empty"],
            "ours": [_write(path("lab.hypervisors.yml"), lab_source)],
            "peer": [_write(path("%s.libvirt.yml" % name), {"plugin": "community.libvirt.libvirt",
                                                            "uri": config["uri"]})
                     for name, config in sorted(lab_source["providers"].items())],
        }
        result["libvirt"] = measure(runner, libvirt_cases, args.rounds)
    finally:
        if remove is not None:
            remove()
        for run_dir in [big_dir] + slow_dirs:
            vcsim.stop(run_dir)
        shutil.rmtree(workdir, ignore_errors=True)
    result["targets"] = targets(result)
    return result


def _above(block, case):
    return block[case]["median"] - block["empty"]["median"]


def targets(result):
    vs, together = result["vsphere"], result["concurrency"]
    cold, cached, peer = _above(vs, "ours_vms_cold"), _above(vs, "ours_vms_cached"), _above(vs, "peer_vms")
    slowest = max(_above(together, "slow%d" % i) for i in range(SLOW_COUNT))
    both = _above(together, "together")
    return [
        {"name": "with VMs, cold: seconds above empty", "measured": round(cold, 2),
         "target": "<= %g" % TARGET_COLD_S, "passed": cold <= TARGET_COLD_S},
        {"name": "with VMs, cold / community.vmware.vmware_vm_inventory (above empty)",
         "measured": round(cold / peer, 3), "target": "<= %g" % TARGET_COLD_RATIO,
         "passed": cold / peer <= TARGET_COLD_RATIO},
        {"name": "with VMs, cached: seconds above empty", "measured": round(cached, 2),
         "target": "<= %g" % TARGET_CACHED_S, "passed": cached <= TARGET_CACHED_S},
        {"name": "three slow providers in one source / the slowest one alone (above empty)",
         "measured": round(both / slowest, 2), "target": "<= %g" % TARGET_TOGETHER,
         "passed": both / slowest <= TARGET_TOGETHER},
    ]


def print_report(result):
    s = result["settings"]
    vs = result["vsphere"]
    print("vSphere simulator over HTTPS: %d hosts (%d clusters), %d VMs (started in %.1f s); "
          "ansible-inventory --list --export, median of %d runs (the peer VM inventory: %d)\n"
          % (s["clusters"] * s["hosts_per_cluster"], s["clusters"],
             s["clusters"] * s["vms_per_cluster"], s["simulator_start_s"], s["rounds"],
             s["peer_rounds"]))
    print("| case | hosts | wall s | above empty s | / peer, above empty |")
    print("|---|---:|---:|---:|---:|")
    rows = (("empty inventory (the command alone)", "empty", None),
            ("resilient.virt.hypervisors, hypervisors", "ours_hosts", "peer_hosts"),
            ("community.vmware.vmware_host_inventory", "peer_hosts", None),
            ("resilient.virt.hypervisors, with VMs, cold", "ours_vms_cold", "peer_vms"),
            ("resilient.virt.hypervisors, with VMs, cached", "ours_vms_cached", "peer_vms"),
            ("community.vmware.vmware_vm_inventory", "peer_vms", None))
    for label, case, peer in rows:
        above = _above(vs, case) if case != "empty" else 0.0
        ratio = "%.3f" % (above / _above(vs, peer)) if peer else ""
        shown = "%.2f" % above if case != "empty" else ""
        row = (label, vs[case]["hosts"], vs[case]["median"], shown, ratio)
        print("| %s | %d | %.2f | %s | %s |" % row)
    together = result["concurrency"]
    print("\nSeveral providers at once: %d simulators answering slowly (%d ms per SOAP call; 10 "
          "hosts and 40 VMs each), VMs included, median of %d runs\n"
          % (SLOW_COUNT, s["slow_delay_ms"], s["rounds"]))
    print("| source | hosts | wall s | above empty s |")
    print("|---|---:|---:|---:|")
    cases = [("slow%d alone" % i, "slow%d" % i) for i in range(SLOW_COUNT)]
    for label, case in cases + [("all %d in one source" % SLOW_COUNT, "together")]:
        print("| %s | %d | %.2f | %.2f |" % (label, together[case]["hosts"],
                                             together[case]["median"], _above(together, case)))
    print("\nAll %d together: %.2fx the slowest alone; one after the other they would take "
          "%.2f s (the sum above empty)." % (
              SLOW_COUNT, _above(together, "together") / max(
                  _above(together, c) for _l, c in cases),
              sum(_above(together, c) for _l, c in cases)))
    lv = result["libvirt"]
    print("\nThe lab's 3 libvirt hypervisors with %d stopped domains added to each, median of %d "
          "runs\n" % (s["lab_vms"], s["rounds"]))
    print("| source | hosts | wall s | above empty s |")
    print("|---|---:|---:|---:|")
    for label, case in (("resilient.virt.hypervisors (one source, VMs included)", "ours"),
                        ("community.libvirt.libvirt (one source per hypervisor)", "peer")):
        print("| %s | %d | %.2f | %.2f |" % (label, lv[case]["hosts"], lv[case]["median"],
                                             _above(lv, case)))
    print_targets(result["targets"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab-dir", default=os.environ.get("RESILIENT_VIRT_LAB_DIR",
                                                            os.path.join(ROOT, "lab", "run")))
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--hosts-per-cluster", type=int, default=20)
    parser.add_argument("--vms-per-cluster", type=int, default=100)
    parser.add_argument("--rounds", type=int, help="runs per case (default 5, quick 3)")
    parser.add_argument("--peer-rounds", type=int, help="runs of the peer VM inventory (default 3, quick 1)")
    parser.add_argument("--slow-delay", type=int, default=200, help="ms per SOAP call of the slow simulator")
    parser.add_argument("--lab-vms", type=int, default=20, help="stopped domains added per lab hypervisor")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.peer_rounds = args.peer_rounds or (1 if args.quick else 3)
    try:
        result = run(args)
    except BenchError as err:
        print("bench_inventory could not run: %s" % err, file=sys.stderr)
        return 2
    print_report(result)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
