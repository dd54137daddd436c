# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evacuation plan: each VM on failed hosts gets one of its own reservations on a surviving host.

No reservation is used twice. This is a bipartite matching (VMs to reservations) found with
augmenting paths, so it places every VM whenever a distinct assignment exists. VMs are taken
highest priority first, then largest memory, then by uuid, and reservations by name; a VM placed
earlier stays placed (a later one may only shift it to another of its reservations), so when not
all fit, the earlier ones win: no VM is left unplaced for one of lower priority. The moves are
listed, and carried out, in that order. The result is the same for the same input.
"""
from dataclasses import dataclass, field

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import vm_fits
from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound, NotSupported, VirtError

__all__ = ("EvacuationPlan", "plan_evacuation")


@dataclass
class EvacuationPlan:
    """``moves``: dicts vm, from_host, reservation, to_host, priority, in the order they are
    carried out; ``unplaced``: dicts vm, host, priority, reason."""

    failed_hosts: list[str]
    moves: list[dict] = field(default_factory=list)
    unplaced: list[dict] = field(default_factory=list)

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
                for (path_vm, _dummy), path_res in zip(stack, taken + [res]):
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


def plan_evacuation(failed_hosts, vms, reservations, priorities=None):
    """:class:`EvacuationPlan` for the VMs running on ``failed_hosts``.

    A VM may use a reservation that lists it with its current host, lies on a surviving host
    and is large enough for it. ``priorities`` maps a VM's uuid to its priority (default 0).
    """
    failed = set(failed_hosts)
    priority = dict(priorities or {})
    affected = sorted((vm for vm in vms if vm.host in failed),
                      key=lambda vm: (-priority.get(vm.uuid, 0), -(vm.memory_mb or 0), vm.uuid))
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
                               "to_host": by_name[name].host, "priority": priority.get(vm.uuid, 0)})
        else:
            plan.unplaced.append({"vm": vm.uuid, "host": vm.host, "priority": priority.get(vm.uuid, 0),
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


# -- Carry out an evacuation plan through the providers.
# A move within one provider that can migrate (vSphere) relocates the VM to the reservation's host.
# A move to another provider (libvirt: one provider per hypervisor) defines the VM on the target
# from the definition recorded at the last reconcile cycle and starts it; that needs every disk to
# be shared storage (a path the target reaches) or no disk at all. A move that is already done (the
# VM runs on the target) is left alone, so running the evacuation again changes nothing.

SPEC_KEYS = ("vcpus", "memory_mb", "interfaces", "boot", "metadata", "tags")
DISK_KEYS = ("path", "bus", "format", "device")


def recreate_spec(definition):
    """The spec that defines ``definition`` (a VM dict) again elsewhere; NotSupported for local disks."""
    local = [disk.get("path") for disk in definition.get("disks") or () if disk.get("size_gb") or not disk.get("path")]
    if local:
        raise NotSupported(
            "%s has disks on its failed hypervisor's local storage (%s); only VMs on shared storage "
            "or without disks can be started elsewhere" % (definition["name"], ", ".join(str(path) for path in local))
        )
    spec = dict((key, definition[key]) for key in SPEC_KEYS if definition.get(key) not in (None, [], {}))
    spec["name"] = definition["name"]
    disks = [dict((key, disk[key]) for key in DISK_KEYS if disk.get(key)) for disk in definition.get("disks") or ()]
    if disks:
        spec["disks"] = disks
    return spec


def _running_on(provider, name, host):
    try:
        vm = provider.describe(name)
    except NotFound:
        return None
    return vm if vm.get("hypervisor") == host and vm.get("state") == "running" else False


def execute_move(move, definition, source, target, check_mode):
    """Carry out one move; returns its outcome dict (action and, on failure, error)."""
    name, host = definition["name"], move["to_host"]
    outcome = dict(move, name=name)
    try:
        same_provider = source is not None and source.key == target.key
        if same_provider and "migrate" in target.capabilities:
            done = _running_on(target, name, host)
            outcome["action"] = "none" if done else "migrate"
            if not done and not check_mode:
                target.migrate(name, host)
                if target.describe(name).get("state") != "running":
                    target.power(name, "on")
            return outcome
        spec = recreate_spec(definition)
        done = _running_on(target, name, host)
        outcome["action"] = "none" if done else "recreate"
        if done is None and not check_mode:
            target.create(spec)
        if not done and not check_mode:
            target.power(name, "on")
    except VirtError as err:
        outcome.update(action="failed", error=err.to_dict())
    return outcome
