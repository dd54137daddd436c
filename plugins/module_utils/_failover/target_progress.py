# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Moving a zone's plan towards a target plan, a few VMs a cycle, valid at every step.

The target is the plan this planner builds for the fleet from nothing. A reservation of the
current plan *realizes* a target reservation when it is on the same hypervisor and serves only
VMs that the target reservation serves; a VM has *moved* when the reservations it holds realize
its target reservations. A VM that has not moved moves whole, all its slots in one step, into
the reservations realizing its targets (new ones where none does yet); the step is taken only
when rules 1-5 hold after it (see towards_target), so the plan is valid at every step.
"""
from typing import NamedTuple

__all__ = ("Progress", "progress")


class Progress(NamedTuple):
    """How far one zone has moved towards its target.

    ``realized``: {target name: current name}; ``targets``: {VM uuid: [target names]}, in name
    order; ``pending``: the VMs of the target that have not moved, largest memory first (then by
    uuid) - the order they move in."""

    realized: dict
    targets: dict
    pending: list


def progress(target, current, memory):
    """:class:`Progress` of ``current`` (a zone's reservations) towards ``target`` (the target
    plan's reservations of that zone); ``memory``: {VM uuid: memory_mb}.

    A target reservation is realized by a current one on its hypervisor whose VMs it serves
    too (the one serving the most VMs first, then the one of the same name, then by name; each
    current one realizes one at most). A VM has moved when the reservations it holds realize
    its target reservations, all of them."""
    targets, by_host = {}, {}
    for res in sorted(current, key=lambda r: r.name):
        if res.allocations:
            by_host.setdefault(res.host, []).append(res)
    wanted = sorted(target, key=lambda r: r.name)
    for res in wanted:
        for uuid in res.allocations:
            targets.setdefault(uuid, []).append(res.name)
    realized, used = {}, set()  # target name -> current name
    for res in sorted(wanted, key=lambda r: (-len(r.allocations), r.name)):
        options = [cur for cur in by_host.get(res.host, ()) if cur.name not in used
                   and cur.allocations.keys() <= res.allocations.keys()]
        if options:
            best = min(options, key=lambda cur: (-len(cur.allocations), cur.name != res.name,
                                                 cur.name))
            realized[res.name] = best.name
            used.add(best.name)
    owner = {name: target_name for target_name, name in realized.items()}
    held = {}
    for res in current:
        for uuid in res.allocations:
            held.setdefault(uuid, []).append(owner.get(res.name, ""))
    pending = sorted((uuid for uuid in targets if sorted(held.get(uuid, ())) != targets[uuid]),
                     key=lambda uuid: (-memory.get(uuid, 0), uuid))
    return Progress(realized, targets, pending)
