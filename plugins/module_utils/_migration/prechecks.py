# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a move must pass before anything moves, from plain values: the target hypervisor
takes VMs, has room for the VM, is in its zone, and keeps the failover reservations' rules; and
what a move to another provider means for a VM that ``vm_fleet`` keeps.

Each check gives a dict ``{"check", "passed", "detail"}``; :func:`refusal` turns the failed ones
into one Conflict that names each and its fix. The CPU is compared by the backend, which asks
the target's hypervisor, before it moves anything.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import OWNER_KEY

__all__ = ("USABLE_STATES", "prechecks", "refusal", "fleet_check")

USABLE_STATES = ("up", "connected", "online")  # hypervisor states that take VMs, per backend
_ACTIVE = ("running", "paused")  # a VM in these holds memory and vCPUs on its host


def _check(name, passed, detail):
    return {"check": name, "passed": passed, "detail": detail}


def _held_on(host, reservations):
    """(vCPUs, MiB) the failover reservations on ``host`` hold."""
    cpu = memory = 0
    for res in reservations:
        if res.host == host:
            cpu += res.resources.get("cpu", 0)
            memory += res.resources.get("memory_mb", 0)
    return cpu, memory


def _capacity(vm, hypervisor, reservations):
    if vm["state"] not in _ACTIVE:
        return _check("capacity", True, "the VM is %s: it takes no memory or vCPUs while it "
                      "moves" % vm["state"])
    if any(hypervisor.get(key) is None for key in ("memory_mb", "used_memory_mb", "cpu",
                                                   "used_cpu")):
        return _check("capacity", False, "%s does not tell how much memory and how many vCPUs it "
                      "has free (it is %s), so the VM's room there cannot be checked; choose "
                      "another target" % (hypervisor["name"], hypervisor.get("state")))
    held_cpu, held_memory = _held_on(hypervisor["name"], reservations)
    free_memory = hypervisor["memory_mb"] - hypervisor["used_memory_mb"] - held_memory
    free_cpu = hypervisor["cpu"] - hypervisor["used_cpu"] - held_cpu
    short = []
    if (vm["memory_mb"] or 0) > free_memory:
        short.append("%s MiB of memory free, the VM needs %s" % (free_memory, vm["memory_mb"]))
    if (vm["vcpus"] or 0) > free_cpu:
        short.append("%s vCPUs free, the VM needs %s" % (free_cpu, vm["vcpus"]))
    held = " (after %d vCPUs and %d MiB held by failover reservations)" % (
        held_cpu, held_memory) if held_cpu or held_memory else ""
    if short:
        return _check("capacity", False, "%s has %s%s; choose another target or make room "
                      "there" % (hypervisor["name"], " and ".join(short), held))
    return _check("capacity", True, "%s has %s MiB and %s vCPUs free%s" % (
        hypervisor["name"], free_memory, free_cpu, held))


def _failover(vm, host, reservations):
    """The reservations' rules a move must keep: a VM is never on the host of a slot it holds
    (it would lose its protection), nor on the host of another VM that shares one of its
    reservations (one host failing would need that slot twice)."""
    uuid = vm.get("uuid")
    mine = [res for res in reservations if uuid and uuid in res.allocations]
    if not mine:
        return _check("failover", True, "the VM holds no failover reservation")
    own = sorted(res.name for res in mine if res.host == host)
    if own:
        return _check("failover", False, "the failover reservation(s) %s that protect the VM "
                      "are on %s, so it would lose its protection there; choose another target "
                      "or move the reservation first" % (", ".join(own), host))
    sharing = sorted(set(other for res in mine for other, on in res.allocations.items()
                         if other != uuid and on == host))
    if sharing:
        return _check("failover", False, "VM(s) %s share a failover reservation with the VM "
                      "and run on %s: one failure there would need that reservation twice; "
                      "choose another target" % (", ".join(sharing), host))
    return _check("failover", True, "its %d failover reservation(s) stay valid"
                  % len(mine))


def prechecks(vm, hypervisor, reservations, allow_zone_change=False):
    """Every check of moving ``vm`` (a VM dict) to ``hypervisor`` (a hypervisor dict), with the
    failover ``reservations`` (``_failover.model.Reservation``) of every creator."""
    state = hypervisor.get("state")
    checks = [_check("hypervisor", state in USABLE_STATES,
                     "%s is %s" % (hypervisor["name"], state) + (
                         "" if state in USABLE_STATES else "; bring it back or choose "
                         "another target"))]
    checks.append(_capacity(vm, hypervisor, reservations))
    same_zone = hypervisor.get("az") == vm.get("az")
    checks.append(_check("zone", same_zone or allow_zone_change, "%s is in zone %s, the VM in "
                         "%s" % (hypervisor["name"], hypervisor.get("az"), vm.get("az")) + (
                             "" if same_zone or allow_zone_change else "; choose a target in "
                             "%s, or set allow_zone_change: true" % vm.get("az"))))
    checks.append(_failover(vm, hypervisor["name"], reservations))
    return checks


def fleet_check(vm, target_key):
    """The ``fleet`` check of a move to another provider: a VM that ``vm_fleet`` keeps (its
    marker in ``metadata``) is known to its fleet by provider and name, so the fleet's next run
    would make it again where it was. It passes (the move itself is sound) and says so; None
    for a VM no fleet keeps."""
    owner = (vm.get("metadata") or {}).get(OWNER_KEY)
    if owner is None:
        return None
    source = vm["provider_key"]
    return _check("fleet", True, "vm_fleet owner %r keeps the VM on %s: change its provider "
                  "to %s in that fleet's vms before the fleet runs again (the VM keeps its "
                  "marker), or the fleet makes the VM again on %s" % (
                      owner, source, target_key, source))


def refusal(name, target, checks):
    """The Conflict of the failed ``checks``, or None when all passed."""
    failed = [check for check in checks if not check["passed"]]
    if not failed:
        return None
    return Conflict("VM %r cannot move to %s: %s" % (name, target, "; ".join(
        "%s: %s" % (check["check"], check["detail"]) for check in failed)),
        details={"prechecks": checks})
