"""Evacuation plan: each VM on failed hosts gets one of its own reservations on a surviving host.

No reservation is used twice. This is a bipartite matching (VMs to reservations) found with
augmenting paths, so it places every VM whenever a distinct assignment exists. VMs are taken
largest memory first, then by uuid, and reservations by name; a VM placed earlier stays placed,
so when not all fit, the earlier ones win. The result is the same for the same input.
"""
from dataclasses import dataclass, field
from typing import List

from ansible_collections.resilient.virt.plugins.module_utils._failover.resources import vm_fits

__all__ = ("EvacuationPlan", "plan_evacuation")


@dataclass
class EvacuationPlan:
    """``moves``: dicts vm, from_host, reservation, to_host; ``unplaced``: dicts vm, host, reason."""

    failed_hosts: List[str]
    moves: List[dict] = field(default_factory=list)
    unplaced: List[dict] = field(default_factory=list)

    @property
    def complete(self):
        return not self.unplaced

    def to_dict(self):
        return {"failed_hosts": list(self.failed_hosts), "complete": self.complete,
                "affected": len(self.moves) + len(self.unplaced), "placed": len(self.moves),
                "moves": [dict(m) for m in self.moves], "unplaced": [dict(u) for u in self.unplaced]}


def _augment(root, options, owner_of, choice_of):
    """Find an augmenting path from VM ``root``; on success update the matching in place."""
    visited = set()
    stack = [(root, iter(options[root]))]
    taken = []
    while stack:
        vm, candidates = stack[-1]
        for res in candidates:
            if res in visited:
                continue
            visited.add(res)
            owner = owner_of.get(res)
            if owner is None:
                for (path_vm, dummy), path_res in zip(stack, taken + [res]):
                    choice_of[path_vm] = path_res
                    owner_of[path_res] = path_vm
                return True
            taken.append(res)
            stack.append((owner, iter(options[owner])))
            break
        else:
            stack.pop()
            if taken:
                taken.pop()
    return False


def plan_evacuation(failed_hosts, vms, reservations):
    """:class:`EvacuationPlan` for the VMs running on ``failed_hosts``.

    A VM may use a reservation that lists it with its current host, lies on a surviving host
    and is large enough for it.
    """
    failed = set(failed_hosts)
    affected = sorted((vm for vm in vms if vm.host in failed),
                      key=lambda vm: (-(vm.memory_mb or 0), vm.uuid))
    wanted = set(vm.uuid for vm in affected)
    by_name = {res.name: res for res in reservations}
    held = {}
    for res in sorted(reservations, key=lambda r: r.name):
        for uuid in res.allocations:
            if uuid in wanted:
                held.setdefault(uuid, []).append(res)
    options = {}
    for vm in affected:
        options[vm.uuid] = [res.name for res in held.get(vm.uuid, ())
                            if res.host not in failed and res.allocations[vm.uuid] == vm.host
                            and vm_fits(vm, res.resources)]
    owner_of, choice_of = {}, {}
    for vm in affected:
        _augment(vm.uuid, options, owner_of, choice_of)
    plan = EvacuationPlan(failed_hosts=sorted(failed))
    for vm in affected:
        name = choice_of.get(vm.uuid)
        if name is not None:
            plan.moves.append({"vm": vm.uuid, "from_host": vm.host, "reservation": name,
                               "to_host": by_name[name].host})
        else:
            plan.unplaced.append({"vm": vm.uuid, "host": vm.host,
                                  "reason": _why_unplaced(vm, held.get(vm.uuid, ()), options[vm.uuid],
                                                          failed)})
    return plan


def _why_unplaced(vm, held, usable, failed):
    if not held:
        return "holds no failover reservation"
    if usable:
        return ("its reservations on surviving hosts (%s) are all taken by other evacuated VMs"
                % ", ".join(usable))
    if all(res.host in failed for res in held):
        return "all its reservations are on failed hosts (%s)" % ", ".join(
            sorted(set(res.host for res in held)))
    return "none of its reservations on surviving hosts records it on %s or is large enough" % vm.host
