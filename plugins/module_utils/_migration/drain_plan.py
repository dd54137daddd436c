# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where each VM of a hypervisor goes when it is drained, decided before anything moves.

Every VM is given the target with the most free memory on which the move's own prechecks
(``prechecks.py``: the target takes VMs, capacity, zone, the failover reservations' rules) pass,
counting the VMs already planned there: their memory and vCPUs on the target, and their new host
in the reservations they hold. The largest VMs are planned first. A VM no target takes is left,
with each target's failed checks as the reason.
"""
import dataclasses

from ansible_collections.resilient.virt.plugins.module_utils._migration.prechecks import prechecks

__all__ = ("Candidate", "plan_drain", "ACTIVE")

ACTIVE = ("running", "paused")  # moved live; the others are stopped (moved cold, or left)


@dataclasses.dataclass
class Candidate:
    """A hypervisor a VM may go to: ``target`` as the move takes it (a provider reference or a
    host name), ``key`` as results show it, ``hypervisor`` its dict."""

    target: object
    key: str
    hypervisor: dict


def _free_memory(hypervisor):
    return hypervisor["memory_mb"] - hypervisor["used_memory_mb"]


def _moved(reservations, uuid, host):
    """``reservations`` with the VM ``uuid`` recorded on ``host`` where it holds one."""
    return [dataclasses.replace(res, allocations=dict(res.allocations, **{uuid: host}))
            if uuid in res.allocations else res for res in reservations]


def plan_drain(vms, candidates, reservations, allow_zone_change=False, move_stopped=False):
    """``{"moves": [{vm, candidate}], "stays": [{vm, why}], "left": [{vm, why}]}``: ``vms``
    (VM dicts) placed on ``candidates``; a stopped VM stays unless ``move_stopped``."""
    plan = {"moves": [], "stays": [], "left": []}
    hypervisors = dict((c.key, dict(c.hypervisor)) for c in candidates)
    order = sorted(vms, key=lambda vm: (vm["state"] not in ACTIVE, -(vm.get("memory_mb") or 0),
                                        vm["name"]))
    for vm in order:
        if vm["state"] not in ACTIVE and not move_stopped:
            plan["stays"].append({"vm": vm, "why": "the VM is %s and stopped_vms is leave"
                                  % vm["state"]})
            continue
        failed = []
        ranked = sorted(candidates, key=lambda c: (-_free_memory(hypervisors[c.key]), c.key))
        for candidate in ranked:
            hypervisor = hypervisors[candidate.key]
            checks = prechecks(vm, hypervisor, reservations, allow_zone_change)
            failures = ["%s: %s" % (c["check"], c["detail"]) for c in checks if not c["passed"]]
            if failures:
                failed.append("%s - %s" % (candidate.key, "; ".join(failures)))
                continue
            if vm["state"] in ACTIVE:
                hypervisor["used_memory_mb"] += vm.get("memory_mb") or 0
                hypervisor["used_cpu"] += vm.get("vcpus") or 0
            if vm.get("uuid"):
                reservations = _moved(reservations, vm["uuid"], hypervisor["name"])
            plan["moves"].append({"vm": vm, "candidate": candidate})
            break
        else:
            plan["left"].append({"vm": vm, "why": " | ".join(failed) or "no target hypervisor "
                                 "to move it to: give targets"})
    return plan
