"""Break the failover planner, the fleet reconciler and the backup records on purpose, one way
at a time, and show that the tests notice.

Each mutant is a small edit of the code: drop a VM from an evacuation, let a slot land on the
VM's own host, ignore a zone, a trait or the free capacity, retry a fleet's VM before its
backoff, prune a VM without the owner's marker, reopen a final backup phase, give up a status
write early... For each one the tree is copied, the edit applied to the copy and the unit tests
of the edited package run there (``tests/unit/module_utils/<package>``), as many mutants at once
as the machine has CPUs; a mutant the tests do not fail on is a hole in the proof, and the run
exits 1. An edit whose original text is no longer in the code fails too (the code moved: update
the mutant).

To be quick, the test that caught a mutant last time (``killers.json``) runs first; only when it
does not fail do the package's unit tests run, so a mutant is never let pass on that one test.
``--write-killers`` records the tests that caught the mutants of this run. The unmutated copy
then runs the tests that caught a mutant (all of a package's, for a mutant that failed its
package before any test ran), and must pass them for any outcome to count: a test counts as
catching a mutant only if it passes without it. The packages' whole unit tests run on the
unmutated tree in ``make suite`` anyway; running them again here cost the most CPU of the run.

    python3 tests/mutation/run.py [--only NAME] [--write-killers]
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import first_failed  # this directory: the script's own

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAILOVER = "plugins/module_utils/_failover/"
FLEET = "plugins/module_utils/_fleet/"
BACKUP = "plugins/module_utils/_backup/"

# name: (file, original text, mutated text, what it breaks)
MUTANTS = {
    "evacuation-drops-a-vm": (
        FAILOVER + "evacuation.py",
        "    wanted = set(vm.uuid for vm in affected)\n",
        "    affected = affected[:-1]\n    wanted = set(vm.uuid for vm in affected)\n",
        "an evacuation silently leaves out one affected VM"),
    "evacuation-uses-failed-hosts": (
        FAILOVER + "evacuation.py",
        "if res.host not in failed and res.allocations[vm.uuid] == vm.host",
        "if res.allocations[vm.uuid] == vm.host",
        "a VM is moved onto a reservation on another failed host"),
    "rule-1-own-host": (
        FAILOVER + "constraints.py",
        "        if own is None or host == own or host in self._slot_hosts[uuid]:",
        "        if own is None or host in self._slot_hosts[uuid]:",
        "a VM may hold a slot on its own host (and a picker may put one there)"),
    "rule-2-distinct-slot-hosts": (
        FAILOVER + "constraints.py",
        "        if own is None or host == own or host in self._slot_hosts[uuid]:",
        "        if own is None or host == own:",
        "a VM may hold two slots on one host"),
    "rule-4-sharer-on-slot-host": (
        FAILOVER + "constraints.py",
        "        return member_hosts.keys().isdisjoint(self._slot_hosts[uuid])\n",
        "        return True\n",
        "a VM may share a slot with a VM that runs where another of its slots is"),
    "rule-5-sharers-overlap": (
        FAILOVER + "constraints.py",
        "            if not member_hosts.keys().isdisjoint(self._member_hosts[held]):\n"
        "                return False\n",
        "            continue\n",
        "two sharers of a VM may run on one host"),
    "crowded-reservation-ignored": (
        FAILOVER + "constraints.py",
        "if self._crowded[name] or None in member_hosts",
        "if None in member_hosts",
        "a VM passes the rules while two other members of its reservation run on one host"),
    "greedy-stops-at-once": (
        FAILOVER + "packing.py",
        "            if within(state.stop, state.held):\n",
        "            if True:\n",
        "the plain greedy gives up before it holds what the packing does, which may hold more"),
    "greedy-joins-least-shared": (
        FAILOVER + "packing.py",
        "        name = next((name for name in index.shared()\n",
        "        name = next((name for name in reversed(list(index.shared()))\n",
        "the plain greedy joins the least shared reservation, not the most shared"),
    "two-slot-vms-kept-apart": (
        FAILOVER + "joining.py",
        "    kinds = (True, False) if multi else (False, True)\n",
        "    kinds = (True,) if multi else (False, True)\n",
        "a two-slot VM opens a reservation where a one-slot VM's would take it as it is"),
    "pair-search-off": (
        FAILOVER + "packing.py",
        "    if missing == 2 and state.strategy in (PACK, FOLLOW):\n",
        "    if False:\n",
        "a VM missing two slots opens a new reservation where two existing ones would take it"),
    "pair-closes-triangles": (
        FAILOVER + "joining.py",
        "    return not state.graph.reservations_of(sole).isdisjoint(",
        "    return False and not state.graph.reservations_of(sole).isdisjoint(",
        "the pair search closes triangles the reference system leaves open"),
    "zone-ignored": (
        FAILOVER + "slots.py",
        "        for name, free_cpu, free_mem in self._rooms_for(vm, az, needs):",
        "        for name, free_cpu, free_mem in [room for zone in self._zones\n"
        "                                         for room in self._rooms_for(vm, zone, needs)]:",
        "a new reservation may go to another availability zone"),
    "zone-ignored-by-greedy": (
        FAILOVER + "slots.py",
        "        for name, _free_cpu, free_mem in self._rooms_for(vm, az, needs):",
        "        for name, _free_cpu, free_mem in [room for zone in self._zones\n"
        "                                          for room in self._rooms_for(vm, zone, needs)]:",
        "the plain greedy may open a reservation in another availability zone"),
    "traits-ignored": (
        FAILOVER + "constraints.py",
        "    return needs.required <= host_traits and not (needs.forbidden & host_traits)",
        "    return True",
        "a VM's required and forbidden traits are not checked"),
    "consolidation-ignores-rules": (
        FAILOVER + "joining.py",
        "             and may_share(state, name) and may_join(state, vm, name, needs, free_of_traits))\n",
        "             and may_share(state, name) and True)\n",
        "packing joins or moves a VM into a reservation it may not join"),
    "growth-ignores-host-room": (
        FAILOVER + "joining.py",
        "    return more_cpu <= free_cpu and more_mem <= free_mem and state.graph.can_join(vm.uuid, name)\n",
        "    return state.graph.can_join(vm.uuid, name)\n",
        "a reservation grows beyond the free room of its hypervisor"),
    "shrink-below-a-member": (
        FAILOVER + "consolidation.py",
        "        mem = max(state.vms[uuid].memory_mb or 0 for uuid in res.allocations)\n",
        "        mem = min(state.vms[uuid].memory_mb or 0 for uuid in res.allocations)\n",
        "a reservation shrinks below the largest VM it serves"),
    "bound-ignores-sharing": (
        FAILOVER + "bounds.py",
        "        sharing = max(sharing, reservations_for_pairs(pairs + needed_barred))\n",
        "        sharing = 0\n",
        "the lower bound forgets that two-slot VMs never share both slots"),
    "bound-pairs-rounded-down": (
        FAILOVER + "bounds.py",
        "    return most if most * (most - 1) // 2 >= pairs else most + 1\n",
        "    return most\n",
        "the lower bound takes one reservation too few when the pairs need more than a count gives"),
    "search-a-slot-short": (
        FAILOVER + "joining.py",
        "        missing = min(missing, hosts_left(state, vm, former, needs, az))\n",
        "        missing = min(missing, hosts_left(state, vm, former, needs, az) - 1)\n",
        "a VM requiring three or more slots is searched for one fewer than its zone can give"),
    "one-slot-vms-kept-apart": (
        FAILOVER + "joining.py",
        "    kinds = (True, False) if multi else (False, True)\n",
        "    kinds = (True, False) if multi else (False,)\n",
        "a one-slot VM opens a reservation where one serving a two-slot VM would take it"),
    "one-slot-vms-join-two-slot-first": (
        FAILOVER + "joining.py",
        "    kinds = (True, False) if multi else (False, True)\n",
        "    kinds = (True, False) if multi else (True, False)\n",
        "a one-slot VM takes a two-slot VM's reservation before its own kind's"),
    "one-order-only": (
        FAILOVER + "reconcile.py",
        "    if reservations or planner.result.processed < 2:\n",
        "    if True:\n",
        "a plan built from nothing is packed in one order, though another may hold less"),
    "pairs-closed-ignored": (
        FAILOVER + "slots.py",
        "            pairs.append((closes1 + closes2, -len(at1) - len(at2), i, j))\n",
        "            pairs.append((0, -len(at1) - len(at2), i, j))\n",
        "a VM missing two slots takes the most shared pair, closing pairs later VMs could take"),
    "first-slot-closes-pairs": (
        FAILOVER + "joining.py",
        "        first.sort(key=lambda name: state.graph.pairs_closed(vm.host, name))\n",
        "        pass\n",
        "a VM short of a pair takes the most shared reservation, closing pairs later VMs could take"),
    "closed-pair-recounted": (
        FAILOVER + "constraints.py",
        "            if other != name and self._res_host[other] not in at and \\\n",
        "            if other != name and \\\n",
        "a pair a host closed already counts again as closing"),
    "limit-holds-no-vm-back": (
        FAILOVER + "packing.py",
        "            waiting[pool] = need.vm.uuid\n",
        "            pass\n",
        "under the one-new-per-hypervisor limit, smaller VMs take the reservations built for a "
        "larger VM the limit left short"),
    "one-slot-vms-wait-too": (
        FAILOVER + "packing.py",
        "        if pool in waiting and state.multi[need.vm.uuid]:\n",
        "        if pool in waiting:\n",
        "one-slot VMs wait behind a VM the limit left short, losing a cycle of coverage"),
    "any-shortfall-holds-vms-back": (
        FAILOVER + "packing.py",
        "        and picker.closed_to(vm, pool[0], pool[1])\n",
        "        and True\n",
        "a VM short for want of room makes the VMs after it wait, cycle after cycle"),
    "plan-never-grows-along-the-target": (
        FAILOVER + "towards_target.py",
        "    if state.strategy != FOLLOW or state.target is None or not state.may_follow:\n",
        "    if True:\n",
        "a plan the limit leaves short is packed cycle by cycle and settles holding more than the "
        "plan built without the limit"),
    "target-slots-ignore-the-limit": (
        FAILOVER + "packing.py",
        "        if picker.is_closed(res.host) or (not state.for_now and state.opening.get(\n"
        "                res.host, res).name != res.name):\n",
        "        if False:\n",
        "growing along the target opens two reservations on one hypervisor in one cycle"),
    "nothing-covered-for-now": (
        FAILOVER + "packing.py",
        "            not state.for_now:\n",
        "            True:\n",
        "growing along the target, VMs whose target slots cannot open this cycle wait uncovered "
        "instead of taking interim reservations"),
    "interim-vms-never-move": (
        FAILOVER + "packing.py",
        "    if move_to_target(state, vm, az, interim, slots, realized, _Opened(picker)):\n",
        "    if False:\n",
        "VMs covered for now keep their interim reservations and the plan never reaches the "
        "target"),
    "bound-ignores-barred-pairs": (
        FAILOVER + "bounds.py",
        "            ranked, needed_barred = barred.top, _barred_pairs(barred, vms)\n",
        "            ranked, needed_barred = barred.top, 0\n",
        "the lower bound forgets the pairs a host's VMs bar from every VM"),
    "bound-barred-overlap-ignored": (
        FAILOVER + "bounds.py",
        "        overlap = sum(min(own, other) * (min(own, other) - 1) // 2 for other in counted)\n",
        "        overlap = 0\n",
        "the lower bound counts twice the pairs two hosts both bar"),
    "capacity-ignored": (
        FAILOVER + "slots.py",
        "            if name == vm.host or free_cpu < cpu or free_mem < memory:\n",
        "            if name == vm.host:\n",
        "a new reservation may overcommit its hypervisor"),
    "fit-ignored": (
        FAILOVER + "model.py",
        "    if vm.memory_mb is not None:\n        held = resources.get(\"memory_mb\")",
        "    if False:\n        held = resources.get(\"memory_mb\")",
        "a VM may join a reservation smaller than its memory"),
    "lowest-requirement-wins": (
        FAILOVER + "requirements.py",
        "        if count > best and _compile(pattern).match(flavor):",
        "        if (best == 0 or count < best) and _compile(pattern).match(flavor):",
        "the lowest, not the highest, matching requirement decides a flavor's slots"),
    "fleet-reads-unchanged-vms": (
        FLEET + "status.py",
        'return Decision(VERIFY, 1, "full run") if full else Decision(UNCHANGED, None, "in sync")',
        'return Decision(VERIFY, 1, "full run")',
        "an incremental run reads (and may change) VMs whose spec and status did not change"),
    "fleet-backoff-ignored": (
        FLEET + "status.py",
        "    if retry_at is not None and now < retry_at:\n",
        "    if False:\n",
        "a failed VM is retried before its backoff has passed"),
    "fleet-terminal-retried": (
        FLEET + "status.py",
        "    terminal = err.type in TERMINAL_ERRORS\n",
        "    terminal = False\n",
        "a VM that only a spec change can fix is retried with the same spec"),
    "fleet-max-attempts-ignored": (
        FLEET + "status.py",
        "    if backoff is not None and attempts >= backoff.max_attempts:\n",
        "    if False:\n",
        "a VM is retried forever, past max_attempts"),
    "fleet-prune-ignores-owner": (
        FLEET + "prune.py",
        "            if not owned(vm, owner):\n                continue\n",
        "",
        "prune deletes VMs without this owner's marker"),
    "fleet-prune-limit-ignored": (
        FLEET + "prune.py",
        "    if len(prune) <= allowed:\n",
        "    if True:\n",
        "prune deletes more VMs than max_prune allows"),
    "fleet-status-not-written": (
        FLEET + "fleet_run.py",
        "                self._write(done)\n",
        "                pass\n",
        "the statuses of a round are not written"),
    "fleet-no-second-pass": (
        FLEET + "fleet_run.py",
        "            self._rounds(_interleave(again), executor, outcomes)\n",
        "",
        "VMs refused while a breaker's probe was in flight are left deferred"),
    "backup-final-phase-reopened": (
        BACKUP + "phases.py",
        "    COMPLETED: (),\n",
        "    COMPLETED: (IN_PROGRESS,),\n",
        "a Completed record can be moved back to InProgress"),
    "backup-no-last-attempt-at-deadline": (
        BACKUP + "status_write.py",
        "    deadline = Deadline.after(resource_timeout if critical else None, clock)\n",
        "    deadline = Deadline.after((resource_timeout - 5) if critical else None, clock)\n",
        "a critical status write gives up before resource_timeout"),
    "backup-store-failure-not-retried": (
        BACKUP + "status_write.py",
        "        except StoreUnavailable as err:\n            if not critical:",
        "        except StoreUnavailable as err:\n            if True:",
        "a critical status write is lost at the first store failure"),
    "backup-lease-ignored": (
        BACKUP + "records.py",
        "        if held and not override:\n",
        "        if False:\n",
        "another run writes a record while its owner's lease runs"),
    "backup-retention-breaks-chains": (
        BACKUP + "operations.py",
        "        while parent in by_name and parent not in keep:\n",
        "        while False:\n",
        "keep_last deletes the full backup a kept incremental one builds on"),
}


def _copy_tree(target):
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        source = os.path.join(ROOT, name)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(target, name)), exist_ok=True)
            shutil.copy2(source, os.path.join(target, name))


KILLERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "killers.json")


def _read_killers():
    try:
        with open(KILLERS) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {}


def _tests_of(path):
    """The unit tests of the package of ``path`` (plugins/module_utils/<package>/...)."""
    return "tests/unit/module_utils/" + path.split("/")[2]


def _run_tests(tree, workdir, name, tests):
    """pytest on ``tests`` in ``tree``, stopping at the first failure; the process, with
    ``first_failed`` the node id of that failure (None when none failed)."""
    record = os.path.join(workdir, name + "-first-failed")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, **{first_failed.FILE_ENV: record})
    # compiled files in the work directory, not in the trees: pytest rewrites the asserts of every
    # module of its plugins' packages (all of hypothesis...), which each of the run's pytest
    # processes would otherwise do again
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(workdir, "pycache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    env.pop("ANSIBLE_COLLECTIONS_PATH", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly",
                           "-p", "first_failed",
                           "--basetemp", os.path.join(workdir, name + "-tmp")] + list(tests),
                          cwd=tree, capture_output=True, text=True, env=env, timeout=900,
                          check=False)
    try:
        with open(record) as handle:
            proc.first_failed = handle.read()
    except FileNotFoundError:
        proc.first_failed = None
    return proc


def run_baseline(workdir, tests):
    """The unmutated copy must pass ``tests`` (the tests that caught mutants), or their failing
    under a mutant means nothing."""
    tree = os.path.join(workdir, "baseline")
    _copy_tree(tree)
    proc = _run_tests(tree, workdir, "baseline", sorted(tests))
    return proc.returncode == 0, proc.stdout.strip().splitlines()[-1:]


def run_mutant(name, workdir, killer=None):
    """(outcome, the test that caught it or why not, what the unmutated copy must pass: that
    test's node id, or the package's tests when the mutant failed them before any test ran) of
    mutant ``name``."""
    path, original, mutated, _what = MUTANTS[name]
    tree = os.path.join(workdir, name)
    _copy_tree(tree)
    with open(os.path.join(tree, path)) as handle:
        text = handle.read()
    if text.count(original) != 1:
        return ("stale", "the original text is not in %s once: the code moved, update the mutant"
                % path, None)
    with open(os.path.join(tree, path), "w") as handle:
        handle.write(text.replace(original, mutated))
    if killer:
        proc = _run_tests(tree, workdir, name + "-first", [killer])
        if proc.returncode in (1, 2):  # the test failed, or its file no longer imports
            return "killed", proc.first_failed or killer, proc.first_failed or killer
    proc = _run_tests(tree, workdir, name, [_tests_of(path)])
    if proc.returncode == 0:
        return "survived", "the tests of %s all pass with this mutant" % _tests_of(path), None
    return ("killed", proc.first_failed or proc.stdout.strip().splitlines()[-1],
            proc.first_failed or _tests_of(path))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(MUTANTS))
    parser.add_argument("--write-killers", action="store_true",
                        help="record the test that caught each mutant in killers.json")
    args = parser.parse_args(argv)
    names = args.only or sorted(MUTANTS)
    killers = _read_killers()
    workdir = tempfile.mkdtemp(prefix="resilient-virt-mutants-")
    print("| mutant | what it breaks | outcome | first failing test |\n|---|---|---|---|")
    holes = 0
    caught = {}
    baseline_tests = set()
    began = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            outcomes = pool.map(lambda name: run_mutant(name, workdir, killers.get(name)), names)
            for name, (outcome, detail, must_pass) in zip(names, outcomes):
                holes += outcome != "killed"
                if outcome == "killed":
                    caught[name] = detail
                    baseline_tests.add(must_pass)
                print("| %s | %s | %s | %s |" % (name, MUTANTS[name][3], outcome, detail),
                      flush=True)
        passed, last = run_baseline(workdir, baseline_tests) if baseline_tests else (True, [])
        if not passed:
            print("the tests fail on the unmutated copy, so no outcome counts: %s" % " ".join(last))
            return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.write_killers:
        with open(KILLERS, "w") as handle:
            json.dump(dict(killers, **caught), handle, indent=1, sort_keys=True)
            handle.write("\n")
    took = time.monotonic() - began
    print("\n%d mutants, %d killed, %d not (%.0f s)" % (len(names), len(names) - holes, holes, took))
    return 1 if holes else 0


if __name__ == "__main__":
    sys.exit(main())
