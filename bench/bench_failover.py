"""Benchmark of the failover reconcile cycle on seeded synthetic fleets.

Fleets of 1,000 VMs / 100 hypervisors, 5,000 / 500 and 10,000 / 1,000 in three zones; about
one hypervisor in ten has the CUSTOM_HANA trait and runs the hana_* VMs, which require it.
Requirements: {"hana_*": 2, "*": 1}. For each fleet it times a first cycle (no reservations
yet) and a second cycle on its result (best of --repeat runs each) and prints a markdown table.
Coverage and sharing are read after the second cycle; "time per VM vs smallest" compares the
first cycle's seconds per VM with the smallest fleet's.

    python3 bench/bench_failover.py [--quick] [--json PATH] [--seed N] [--repeat N]
"""
import argparse
import json
import random
import time

from checkout import use_checkout

use_checkout()

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (  # noqa: E402
    VM, Hypervisor)
from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import (  # noqa: E402
    run_cycle)
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import (  # noqa: E402
    FailoverSettings)

ZONES = ("az-a", "az-b", "az-c")
REQUIREMENTS = {"hana_*": 2, "*": 1}
REGULAR = (("m1.small", 2, 4096), ("m1.medium", 4, 8192), ("m1.large", 8, 16384),
           ("m1.xlarge", 16, 32768))
HANA = (("hana_small", 16, 131072), ("hana_large", 32, 262144))
SIZES = ((1000, 100), (5000, 500), (10000, 1000))
QUICK_SIZES = ((300, 30), (1000, 100))


def make_fleet(vm_count, host_count, seed):
    """(hypervisors, vms): a tenth of the hosts are HANA hosts running the HANA VMs (5 %)."""
    rng = random.Random(seed)
    hypervisors = []
    for index in range(host_count):
        hana = index % 10 == 0
        hypervisors.append(Hypervisor(
            name="hv%05d" % index, az=ZONES[index % len(ZONES)],
            cpu=256 if hana else 128, memory_mb=(3072 if hana else 768) * 1024,
            traits=frozenset(["CUSTOM_HANA"]) if hana else frozenset()))
    hana_hosts = [hv for hv in hypervisors if "CUSTOM_HANA" in hv.traits]
    regular_hosts = [hv for hv in hypervisors if "CUSTOM_HANA" not in hv.traits]
    used = {hv.name: [0, 0] for hv in hypervisors}
    vms = []
    for index in range(vm_count):
        hana = rng.random() < 0.05
        flavor, vcpus, memory = rng.choice(HANA if hana else REGULAR)
        host = rng.choice(hana_hosts if hana else regular_hosts)
        used[host.name][0] += vcpus
        used[host.name][1] += memory
        vms.append(VM(uuid="%08x-0000-4000-8000-%012d" % (rng.getrandbits(32), index),
                      host=host.name, az=host.az, flavor=flavor, vcpus=vcpus, memory_mb=memory,
                      extra_specs={"trait:CUSTOM_HANA": "required"} if hana else {}))
    hypervisors = [Hypervisor(hv.name, hv.az, hv.cpu, hv.memory_mb, hv.traits,
                              used[hv.name][0], used[hv.name][1]) for hv in hypervisors]
    return hypervisors, vms


def _timed(repeat, fn):
    """(best seconds over ``repeat`` runs, result of the last run)."""
    best, result = None, None
    for _dummy in range(repeat):
        start = time.perf_counter()
        result = fn()
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    return best, result


def measure(vm_count, host_count, seed, repeat):
    hypervisors, vms = make_fleet(vm_count, host_count, seed)
    settings = FailoverSettings(requirements=dict(REQUIREMENTS))
    first_seconds, first = _timed(repeat, lambda: run_cycle(
        hypervisors, vms, [], settings, now=1.8e9, cycle=0))
    second_seconds, second = _timed(repeat, lambda: run_cycle(
        hypervisors, vms, first.reservations, settings, now=1.8e9 + 60, cycle=1))
    summary = second.summary
    allocations = sum(len(r.allocations) for r in second.reservations)
    return {
        "vms": vm_count, "hypervisors": host_count,
        "seconds_first_cycle": round(first_seconds, 3),
        "seconds_second_cycle": round(second_seconds, 3),
        "coverage_after_first": first.summary["coverage_ratio"],
        "created_first": first.summary["created"], "reused_first": first.summary["reused"],
        "created_second": summary["created"], "reused_second": summary["reused"],
        "reservations": summary["reservations"], "reserved_cpu": summary["reserved_cpu"],
        "reserved_memory_mb": summary["reserved_memory_mb"],
        "coverage_ratio": summary["coverage_ratio"],
        "vms_per_reservation": round(allocations / max(1, summary["reservations"]), 2),
    }


def table(rows):
    base = rows[0]["seconds_first_cycle"] / rows[0]["vms"]
    lines = ["| VMs | hypervisors | s, 1st cycle | s, 2nd cycle | reservations | reserved cpu | "
             "reserved memory (GiB) | coverage 1st | coverage 2nd | VMs per reservation | "
             "time per VM vs smallest |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        row["scaling"] = round(row["seconds_first_cycle"] / row["vms"] / base, 2)
        lines.append("| %d | %d | %.2f | %.2f | %d | %d | %d | %.4f | %.4f | %.2f | %.2f |" % (
            row["vms"], row["hypervisors"], row["seconds_first_cycle"],
            row["seconds_second_cycle"], row["reservations"], row["reserved_cpu"],
            row["reserved_memory_mb"] // 1024, row["coverage_after_first"],
            row["coverage_ratio"], row["vms_per_reservation"], row["scaling"]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--quick", action="store_true", help="small fleets only")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3, help="runs per cycle; the best is kept")
    args = parser.parse_args(argv)
    rows = [measure(vms, hosts, args.seed, max(1, args.repeat))
            for vms, hosts in (QUICK_SIZES if args.quick else SIZES)]
    print(table(rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"requirements": REQUIREMENTS, "seed": args.seed, "rows": rows}, handle,
                      indent=2)


if __name__ == "__main__":
    main()
