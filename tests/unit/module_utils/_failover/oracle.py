"""The failover guarantee, checked without the planner's code.

For a set of failed hypervisors, every affected VM that must survive it needs a reservation of
its own (one that lists it with its current host) on a surviving hypervisor, large enough for it,
and no reservation may serve two of them. Whether such a distinct assignment exists is a maximum
bipartite matching, found here with Kuhn's augmenting paths, written for the tests and sharing
nothing with ``_failover.evacuation``. The five sharing rules are read the same way, from plain
maps (:func:`vm_keeps_the_rules`).
"""
import itertools


def _fits(vm, reservation):
    return (vm.vcpus or 0) <= reservation.resources.get("cpu", 0) and \
        (vm.memory_mb or 0) <= reservation.resources.get("memory_mb", 0)


def usable(vm, reservation, failed):
    """May ``vm`` (on a failed host) restart in ``reservation`` when ``failed`` hosts are down?"""
    return reservation.allocations.get(vm.uuid) == vm.host and reservation.host not in failed \
        and _fits(vm, reservation)


def max_assignment(vms, reservations, failed):
    """{vm uuid: reservation name} of a maximum matching of ``vms`` onto distinct reservations."""
    options = {vm.uuid: [r.name for r in reservations if usable(vm, r, failed)] for vm in vms}
    owner = {}

    def augment(uuid, seen):
        for name in options[uuid]:
            if name in seen:
                continue
            seen.add(name)
            if name not in owner or augment(owner[name], seen):
                owner[name] = uuid
                return True
        return False

    for vm in vms:
        augment(vm.uuid, set())
    return {uuid: name for name, uuid in owner.items()}


def guarantee_breaches(hosts, vms, reservations, required):
    """Every (failed hosts, VMs left without a slot) for which the guarantee does not hold.

    ``required`` maps a VM's uuid to the number of failures it must survive; a set of k failed
    hosts must be survived by every VM on them that requires k or more.
    """
    breaches = []
    deepest = max(required.values(), default=0)
    for size in range(1, deepest + 1):
        for failed in itertools.combinations(sorted(hosts), size):
            affected = [vm for vm in vms if vm.host in failed and required.get(vm.uuid, 0) >= size]
            placed = max_assignment(affected, reservations, set(failed))
            left = sorted(vm.uuid for vm in affected if vm.uuid not in placed)
            if left:
                breaches.append((failed, left))
    return breaches


def plan_errors(plan, vms, reservations, failed):
    """What is wrong with an evacuation plan (a dict as ``EvacuationPlan.to_dict`` gives), judged
    against the VMs actually on ``failed`` and the matching above: a VM missing from the plan, a
    move to a reservation it may not use or one used twice, or a VM left unplaced although a
    distinct assignment for every affected VM exists."""
    errors = []
    affected = [vm for vm in vms if vm.host in failed]
    by_uuid = {vm.uuid: vm for vm in affected}
    by_name = {r.name: r for r in reservations}
    moved = [m["vm"] for m in plan["moves"]]
    unplaced = [u["vm"] for u in plan["unplaced"]]
    if sorted(moved + unplaced) != sorted(by_uuid):
        errors.append(("not every affected VM is in the plan", sorted(moved + unplaced),
                       sorted(by_uuid)))
    used = [m["reservation"] for m in plan["moves"]]
    if len(used) != len(set(used)):
        errors.append(("a reservation is used twice", used))
    for move in plan["moves"]:
        vm, res = by_uuid.get(move["vm"]), by_name.get(move["reservation"])
        if vm is None or res is None or not usable(vm, res, set(failed)) or \
                move["to_host"] != res.host:
            errors.append(("a move the VM may not make", move))
    if unplaced and len(max_assignment(affected, reservations, set(failed))) == len(affected):
        errors.append(("VMs left unplaced though every one could be placed", unplaced))
    return errors


def vm_keeps_the_rules(uuid, host_of, res_host, slots):
    """Constraints 1-5 for VM ``uuid`` as the text atop constraints.py states them, read from
    plain maps: ``host_of`` VM -> host (None: unknown), ``res_host`` reservation -> host,
    ``slots`` VM -> the reservations it holds."""
    host, held = host_of[uuid], slots[uuid]
    slot_hosts = [res_host[name] for name in held]
    if host is None or host in slot_hosts or len(set(slot_hosts)) < len(slot_hosts):
        return False  # 1 and 2
    sharer_hosts = [host_of[other] for other in sorted(slots) if other != uuid
                    for name in slots[other] if name in held]
    if any(h is None or h == host or h in slot_hosts for h in sharer_hosts):
        return False  # 3 and 4
    return len(set(sharer_hosts)) == len(sharer_hosts)  # 5: distinct hosts, one slot each
