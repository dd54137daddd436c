# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The state of one cycle's plan, passed from step to step, and what changes it."""
from dataclasses import replace

from ansible_collections.resilient.virt.plugins.module_utils._conditions import (
    READY, make_condition)
from ansible_collections.resilient.virt.plugins.module_utils._failover.fleet_index import unique
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    CycleResult, Deletion, NameAllocator, Removal, Reservation, reservation_size)
from ansible_collections.resilient.virt.plugins.module_utils._failover.slots import ZoneIndex
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time

ACTIVE_REASON = "ReservationActive"
ACTIVE_MESSAGE = "Failover reservation is active and ready"
EMPTY = "Empty"
EMPTY_MESSAGE = "no VM uses this reservation any more"
REPLACED = "Replaced: the VM could not get all its required slots while holding this one"
CONSOLIDATED = "Consolidated: moved to %s"
CONSOLIDATED_MESSAGE = "its VMs moved to other reservations (consolidation)"
INTERIM = "Interim"
INTERIM_REASON = "WaitingForPlannedSlots"
INTERIM_MESSAGE = ("held until its VMs get their slots of the plan built from nothing, which the "
                   "one-new-per-hypervisor limit opens over several cycles")

PACK = "pack"
GREEDY = "greedy"
FOLLOW = "follow"


def is_interim(res):
    """True when ``res`` carries the Interim condition: it covers VMs only until they get their
    slots of the target plan (packing.cover_for_now)."""
    return any(c.get("type") == INTERIM and c.get("status") in (True, "True")
               for c in res.conditions)


def growth(res, vm):
    """(cpu, memory_mb) that ``res`` must grow by to fit ``vm``."""
    cpu, mem = reservation_size(res.resources)
    return max(0, (vm.vcpus or 0) - cpu), max(0, (vm.memory_mb or 0) - mem)


class CycleState:
    """One plan of one cycle, as the steps build it (see reconcile.plan_cycle).

    What the cycle was given: the ``fleet`` (a fleet_index.FleetIndex, shared by the cycle's
    plans) and from it ``hv`` and ``vms`` by name, ``hosts`` (VM -> the host it runs on),
    ``required`` slots per VM and ``multi`` (requires two or more); ``settings``, ``now``
    (``stamp``), ``cycle``. The plan: ``work`` (the reservations by name), ``graph`` (the rules),
    ``ledger`` (free room), ``zones`` (indexes), ``names``, ``status`` per VM, ``result``. How it
    is planned: ``strategy`` (PACK, GREEDY or FOLLOW), ``order``, the greedy's ``stop``, the
    ``target`` and what follows from it. The functions of the step modules read and change it;
    the methods below are the changes more than one step makes."""

    def __init__(self, fleet, reservations, settings, now, cycle, strategy,
                 stop=None, order=0, target=None, clock=None, may_follow=False):
        self.fleet = fleet
        self.hv = fleet.hv
        self.vms = fleet.vms
        originals = unique(reservations, "name", "reservations")
        self.work = {name: replace(res, allocations=dict(res.allocations),
                                   resources=dict(res.resources),
                                   conditions=[dict(c) for c in res.conditions])
                     for name, res in sorted(originals.items())}
        self.settings = settings
        self.strategy = strategy
        self.now = now
        self.stamp = format_time(now)
        self.cycle = cycle
        self.hosts = fleet.hosts
        self.result = CycleResult(reservations=[])
        self.changed = set()
        self.names = NameAllocator(originals)
        self.graph = None
        self.ledger = None
        self.zones = {}
        self.status = {}
        self.required = fleet.required
        self.multi = fleet.multi
        self.multi_on_host = fleet.multi_on_host  # hypervisor -> its VMs requiring 2+ slots
        self.serves_multi = {}
        self.checks = 0  # join questions asked (joining.may_join, joining.may_grow)
        self.stop = stop  # {zone: figures} past which the plain greedy stops (packing.Dominated)
        self.held = {}  # with stop: {zone: [memory_mb, reservations, slots missing]} so far
        self.order = order
        self.target = target  # (figures now) -> the Target to move towards, built when needed
        self.target_plan = None  # its result, once built
        self.settled = False  # step 5 gave no VM a slot and left none short
        self.protected = set()  # reservations realizing the target: consolidation leaves them
        self.clock = clock  # PlanningDeadline or None
        self.planned = {}  # following the target: {uuid: ([target reservations], realized)}
        self.may_follow = may_follow  # FOLLOW is among the strategies (reconcile.STRATEGIES)
        self.follows = False  # the plan is part of the target (towards_target.follows_target)
        self.trait_hosts = fleet.trait_hosts  # (zone, trait needs) -> its hypervisors with them
        self.interim = {name for name, res in self.work.items() if is_interim(res)}
        self.had_interim = bool(self.interim)  # the plan came with interim reservations
        self.packing_interim = False  # new reservations are interim (packing.cover_for_now)
        self.for_now = True  # following: VMs may be covered by interim reservations
        self.opening = {}  # following, none covered for now: {hypervisor: target to open first}
        self.target_room = {}  # following: {target name: (host, cpu, memory_mb)} held for it
        self.busiest = set()  # following: the hypervisors of a zone with the most target
        # reservations still to open (packing.cover_for_now leaves them to those)

    def touch(self, res):
        res.last_changed = self.stamp
        res.acknowledged_at = None
        self.changed.add(res.name)

    def apply_removals(self, removals):
        for removal in removals:
            res = self.work[removal.reservation]
            res.allocations.pop(removal.vm, None)
            self.touch(res)
        self.result.removals.extend(removals)

    def delete(self, name, reason, message):
        res = self.work.pop(name)
        hv = self.hv.get(res.host)
        if hv is not None and hv.az in self.zones:
            self.zones[hv.az].remove(name)
        self.graph.remove_reservation(name)
        self.ledger.give_back(res.host, *reservation_size(res.resources))
        self.interim.discard(name)
        self.result.deleted.append(Deletion(res, reason, message))

    def held_in(self, zone):
        return self.held.setdefault(zone, [0, 0, 0])

    def index_zones(self):
        zones = {}
        for name, res in sorted(self.work.items()):
            self.serves_multi[name] = any(self.multi.get(uuid, False) for uuid in res.allocations)
            hv = self.hv.get(res.host)
            if hv is not None:
                zones.setdefault(hv.az, ZoneIndex()).add(
                    name, reservation_size(res.resources)[1], len(res.allocations))
        return zones

    def reindex(self, name):
        res = self.work[name]
        index = self.zones.get(self.hv[res.host].az)
        if index is not None:
            index.update(name, reservation_size(res.resources)[1], len(res.allocations))

    def current_figures(self):
        """{zone: [memory once fitted, reservations, 0]} of the plan now (the target's greedy
        stops once it holds that much, see :class:`packing.Dominated`)."""
        current = {}
        for res in self.work.values():
            current.setdefault(self.zone_of(res), []).append(res)
        return {az: [self.fitted_memory(held), len(held), 0] for az, held in current.items()}

    def join(self, vm, name, grow):
        """Add ``vm`` to reservation ``name``, grown to fit it first when ``grow``."""
        res = self.work[name]
        if grow:
            self.grow(res, vm)
        res.allocations[vm.uuid] = vm.host
        self.graph.link(vm.uuid, name)
        self.reindex(name)
        self.touch(res)

    def leave(self, vm, names):
        """Take ``vm`` out of reservations ``names``, deleting those left empty."""
        for name in names:
            res = self.work[name]
            self.graph.unlink(vm.uuid, name)
            self.apply_removals([Removal(name, vm.uuid, res.allocations[vm.uuid], REPLACED)])
            self.reindex_or_delete(name, EMPTY_MESSAGE)

    def reindex_or_delete(self, name, message):
        """After VMs left reservation ``name``: index it again, or delete it (``message``) when
        none is left."""
        if self.work[name].allocations:
            self.reindex(name)
        else:
            self.delete(name, EMPTY, message)

    def count_check(self):
        self.checks += 1
        self.check_time()

    def check_time(self):
        """Timeout once the cycle's deadline has passed (see PlanningDeadline)."""
        if self.clock is not None:
            self.clock.check()

    def grow(self, res, vm):
        more_cpu, more_mem = growth(res, vm)
        self.ledger.take(res.host, more_cpu, more_mem)
        res.resources["cpu"] = res.resources.get("cpu", 0) + more_cpu
        res.resources["memory_mb"] = res.resources.get("memory_mb", 0) + more_mem

    def create(self, vm, az, host, resources=None, name=None):
        """A new reservation on ``host`` for ``vm``, of its size unless ``resources`` say,
        named ``name`` (already claimed) or a new name."""
        name = name or self.names.new_name(az, "%s/%s" % (vm.uuid, host))
        resources = resources or {"cpu": vm.vcpus, "memory_mb": vm.memory_mb}
        res = Reservation(
            name=name, host=host, az=az, resources=resources,
            allocations={vm.uuid: vm.host}, creator=self.settings.creator,
            last_changed=self.stamp, acknowledged_at=None,
            conditions=[make_condition(READY, True, ACTIVE_REASON, ACTIVE_MESSAGE, now=self.now)])
        if self.packing_interim:
            res.conditions.append(make_condition(INTERIM, True, INTERIM_REASON, INTERIM_MESSAGE,
                                                 now=self.now))
            self.interim.add(name)
        self.work[name] = res
        self.graph.add_reservation(name, host)
        self.graph.link(vm.uuid, name)
        self.ledger.take(host, *reservation_size(resources))
        self.zones.setdefault(az, ZoneIndex()).add(name, reservation_size(resources)[1], 1)
        self.serves_multi[name] = self.multi[vm.uuid]
        self.result.created.append(name)
        if self.stop is not None:
            held = self.held_in(az)
            held[0] += reservation_size(resources)[1]
            held[1] += 1
        return name

    def zone_of(self, res):
        hv = self.hv.get(res.host)
        return hv.az if hv is not None else None

    def fitted_memory(self, reservations):
        """Memory ``reservations`` hold once step 7 has shrunk each to the largest VM it serves."""
        total = 0
        for res in reservations:
            held = reservation_size(res.resources)[1]
            if all(uuid in self.vms for uuid in res.allocations):
                held = min(held, max((self.vms[uuid].memory_mb or 0 for uuid in res.allocations),
                                     default=held))
            total += held
        return total

    def hold_target_room(self):
        """Take the room of ``target_room`` from the ledger: packing for now leaves it free."""
        for host, cpu, memory in self.target_room.values():
            self.ledger.take(host, cpu, memory)

    def release_target_room(self, names=None):
        """Give back the room held for target reservations ``names`` (all when None)."""
        for name in list(self.target_room) if names is None else names:
            held = self.target_room.pop(name, None)
            if held is not None:
                self.ledger.give_back(*held)

    def has_room(self, host, need):
        free = self.ledger.free(host)
        return free is not None and need[0] <= free[0] and need[1] <= free[1]
