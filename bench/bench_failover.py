"""Benchmark of failover planning: how much capacity a plan holds, against the least any valid plan
can hold, on seeded synthetic fleets, and how long a cycle takes.

Fleets of 1,000 VMs / 100 hypervisors, 5,000 / 500 and 10,000 / 1,000 in three zones
(hypervisors of 1 TiB and 192 vCPUs); 15 % of the VMs are HANA VMs (128 or 256 GiB), placed
anywhere; requirements {"hana_*": 2, "*": 1}. And a fleet with traits: 5,000 VMs on 500
hypervisors where the HANA VMs (5 %) run on, and require, the tenth of the hypervisors that have
the CUSTOM_HANA trait (3 TiB).

For each fleet, in one run:
* this planner, cycles run until one changes nothing (at most 12): after the first cycle and
  settled - reservations, reserved memory, coverage, VMs per reservation, seconds per cycle;
* the planner of an earlier commit (``--baseline``, default the last one before packing), the
  same cycles, run from that commit's files in a subprocess (skipped without git history);
  then this planner's cycles from that planner's settled plan, at most 40 (how far
  consolidation and moving towards the plan built from nothing pack a plan that holds too
  much, in how many cycles of at most ``max_changes`` moves, and the most it holds on the way),
  and the same with ``max_changes`` REPACK_CHANGES (a one-time repack);
* a plain greedy - largest VM first, the most shared reservation it may join, else a new one
  sized to the VM, no limit per hypervisor - one pass (the planner's own greedy strategy);
* the lower bounds (``_failover/bounds.py``): the failure bound alone (``failure_memory_mb``),
  and the bound the module reports (the largest of its one-hypervisor, two-hypervisor and
  sharing counts, the last with the pairs no VM may hold), and the seconds it takes;
* where the settled plan holds more than the bound, per VM size; and at the sizes of the VMs
  requiring two slots, how the plan uses the pairs of its reservations (held by a VM, barred,
  unused) and how often the hypervisors' barred pairs coincide, in the plan and at the bound.
And, to show how far one seed's figures hold, this planner's settled plan against the bound on
the same fleets drawn with other seeds (SPREAD_SEEDS; the first two with ``--quick``).

    python3 bench/bench_failover.py [--quick] [--json PATH] [--seed N] [--baseline REV]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ZONES = ("az-a", "az-b", "az-c")
REQUIREMENTS = {"hana_*": 2, "*": 1}
REGULAR = (("m1.small", 2, 4096), ("m1.medium", 4, 8192), ("m1.large", 8, 16384),
           ("m1.xlarge", 16, 32768))
HANA = (("hana_small", 16, 131072), ("hana_large", 32, 262144))
HANA_SHARE = 0.15
HANA_SHARE_WITH_TRAITS = 0.05
FLEETS = ((1000, 100, False), (5000, 500, False), (10000, 1000, False), (5000, 500, True))
QUICK_FLEETS = ((1000, 100, False), (5000, 500, True))
SPREAD_SEEDS = (1, 2, 3, 4, 5)
MAX_CYCLES = 12
PACKING_CYCLES = 40
"""Cycles at most from the baseline's settled plan: consolidation moves at most max_changes
(500) slots a cycle, so a large plan that holds too much takes more cycles than a new one."""
REPACK_CHANGES = 5000
"""``max_changes`` of a one-time repack from the baseline's settled plan: more than a zone of
these fleets holds slots (at most about 4,000), so a zone may move in one cycle."""
TARGET_MEMORY = 1.2
TARGET_COUNT = 1.5
TARGET_CYCLE_S = 1.0
BASELINE = "06290b5"
"""The last commit whose planner did not pack (the figures of "today's planner")."""

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _imports():
    from ansible_collections.resilient.virt.plugins.module_utils._failover import model, reconcile, settings

    return model, reconcile, settings


def make_fleet(vm_count, host_count, seed, traits):
    """(hypervisors, vms) as model objects; see the module docstring."""
    model = _imports()[0]
    rng = random.Random(seed)
    specs = []
    for index in range(host_count):
        hana = traits and index % 10 == 0
        specs.append(("hv%05d" % index, ZONES[index % len(ZONES)], 256 if hana else 192,
                      (3072 if hana else 1024) * 1024, hana))
    hana_hosts = [spec for spec in specs if spec[4]] if traits else specs
    regular_hosts = [spec for spec in specs if not spec[4]]
    used = {spec[0]: [0, 0] for spec in specs}
    vms = []
    for index in range(vm_count):
        hana = rng.random() < (HANA_SHARE_WITH_TRAITS if traits else HANA_SHARE)
        flavor, vcpus, memory = rng.choice(HANA if hana else REGULAR)
        name, zone = rng.choice(hana_hosts if hana else regular_hosts)[:2]
        used[name][0] += vcpus
        used[name][1] += memory
        vms.append(model.VM(
            uuid="%08x-0000-4000-8000-%012d" % (rng.getrandbits(32), index), host=name, az=zone,
            flavor=flavor, vcpus=vcpus, memory_mb=memory,
            extra_specs={"trait:CUSTOM_HANA": "required"} if hana and traits else {}))
    hypervisors = [model.Hypervisor(name, zone, cpu, memory, frozenset(["CUSTOM_HANA"]) if hana
                                    else frozenset(), used[name][0], used[name][1])
                   for name, zone, cpu, memory, hana in specs]
    return hypervisors, vms


def _figures(result, seconds, cpu_seconds=None):
    summary = result.summary
    allocations = sum(len(r.allocations) for r in result.reservations)
    return {"reservations": summary["reservations"],
            "reserved_memory_mb": summary["reserved_memory_mb"],
            "coverage_ratio": summary["coverage_ratio"],
            "vms_per_reservation": round(allocations / max(1, summary["reservations"]), 2),
            "seconds": round(seconds, 3),
            "cpu_seconds": round(seconds if cpu_seconds is None else cpu_seconds, 3)}


def cycles(vm_count, host_count, seed, traits, start=(), keep_plan=False, most=MAX_CYCLES,
           max_changes=None):
    """This tree's planner, cycle after cycle until one changes nothing (``most`` at most):
    first and settled figures. Each cycle gets the target the one before kept, through JSON as
    the state store keeps it (its time counted in the cycle's). ``start``: the reservations (as
    dicts) of the first cycle; with ``keep_plan`` the settled reservations are returned too (as
    dicts, under "plan");
    ``max_changes``: that setting, when not the default."""
    model, reconcile, settings = _imports()
    hypervisors, vms = make_fleet(vm_count, host_count, seed, traits)
    options = settings.FailoverSettings(requirements=dict(REQUIREMENTS))
    if max_changes is not None:
        options.max_changes = max_changes
    reservations = [model.Reservation.from_dict(data) for data in start]
    first, slowest, slowest_cpu, count, peak, stored = None, 0.0, 0.0, 0, 0, None
    for count in range(1, most + 1):
        began, cpu_began = time.perf_counter(), time.process_time()
        kept = {} if stored is None else {"stored": json.loads(stored)}
        result = reconcile.run_cycle(hypervisors, vms, reservations, options,
                                     now=1.8e9 + 60 * count, cycle=count - 1, **kept)
        target = getattr(result, "target", None)  # kept as the state store keeps it
        stored = None if target is None else json.dumps(target)
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        slowest, slowest_cpu = max(slowest, seconds), max(slowest_cpu, cpu)
        first = first or _figures(result, seconds, cpu)
        peak = max(peak, result.summary["reserved_memory_mb"])
        reservations = result.reservations
        if not result.changed_anything:
            break
    settled = _figures(result, slowest, slowest_cpu)
    if stored is not None and not result.changed_anything:  # the next run, nothing changed
        cpu_began = time.process_time()
        reconcile.run_cycle(hypervisors, vms, reservations, options, now=1.8e9 + 60 * (count + 1),
                            cycle=count, stored=json.loads(stored))
        settled["next_cpu_seconds"] = round(time.process_time() - cpu_began, 3)
    settled["cycles"] = count
    settled["settled"] = not result.changed_anything
    settled["peak_memory_mb"] = peak
    out = {"first": first, "settled": settled}
    if keep_plan:
        out["plan"] = [res.to_dict() for res in reservations]
    return out


def plain_greedy(vm_count, host_count, seed, traits):
    """The plain greedy's plan from nothing, one pass, without the limit per hypervisor."""
    model, reconcile, settings = _imports()
    hypervisors, vms = make_fleet(vm_count, host_count, seed, traits)
    options = settings.FailoverSettings(requirements=dict(REQUIREMENTS),
                                        limit_one_new_per_hypervisor=False)
    began = time.perf_counter()
    result = reconcile.plain_greedy(hypervisors, vms, options, now=1.8e9)
    return _figures(result, time.perf_counter() - began)


def bounds(vms):
    """The lower bounds of ``vms`` (a fleet's model VMs), the seconds computing them took and
    the bound's counts per zone (LowerBound.counts)."""
    from ansible_collections.resilient.virt.plugins.module_utils._failover.bounds import lower_bound

    began = time.perf_counter()
    bound = lower_bound(vms, REQUIREMENTS, lambda vm: vm.az)
    return dict(bound.to_dict(), seconds=time.perf_counter() - began, counts=bound.counts)


def above_bound(counts, plan):
    """Where ``plan`` (reservations as dicts) holds more than the lower bound whose ``counts``
    (LowerBound.counts) are given: per VM size, largest first, summed over the zones, [size MiB,
    the plan's reservations of that size up to the next larger VM size of the zone, the bound's
    (how many more reservations of at least that size it counts than of the next larger), the
    plan's memory there less the bound's]."""
    levels = {}
    for zone, sizes in counts.items():
        before = 0
        for size, count in sizes:
            level = levels.setdefault(size, [size, 0, 0, 0])
            level[2] += count - before
            level[3] -= (count - before) * size
            before = count
        for res in plan:
            if res["az"] == zone:
                memory = res["resources"]["memory_mb"]
                size = next((size for size, _count in sizes if size <= memory), sizes[-1][0])
                levels[size][1] += 1
                levels[size][3] += memory
    return [levels[size] for size in sorted(levels, reverse=True)]


def pairs_at(vms, counts, plan):
    """How the settled ``plan`` (reservations as dicts) uses the pairs of its reservations at
    the sizes of the VMs requiring two or more slots, against the bound's ``counts``
    (LowerBound.counts): per such size s, largest first, summed over the zones, [s, the plan's
    reservations of at least s, the bound's count, the pairs those give (C(r, 2) per zone; the
    plan's, the bound's count's), the pairs VMs of at least s hold, the pairs barred in the
    plan, the pairs barred counted once per hypervisor barring them].

    As in _failover/bounds.py: T_H is the reservations that hypervisor H's VMs of at least s
    hold; every pair inside T_H but each such VM's own is barred (no VM may hold it), and the
    sum of those over the hypervisors is the same for every plan that covers the VMs. ``vms``:
    the fleet's model VMs."""
    import itertools

    from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import required_count

    required = {vm.uuid: required_count(vm.flavor, REQUIREMENTS) for vm in vms}
    memory = {vm.uuid: vm.memory_mb for vm in vms}
    host = {vm.uuid: vm.host for vm in vms}
    sizes = sorted({vm.memory_mb for vm in vms if required[vm.uuid] >= 2}, reverse=True)
    rows = []
    for size in sizes:
        row = [size, 0, 0, 0, 0, 0, 0, 0]
        for zone, steps in counts.items():
            bound_count = max((count for step, count in steps if step >= size), default=0)
            held_by = {}  # hypervisor -> reservations its VMs of at least size hold
            own = {}  # VM -> its reservations of at least size
            reservations = 0
            for res in plan:
                if res["az"] != zone or res["resources"]["memory_mb"] < size:
                    continue
                reservations += 1
                for uuid in res["allocations"]:
                    if memory.get(uuid, 0) >= size and required.get(uuid, 0):
                        held_by.setdefault(host[uuid], set()).add(res["name"])
                        own.setdefault(uuid, set()).add(res["name"])
            held = {frozenset(pair) for names in own.values()
                    for pair in itertools.combinations(sorted(names), 2)}
            barred, repeated = set(), 0
            for names in held_by.values():
                for pair in itertools.combinations(sorted(names), 2):
                    if frozenset(pair) not in held:
                        barred.add(frozenset(pair))
                        repeated += 1
            row[1] += reservations
            row[2] += bound_count
            row[3] += reservations * (reservations - 1) // 2
            row[4] += bound_count * (bound_count - 1) // 2
            row[5] += len(held)
            row[6] += len(barred)
            row[7] += repeated
        rows.append(row)
    return rows


def baseline(revision, fleets, seed):
    """{fleet key: cycles figures} of the planner at ``revision``, or (None, why not)."""
    with tempfile.TemporaryDirectory() as tree:
        target = os.path.join(tree, "ansible_collections", "resilient", "virt")
        os.makedirs(target)
        try:
            archive = subprocess.run(["git", "-C", ROOT, "archive", revision, "plugins/module_utils"],
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", target], input=archive, check=True)
        except (OSError, subprocess.CalledProcessError) as err:
            return None, "no git history for %s here (%s)" % (revision, err)
        out = os.path.join(tree, "out.json")
        command = [sys.executable, os.path.abspath(__file__), "--worker", tree, "--seed", str(seed),
                   "--json", out, "--fleets", json.dumps(fleets)]
        subprocess.run(command, check=True)
        with open(out) as handle:
            return json.load(handle), None


def _key(fleet):
    return "%d/%d%s" % (fleet[0], fleet[1], " traits" if fleet[2] else "")


def spread(fleets, seeds):
    """Per fleet, (seed, memory / bound, count / bound, coverage) of the settled plan per seed
    of ``seeds``."""
    rows = []
    for fleet in fleets:
        settled = []
        for seed in seeds:
            figures = cycles(*fleet[:2], seed, fleet[2])["settled"]
            bound = bounds(make_fleet(*fleet[:2], seed, fleet[2])[1])
            settled.append((seed, _ratio(figures, bound["memory_mb"], "reserved_memory_mb"),
                            _ratio(figures, bound["reservations"], "reservations"),
                            figures["coverage_ratio"]))
        rows.append({"fleet": _key(fleet), "seeds": settled})
    return rows


def measure(fleets, seed, revision, spread_seeds=SPREAD_SEEDS):
    rows = []
    for fleet in fleets:
        vms = make_fleet(*fleet[:2], seed, fleet[2])[1]
        row = {"fleet": _key(fleet), "vms": fleet[0], "hypervisors": fleet[1],
               "traits": fleet[2], "bound": bounds(vms),
               "ours": cycles(*fleet[:2], seed, fleet[2], keep_plan=True),
               "greedy": plain_greedy(*fleet[:2], seed, fleet[2])}
        plan = row["ours"].pop("plan")
        row["above_bound"] = above_bound(row["bound"]["counts"], plan)
        row["pairs"] = pairs_at(vms, row["bound"]["counts"], plan)
        rows.append(row)
    today, why = baseline(revision, [list(f) for f in fleets], seed)
    for row, fleet in zip(rows, fleets):
        row["today"] = today.get(row["fleet"]) if today else None
        plan = row["today"].pop("plan") if row["today"] else None
        row["packed"] = cycles(*fleet[:2], seed, fleet[2], start=plan,
                               most=PACKING_CYCLES) if plan else None
        row["repacked"] = cycles(*fleet[:2], seed, fleet[2], start=plan, most=PACKING_CYCLES,
                                 max_changes=REPACK_CHANGES) if plan else None
    others = [other for other in spread_seeds if other != seed]
    result = {"requirements": REQUIREMENTS, "seed": seed, "baseline": revision,
              "baseline_missing": why, "rows": rows, "spread_seeds": others,
              "spread": spread(fleets, others)}
    result["targets"] = targets(rows, result["spread"], others)
    return result


def targets(rows, spread_rows, spread_seeds):
    """The packing targets, judged on the worst settled plan, and the cycle time; then the
    packing targets on the worst fleet and seed of ``spread_seeds``."""
    settled = [(row["ours"]["settled"]["reserved_memory_mb"] / row["bound"]["memory_mb"],
                row["ours"]["settled"]["reservations"] / row["bound"]["reservations"],
                row["ours"]["settled"]["coverage_ratio"]) for row in rows]
    largest = max(rows, key=lambda row: row["vms"])
    seconds = largest["ours"]["settled"]["seconds"]
    found = _packing_targets("worst fleet", settled)
    cpu = largest["ours"]["settled"].get("cpu_seconds", seconds)
    found.append({"name": "slowest cycle, %d VMs (s)" % largest["vms"], "measured": seconds,
                  "target": "< %g" % TARGET_CYCLE_S, "passed": seconds < TARGET_CYCLE_S})
    found.append({"name": "slowest cycle, %d VMs, CPU (s; wall on an idle machine)"
                  % largest["vms"], "measured": cpu, "target": "< %g" % TARGET_CYCLE_S,
                  "passed": cpu < TARGET_CYCLE_S})
    others = [entry[1:] for row in spread_rows for entry in row["seeds"]]
    if others:
        found += _packing_targets("worst fleet and seed of seeds %s"
                                  % ", ".join(map(str, spread_seeds)), others)
    return found


def _packing_targets(which, plans):
    """Memory, count and coverage targets on the worst of ``plans``, (memory / bound,
    count / bound, coverage) each."""
    memory = max(plan[0] for plan in plans)
    count = max(plan[1] for plan in plans)
    covered = min(plan[2] for plan in plans)
    return [
        {"name": "settled plan, reserved memory / lower bound, " + which,
         "measured": round(memory, 2), "target": "<= %g" % TARGET_MEMORY,
         "passed": memory <= TARGET_MEMORY},
        {"name": "settled plan, reservations / lower bound, " + which,
         "measured": round(count, 2), "target": "<= %g" % TARGET_COUNT,
         "passed": count <= TARGET_COUNT},
        {"name": "settled plan, coverage, " + which, "measured": covered, "target": "1.0",
         "passed": covered == 1.0},
    ]


def _gib(memory_mb, bound):
    return "%d (%.2f)" % (memory_mb // 1024, memory_mb / bound["memory_mb"] if bound["memory_mb"]
                          else 0.0)


def _ratio(figures, bound, key):
    return figures[key] / bound if bound else 0.0


def table(result):
    lines = ["| fleet | planner | reservations | reserved GiB | x bound (memory / count) | "
             "x failure bound | coverage | VMs per reservation | cycles | s per cycle, slowest "
             "(wall / CPU) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in result["rows"]:
        bound = row["bound"]
        lines.append("| %s | lower bound (failures alone / reported), s to compute | %d / %d | %d / %d "
                     "| | | | | | %.3f |"
                     % (row["fleet"], bound["failure_reservations"], bound["reservations"],
                        bound["failure_memory_mb"] // 1024, bound["memory_mb"] // 1024,
                        bound["seconds"]))
        shown = [("this planner, 1st cycle", row["ours"]["first"], ""),
                 ("this planner, settled", row["ours"]["settled"], row["ours"]["settled"]["cycles"]),
                 ("plain greedy (one pass)", row["greedy"], 1)]
        if row["today"]:
            shown.append(("planner of %s, settled" % result["baseline"], row["today"]["settled"],
                          row["today"]["settled"]["cycles"]))
            packed = row["packed"]["settled"]
            shown.append(("this planner from that settled plan, settled%s"
                          % ("" if packed["settled"] else " (not yet)"), packed, packed["cycles"]))
            repacked = row["repacked"]["settled"]
            shown.append(("the same with max_changes %d, settled%s" % (
                REPACK_CHANGES, "" if repacked["settled"] else " (not yet)"), repacked,
                repacked["cycles"]))
        for label, figures, count in shown:
            lines.append("| %s | %s | %d | %d | %.2f / %.2f | %.2f | %.4f | %.2f | %s | %.2f / %.2f |" % (
                row["fleet"], label, figures["reservations"], figures["reserved_memory_mb"] // 1024,
                _ratio(figures, bound["memory_mb"], "reserved_memory_mb"),
                _ratio(figures, bound["reservations"], "reservations"),
                _ratio(figures, bound["failure_memory_mb"], "reserved_memory_mb"),
                figures["coverage_ratio"], figures["vms_per_reservation"], count,
                figures["seconds"], figures.get("cpu_seconds", figures["seconds"])))
    sizes = sorted({level[0] for row in result["rows"] for level in row["above_bound"]},
                   reverse=True)
    lines += ["", "Where this planner's settled plan holds more than the lower bound: per VM size, "
              "the plan's reservations of that size (up to the next larger VM size) / the bound's "
              "(how many more reservations of at least that size it counts than of the next "
              "larger), and the plan's memory there less the bound's, GiB (all zones):", "",
              "| fleet | %s | above the bound, GiB |" % " | ".join(
                  "%d GiB" % (size // 1024) for size in sizes),
              "|---|%s---:|" % ("---:|" * len(sizes))]
    for row in result["rows"]:
        cells = {level[0]: "%d / %d (%+d)" % (level[1], level[2], level[3] // 1024)
                 for level in row["above_bound"]}
        lines.append("| %s | %s | %d |" % (
            row["fleet"], " | ".join(cells.get(size, "") for size in sizes),
            sum(level[3] for level in row["above_bound"]) // 1024))
    lines += ["", "Pairs of reservations at the sizes of the VMs requiring two slots (all zones): no two "
              "VMs hold the same pair, and no VM may hold a pair that two VMs of one hypervisor "
              "hold (barred). The reservations of at least that size, the plan's / the bound's; "
              "the pairs they give; the pairs the VMs of at least that size hold; the pairs barred "
              "in the plan, and counted once per hypervisor barring them (the same in every plan "
              "that covers the VMs); how many hypervisors bar a barred pair on average, in the "
              "plan / at the bound's count if all its pairs not held were barred:", "",
              "| fleet | VM size | reservations | pairs | held | unused | barred | barred, "
              "per hypervisor | hypervisors per barred pair |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in result["rows"]:
        for size, ours, bound, pairs, bound_pairs, held, barred, repeated in row["pairs"]:
            lines.append("| %s | %d GiB | %d / %d | %d / %d | %d | %d | %d | %d | %.2f / %.2f |" % (
                row["fleet"], size // 1024, ours, bound, pairs, bound_pairs, held,
                pairs - held - barred, barred, repeated, repeated / max(1, barred),
                repeated / max(1, bound_pairs - held)))
    moved = [row for row in result["rows"] if row["today"]]
    if moved:
        lines += ["", "From the settled plan of the planner of %s, this planner's cycles: reserved "
                  "memory at the start, the most after any cycle on the way (a zone moving "
                  "towards the plan built from nothing holds both meanwhile), and settled, in GiB "
                  "(x the lower bound):" % result["baseline"], "",
                  "| fleet | max_changes | start | most on the way | settled | cycles |",
                  "|---|---:|---:|---:|---:|---:|"]
        for row in moved:
            start = row["today"]["settled"]["reserved_memory_mb"]
            for changes, packed in ((_imports()[2].DEFAULT_MAX_CHANGES, row["packed"]),
                                    (REPACK_CHANGES, row["repacked"])):
                figures = packed["settled"]
                lines.append("| %s | %d | %s | %s | %s | %d%s |" % (
                    row["fleet"], changes, _gib(start, row["bound"]),
                    _gib(figures["peak_memory_mb"], row["bound"]),
                    _gib(figures["reserved_memory_mb"], row["bound"]), figures["cycles"],
                    "" if figures["settled"] else " (not yet)"))
    if result["spread_seeds"]:
        seeds = ", ".join(map(str, result["spread_seeds"]))
        lines += ["", "This planner's settled plan on the same fleets drawn with seeds %s "
                  "(the table above: seed %d):" % (seeds, result["seed"]), "",
                  "| fleet | x bound in memory, by seed | x bound in count, by seed | coverage, worst |",
                  "|---|---|---|---:|"]
        for row in result["spread"]:
            lines.append("| %s | %s | %s | %.4f |" % (
                row["fleet"], " ".join("%.2f" % entry[1] for entry in row["seeds"]),
                " ".join("%.2f" % entry[2] for entry in row["seeds"]),
                min(entry[3] for entry in row["seeds"])))
    lines += ["", "This planner from nothing, the most reserved memory after any cycle on the way "
              "(interim reservations beside the target's), GiB (x the lower bound): %s" % "; ".join(
                  "%s %s" % (row["fleet"], _gib(row["ours"]["settled"]["peak_memory_mb"],
                                                row["bound"])) for row in result["rows"])]
    plain = sorted((row for row in result["rows"] if not row["traits"]), key=lambda r: r["vms"])
    if plain:
        cpu = [(row["vms"], row["ours"]["settled"]["cpu_seconds"]) for row in plain]
        lines += ["", "Slowest cycle of this planner, CPU seconds, by fleet size: %s; %d to %d VMs "
                  "(x%.0f): x%.2f" % (", ".join("%d VMs %.2f" % pair for pair in cpu), cpu[0][0],
                                      cpu[-1][0], cpu[-1][0] / cpu[0][0],
                                      cpu[-1][1] / max(cpu[0][1], 1e-9))]
        again = [(row["vms"], row["ours"]["settled"]["next_cpu_seconds"]) for row in plain
                 if "next_cpu_seconds" in row["ours"]["settled"]]
        if again:
            lines += ["", "A further cycle on the settled plan, the fleet unchanged (the next "
                      "run, reusing the stored target), CPU seconds: %s"
                      % ", ".join("%d VMs %.2f" % pair for pair in again)]
    lines += ["", "| target | measured | goal | result |", "|---|---:|---|---|"]
    for row in result["targets"]:
        lines.append("| %s | %s | %s | %s |" % (row["name"], row["measured"], row["target"],
                                                "pass" if row["passed"] else "FAIL"))
    if result["baseline_missing"]:
        missing = (result["baseline"], result["baseline_missing"])
        lines.append("\nPlanner of %s not measured: %s." % missing)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--quick", action="store_true", help="small fleets only")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--baseline", default=BASELINE, metavar="REV",
                        help="commit whose planner is measured beside this one")
    parser.add_argument("--worker", metavar="TREE", help=argparse.SUPPRESS)
    parser.add_argument("--fleets", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:  # a planner from another commit's files: its cycles only
        sys.path.insert(0, args.worker)
        out = {_key(fleet): cycles(*fleet[:2], args.seed, fleet[2], keep_plan=True)
               for fleet in json.loads(args.fleets)}
        with open(args.json, "w") as handle:
            json.dump(out, handle)
        return
    from checkout import use_checkout

    use_checkout()
    result = measure(QUICK_FLEETS if args.quick else FLEETS, args.seed, args.baseline,
                     SPREAD_SEEDS[:2] if args.quick else SPREAD_SEEDS)
    print(table(result))
    from bench_failover_shapes import SHAPE_FLEETS, sweep

    print("\n" + "\n".join(sweep(20 if args.quick else SHAPE_FLEETS)[1]))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
