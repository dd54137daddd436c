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

from ansible_collections.resilient.virt.plugins.module_utils._failover.backup_restore import restore_onto
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
# A move within one provider relocates the VM to the reservation's host (``migrate``), unless the
# provider reports the VM's host disconnected: then the VM is started there the platform's way,
# when the provider can (``recover``: vSphere registers it again from its datastore, Proxmox VE's
# HA manager recovers it).
# A move to another provider (libvirt: one provider per hypervisor) defines the VM on the target
# from the definition recorded at the last reconcile cycle and starts it, on its own disk files:
# each must be a volume of a storage pool of the target at the very same path (the target's
# ``locate_disks``), a pool shared with the failed host. No volume is made and nothing is copied.
# A VM whose disks are all on the failed host's local storage is restored instead, when it is
# opted in, from its newest completed backup the target lists (``backup_restore.py``).
# A move that is already done (the VM runs on the target) is left alone, so running the
# evacuation again changes nothing. The docs (ha.md) say what is proved and what is assumed.

SPEC_KEYS = ("vcpus", "memory_mb", "interfaces", "boot", "metadata", "tags")
DISK_KEYS = ("path", "bus", "format", "device")


def disk_paths(definition):
    """The files of the VM's disks (an empty cdrom drive has none)."""
    return [disk["path"] for disk in definition.get("disks") or () if disk.get("path")]


def _unusable(disk, located, target):
    """Why the target cannot start the VM on ``disk``; None when it can."""
    path = disk.get("path")
    if not path:
        if disk.get("device") == "cdrom":
            return None
        return "a disk without a file"
    where = (located or {}).get(path)
    if where is None:
        return ("%s: %s has no volume at that path; it is on the failed hypervisor's local "
                "storage (restore it from its last backup: restore_from_backup)" % (path, target))
    if where.get("shared") is False:
        return ("%s: pool %r of %s is not shared (a marker made there is not seen through %s); "
                "the file there is not the failed hypervisor's disk" % (path, where["pool"], target, where["witness"]))
    return None


def disk_proofs(definition, located):
    """What each disk's sharing rests on, for the move's outcome: dicts path, pool, proof."""
    out = []
    for path in disk_paths(definition):
        where = located[path]
        if where.get("shared"):
            proof = "a marker made through the target was found through %s" % where["witness"]
        else:
            proof = "seen at this path in the target's pool; sharing not proved" + (
                " (%s)" % where["witness_error"] if where.get("witness_error") else "")
        out.append({"path": path, "pool": where["pool"], "proof": proof})
    return out


def local_disks(definition, located):
    """The disk files of ``definition`` that are on the failed host's own storage: the target
    has no volume at that path, or one of a pool proved not shared."""
    return [path for path in disk_paths(definition)
            if (located or {}).get(path) is None or located[path].get("shared") is False]


def _restore_or_refuse(definition, located, target):
    """None when every disk of ``definition`` is local (a restore brings all back); else
    NotSupported: a restore would put some disks back older than the others."""
    local, paths = local_disks(definition, located), disk_paths(definition)
    if len(local) == len(paths):
        return
    raise NotSupported("%s cannot be restored from a backup on %s: %s are on storage %s sees, %s "
                       "are not; a restore brings back every disk as it was at the backup, so it "
                       "is made only when none is seen" % (
                           definition["name"], target, ", ".join(p for p in paths if p not in local),
                           target, ", ".join(local)))


def recreate_spec(definition, located=None, target="the target"):
    """The spec that defines ``definition`` (a VM dict) again on ``target``, its disks at the
    same paths (no new volume); NotSupported naming each disk ``located`` (the target's
    ``locate_disks`` answer) says it cannot use."""
    problems = [problem for problem in (_unusable(disk, located, target) for disk in definition.get("disks") or ())
                if problem]
    if problems:
        raise NotSupported("%s cannot be started on %s: %s" % (definition["name"], target, "; ".join(problems)))
    spec = dict((key, definition[key]) for key in SPEC_KEYS if definition.get(key) not in (None, [], {}))
    spec["name"] = definition["name"]
    disks = [dict((key, disk[key]) for key in DISK_KEYS if disk.get(key)) for disk in definition.get("disks") or ()]
    if disks:
        spec["disks"] = disks
    return spec


def lost_hosts(provider):
    """The hosts ``provider`` reports disconnected: no VM can be migrated off them, only
    started elsewhere (``recover``); empty, asking nothing, when it cannot recover."""
    if "recover" not in provider.capabilities:
        return frozenset()
    return frozenset(hv["name"] for hv in provider.list_hypervisors() if hv.get("state") == "disconnected")


def _running_on(provider, name, host):
    try:
        vm = provider.describe(name)
    except NotFound:
        return None
    return vm if vm.get("hypervisor") == host and vm.get("state") == "running" else False


def execute_move(move, definition, source, target, check_mode, witnesses=(), restores=None, lost=None):
    """Carry out one move; returns its outcome dict (action, the disks' proofs or the restore's
    backup and recovery point, and on failure error). ``witnesses``: other surviving providers
    of the target's type, to prove its pools shared. ``restores``: None, or when the VM is opted
    in to a restore from its last backup (made when its disks are on the failed host's local
    storage) the RestoreHandles that keeps the restore's handle until the VM runs. ``lost``: the
    target's :func:`lost_hosts`, asked of it when None."""
    name, host = definition["name"], move["to_host"]
    outcome = dict(move, name=name)
    try:
        same_provider = source is not None and source.key == target.key
        if same_provider and move["from_host"] in (lost_hosts(target) if lost is None else lost):
            done = _running_on(target, name, host)
            outcome["action"] = "none" if done else "recover"
            if not done and not check_mode:
                target.recover(name, host)
            return outcome
        if same_provider and "migrate" in target.capabilities:
            done = _running_on(target, name, host)
            outcome["action"] = "none" if done else "migrate"
            if not done and not check_mode:
                target.migrate(name, host)
                if target.describe(name).get("state") != "running":
                    target.power(name, "on")
            return outcome
        done = _running_on(target, name, host)
        outcome["action"] = "none" if done else "recreate"
        if done is None:
            paths = disk_paths(definition)
            located = {}
            if paths:
                if "locate_disks" not in target.capabilities:
                    raise NotSupported("%s cannot tell whether it sees the disks of %s (%s); only VMs "
                                       "without disks can be started there" % (target.key, name, ", ".join(paths)))
                located = target.locate_disks(paths, witnesses)
            if restores is not None and local_disks(definition, located):
                _restore_or_refuse(definition, located, target.key)
                outcome["action"] = "restore"
                outcome.update(restore_onto(target, definition, move["vm"], check_mode, restores))
                return outcome
            spec = recreate_spec(definition, located, target.key)
            if paths:
                outcome["disks"] = disk_proofs(definition, located)
            if not check_mode:
                target.create(spec)
        if not done and not check_mode:
            target.power(name, "on")
        if restores is not None and not check_mode:  # it runs: a restore kept for it is done
            restores.forget_vm(target.key, name)
    except VirtError as err:
        outcome.update(action="failed", error=err.to_dict())
    return outcome
