"""Failover plans on fleets of many shapes: the settled plan against the plain greedy and the
lower bound.

Each fleet is drawn from its index: 1 to 5 zones of 4 to 400 hypervisors (128 to 256 GiB, 64
vCPUs; at most SHAPE_HOSTS in all), filled to 20 to 70 % of their memory (at most SHAPE_VMS VMs)
with one of the VM mixes of MIXES, N (the slots a ``hana_*`` VM requires) 1 or 2, and on some
fleets a trait that the ``hana_*`` VMs require and the others forbid (a quarter of the
hypervisors have it). For each: this planner's cycles until one changes nothing (at most
SHAPE_CYCLES), the plain greedy's plan from nothing (one pass, no limit per hypervisor), and the
lower bound. Printed: the distribution (min, median, p95, max) of plan / greedy and plan / lower
bound in memory and in count, over the fleets where the plan leaves no more slots missing than
the greedy (the others are counted apart), and the worst fleet's parameters.

    python3 bench/bench_failover_shapes.py [--fleets N]
"""
import argparse
import random
import statistics
import time

SHAPE_FLEETS = 200
SHAPE_HOSTS = 600
SHAPE_VMS = 2500
SHAPE_CYCLES = 20
MIXES = {
    # name: (GiB sizes of hana_* VMs, GiB sizes of the others, share of hana_* VMs)
    "small VMs only": ((2, 4, 8), (2, 4, 8), (0.15, 0.30)),
    "2-slot heavy": ((4, 8, 16, 32, 64), (2, 4, 8, 16, 32, 64), (0.5, 0.8)),
    "uniform sizes": ((16,), (16,), (0.15, 0.30)),
    "a few very large": ((128, 256), (2, 4, 8, 16), (0.01, 0.03)),
    "mixed, 2 to 64 GiB": (tuple(range(2, 65)), tuple(range(2, 65)), (0.15, 0.30)),
}


def draw_shape(index):
    """The parameters of fleet ``index``: a dict (see the module docstring)."""
    rng = random.Random(index)
    zones = rng.randint(1, 5)
    per_zone = int(round(4 * 100 ** rng.random()))  # 4 to 400, as many small as large
    per_zone = max(4, min(per_zone, SHAPE_HOSTS // zones))
    return {"index": index, "zones": zones, "hosts_per_zone": per_zone,
            "mix": rng.choice(sorted(MIXES)), "fill": round(rng.uniform(0.2, 0.7), 2),
            "traits": rng.random() < 0.3, "n": rng.choice((1, 2)), "seed": rng.getrandbits(32)}


def make_shape(shape, model):
    """(hypervisors, vms, requirements) of ``shape``."""
    rng = random.Random(shape["seed"])
    hana_sizes, other_sizes, share = MIXES[shape["mix"]]
    share = rng.uniform(*share)
    hosts = []
    for zone in range(shape["zones"]):
        for index in range(shape["hosts_per_zone"]):
            trait = shape["traits"] and index % 4 == 0
            hosts.append(["hv%d-%03d" % (zone, index), "az%d" % zone,
                          rng.choice((128, 192, 256)) * 1024, 64, trait, 0, 0])
    vms, full = [], 0
    for index in range(SHAPE_VMS):
        hana = rng.random() < share
        memory = rng.choice(hana_sizes if hana else other_sizes) * 1024
        cpu = rng.randint(1, 16)
        room = [h for h in hosts if (h[4] == hana or not shape["traits"])
                and h[6] + memory <= h[2] * shape["fill"] and h[5] + cpu <= h[3]]
        if not room:
            full += 1
            if full > 50:
                break
            continue
        host = rng.choice(room)
        host[5] += cpu
        host[6] += memory
        specs = {"trait:CUSTOM_X": "required" if hana else "forbidden"} if shape["traits"] else {}
        vms.append(model.VM("vm-%05d" % index, host[0], host[1],
                            "hana_m" if hana else "web", cpu, memory, specs))
    hypervisors = [model.Hypervisor(name, zone, cpu, memory,
                                    frozenset(["CUSTOM_X"]) if trait else frozenset(), used_cpu,
                                    used_memory)
                   for name, zone, memory, cpu, trait, used_cpu, used_memory in hosts]
    return hypervisors, vms, {"hana_*": shape["n"], "*": 1}


def measure_shape(shape):
    """The settled plan's, the greedy's and the bound's figures on fleet ``shape``."""
    from ansible_collections.resilient.virt.plugins.module_utils._failover import model, reconcile
    from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import (
        FailoverSettings)

    hypervisors, vms, requirements = make_shape(shape, model)
    options = FailoverSettings(requirements=dict(requirements))
    reservations, slowest, slowest_cpu, cycles = [], 0.0, 0.0, 0
    for cycles in range(1, SHAPE_CYCLES + 1):
        began, cpu_began = time.perf_counter(), time.process_time()
        result = reconcile.run_cycle(hypervisors, vms, reservations, options,
                                     now=1.8e9 + 60 * cycles, cycle=cycles - 1)
        slowest = max(slowest, time.perf_counter() - began)
        slowest_cpu = max(slowest_cpu, time.process_time() - cpu_began)
        reservations = result.reservations
        if not result.changed_anything:
            break
    free = FailoverSettings(requirements=dict(requirements), limit_one_new_per_hypervisor=False)
    greedy = reconcile.plain_greedy(hypervisors, vms, free, now=1.8e9).summary
    plan = result.summary
    return dict(shape, vms=len(vms), cycles=cycles, settled=not result.changed_anything,
                slowest=slowest, slowest_cpu=slowest_cpu,
                plan=[plan["reserved_memory_mb"], plan["reservations"], plan["slots_missing"]],
                greedy=[greedy["reserved_memory_mb"], greedy["reservations"],
                        greedy["slots_missing"]],
                bound=[plan["lower_bound_memory_mb"], plan["lower_bound_reservations"]])


def _ratio(a, b):
    return a / b if b else 1.0


def _spread(values):
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(round(0.95 * (len(values) - 1))))]
    return "%.3f | %.3f | %.3f | %.3f" % (values[0], statistics.median(values), p95, values[-1])


def sweep(count=SHAPE_FLEETS):
    rows = [measure_shape(draw_shape(index)) for index in range(count)]
    same = [row for row in rows if row["plan"][2] <= row["greedy"][2]]
    compared = [row for row in rows if row["plan"][2] == row["greedy"][2] and row["greedy"][0]]
    covered = [row for row in compared if not row["plan"][2]]
    lines = ["Shapes: %d fleets (%d to %d VMs, %d to %d hypervisors); the plan leaves no more slots "
             "missing than the greedy on %d, fewer on %d, more on %d; settled on %d; slowest "
             "cycle %.2f s (CPU %.2f s)" % (
                 len(rows), min(r["vms"] for r in rows), max(r["vms"] for r in rows),
                 min(r["zones"] * r["hosts_per_zone"] for r in rows),
                 max(r["zones"] * r["hosts_per_zone"] for r in rows), len(same),
                 sum(1 for r in rows if r["plan"][2] < r["greedy"][2]),
                 len(rows) - len(same), sum(1 for r in rows if r["settled"]),
                 max(r["slowest"] for r in rows), max(r["slowest_cpu"] for r in rows)), "",
             "Against the greedy: the %d fleets where both leave as many slots missing; against "
             "the lower bound: the %d of those where none is missing." % (
                 len(compared), len(covered)), "",
             "| settled plan over | min | median | p95 | max |", "|---|---:|---:|---:|---:|"]
    ratios = {
        "plain greedy, memory": [_ratio(r["plan"][0], r["greedy"][0]) for r in compared],
        "plain greedy, reservations": [_ratio(r["plan"][1], r["greedy"][1]) for r in compared],
        "lower bound, memory": [_ratio(r["plan"][0], r["bound"][0]) for r in covered],
        "lower bound, reservations": [_ratio(r["plan"][1], r["bound"][1]) for r in covered],
    }
    for name, values in ratios.items():
        lines.append("| %s | %s |" % (name, _spread(values)))
    worst = max(compared, key=lambda r: max(_ratio(r["plan"][0], r["greedy"][0]),
                                            _ratio(r["plan"][1], r["greedy"][1])))
    lines += ["", "Worst fleet against the greedy: #%d, %d zones of %d hypervisors, %s, fill %.2f, "
              "traits %s, N %d, %d VMs: plan %d MiB in %d reservations (%d slots missing), greedy "
              "%d MiB in %d (%d missing)" % (
                  worst["index"], worst["zones"], worst["hosts_per_zone"], worst["mix"],
                  worst["fill"], "yes" if worst["traits"] else "no", worst["n"], worst["vms"],
                  *worst["plan"], *worst["greedy"])]
    most = [max(ratios["plain greedy, memory"]), max(ratios["plain greedy, reservations"])]
    lines += ["", "| target | measured | goal | result |", "|---|---:|---|---|"]
    for name, measured in zip(("memory", "reservations"), most):
        lines.append("| shapes: settled plan / plain greedy, %s, worst fleet | %.3f | <= 1.0 | %s |"
                     % (name, measured, "pass" if measured <= 1.0 else "FAIL"))
    return rows, lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--fleets", type=int, default=SHAPE_FLEETS)
    args = parser.parse_args(argv)
    from checkout import use_checkout

    use_checkout()
    print("\n".join(sweep(args.fleets)[1]))


if __name__ == "__main__":
    main()
