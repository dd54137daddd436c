# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a VM's missing slots go: free room per host, which VMs a cycle serves, and the search.

A cycle serves the VMs short of slots, largest first, in a rotating window; for each it offers
the reservations of its zone (ordered by the cycle's strategy, see ``joining``), then a new
reservation on the hypervisor with the most free room, and chooses the VM's missing slots
together so an early choice does not strand a later one; a VM missing two slots first looks
for two existing reservations it can take together.
"""
import bisect
import itertools
from typing import NamedTuple

from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import host_satisfies
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    VM, reservation_size)

__all__ = ("CapacityLedger", "Need", "select_window", "ShareQueue", "ZoneIndex", "HostPicker",
           "search_slots", "BRANCH_LIMIT", "slot_pairs", "PAIR_OPTIONS")


# -- Free room per hypervisor: capacity minus its VMs minus every failover reservation on it.

class CapacityLedger:
    """Free (cpu, memory_mb) per known hypervisor, updated as reservations come and go.

    A hypervisor's ``used_*`` counts its VMs; when None, ``vm_use`` says what the VMs listed
    on it use ({host: (cpu, memory_mb)}, model.sizes_by_host of the VMs).
    """

    def __init__(self, hypervisors, vm_use, reservations):
        self._free = {}
        for hv in hypervisors:
            used_cpu, used_mem = hv.used(vm_use)
            self._free[hv.name] = [hv.cpu - used_cpu, hv.memory_mb - used_mem]
        for res in reservations:
            self.take(res.host, *reservation_size(res.resources))

    def free(self, host):
        """(cpu, memory_mb) still free on ``host``; None for an unknown host."""
        room = self._free.get(host)
        return None if room is None else (room[0], room[1])

    def rooms(self):
        """{host: [free cpu, free memory_mb]} as it stands, kept current by take and give_back
        (for loops over many hosts: read it, never change it)."""
        return self._free

    def take(self, host, cpu, memory_mb):
        room = self._free.get(host)
        if room is not None:
            room[0] -= cpu
            room[1] -= memory_mb

    def give_back(self, host, cpu, memory_mb):
        self.take(host, -cpu, -memory_mb)


# -- Which VMs a cycle works on: those short of slots, largest memory first, in a rotating window.

class Need(NamedTuple):
    vm: VM
    required: int
    held: int


def select_window(ordered, max_vms, cycle):
    """(selected, deferred) lists of needs, each in the order of ``ordered``.

    ``ordered``: the needs by memory (largest first), then uuid, as a cycle serves them
    (fleet_index.FleetIndex.by_size). With ``max_vms`` > 0 and more needs
    than that, the window of ``max_vms`` starts at ``cycle * max_vms`` (wrapping), so consecutive
    cycles walk the whole list and every VM is processed within ceil(len / max_vms) cycles.
    """
    ordered = list(ordered)
    if max_vms <= 0 or len(ordered) <= max_vms:
        return ordered, []
    start = (cycle * max_vms) % len(ordered)
    picked = set((start + i) % len(ordered) for i in range(max_vms))
    selected = [n for i, n in enumerate(ordered) if i in picked]
    deferred = [n for i, n in enumerate(ordered) if i not in picked]
    return selected, deferred


# -- Reservations of one zone ordered for reuse: most shared first, then by name.

class ShareQueue:
    """Buckets of names by member count; within a bucket the oldest name first (the order of
    :meth:`add`, so names given in sorted order come before any added later).

    Do not change a queue (or a :class:`ZoneIndex`) while walking it."""

    def __init__(self):
        self._size = {}
        self._age = {}
        self._buckets = {}
        self._walks = {}  # least_shared_first -> the names in that order, until the queue changes

    def __len__(self):
        return len(self._size)

    def add(self, name, size):
        self._size[name] = size
        age = self._age.setdefault(name, len(self._age))
        bisect.insort(self._buckets.setdefault(size, []), (age, name))
        self._walks = {}

    def remove(self, name):
        size = self._size.pop(name, None)
        if size is None:
            return
        bucket = self._buckets[size]
        del bucket[bisect.bisect_left(bucket, (self._age[name], name))]
        if not bucket:
            del self._buckets[size]
        self._walks = {}

    def resize(self, name, size):
        self.remove(name)
        self.add(name, size)

    def __iter__(self):
        """Names in reuse order; do not change the queue while iterating."""
        return self.walk()

    def walk(self, least_shared_first=False):
        """Names by member count, most first; with ``least_shared_first``, the least first of
        those with two or more members, then those with one. Kept between changes: a zone's
        reservations are walked once for every VM and slot."""
        names = self._walks.get(least_shared_first)
        if names is None:
            if least_shared_first:
                counts = sorted(self._buckets)
                counts = [n for n in counts if n >= 2] + [n for n in counts if n < 2]
            else:
                counts = sorted(self._buckets, reverse=True)
            names = self._walks[least_shared_first] = [
                name for count in counts for _age, name in self._buckets[count]]
        return iter(names)


class ZoneIndex:
    """The reservations of one zone, by memory size and, within a size, most shared first.

    ``shared()`` walks them all most shared first (the plain greedy's order); ``fitting(m)`` the
    sizes of at least ``m`` MiB, smallest first (best fit: large reservations stay free for
    large VMs); ``smaller(m)`` the sizes below ``m``, largest first (the least growth). Within
    a size, most shared first, or with ``spread`` as :meth:`ShareQueue.walk` with
    ``least_shared_first``.
    """

    def __init__(self):
        self._all = ShareQueue()
        self._by_size = {}
        self._sizes = []
        self._memory = {}

    def __len__(self):
        return len(self._all)

    def add(self, name, memory_mb, members):
        self._memory[name] = memory_mb
        self._all.add(name, members)
        if memory_mb not in self._by_size:
            self._by_size[memory_mb] = ShareQueue()
            bisect.insort(self._sizes, memory_mb)
        self._by_size[memory_mb].add(name, members)

    def remove(self, name):
        memory_mb = self._memory.pop(name, None)
        if memory_mb is None:
            return
        self._all.remove(name)
        queue = self._by_size[memory_mb]
        queue.remove(name)
        if not len(queue):
            del self._by_size[memory_mb]
            del self._sizes[bisect.bisect_left(self._sizes, memory_mb)]

    def update(self, name, memory_mb, members):
        self.remove(name)
        self.add(name, memory_mb, members)

    def shared(self):
        return iter(self._all)

    def fitting(self, memory_mb, spread=False):
        sizes = self._sizes[bisect.bisect_left(self._sizes, memory_mb):]
        return itertools.chain.from_iterable(self._by_size[size].walk(spread) for size in sizes)

    def smaller(self, memory_mb, spread=False):
        sizes = reversed(self._sizes[:bisect.bisect_left(self._sizes, memory_mb)])
        return itertools.chain.from_iterable(self._by_size[size].walk(spread) for size in sizes)


# -- Choosing the hypervisor for a new reservation, and explaining when none qualifies.

class HostPicker:
    """Picks, per zone, the hypervisor with the most free memory (then cpu, then name) that is
    not the VM's host, has the traits, has room for the VM, keeps constraints 1-5, and - with
    ``one_per_host`` - got no other new reservation this cycle."""

    def __init__(self, hypervisors, ledger, graph, one_per_host):
        self._ledger = ledger
        self._graph = graph
        self._one_per_host = one_per_host
        self._zones = {}
        self._capacity = {}  # hypervisor -> its memory_mb
        for hv in sorted(hypervisors, key=lambda h: h.name):
            self._zones.setdefault(hv.az, []).append(hv)
            self._capacity[hv.name] = hv.memory_mb
        self._closed = set()
        self._with_traits = {}  # (zone, trait needs) -> its hypervisors with them, by name

    def pick(self, vm, az, needs):
        """Name of the best hypervisor, or None."""
        best, best_mem, best_cpu = None, None, None
        allowed = self._graph.new_slot_allowed
        for name, free_cpu, free_mem in self._rooms_for(vm, az, needs):
            if name in self._closed:
                continue
            if (best is None or free_mem > best_mem or (free_mem == best_mem and free_cpu > best_cpu)) \
                    and allowed(vm.uuid, name):
                best, best_mem, best_cpu = name, free_mem, free_cpu
        return best

    def least_loaded(self, vm, az, needs):
        """Name of the hypervisor :meth:`pick` would allow with the least memory in use (its VMs
        and reservations) for its memory, the first by name on a tie, or None: the plain
        greedy's choice."""
        best, best_load = None, None
        capacity = self._capacity
        for name, _free_cpu, free_mem in self._rooms_for(vm, az, needs):
            if name in self._closed:
                continue
            load = (capacity[name] - free_mem) / max(1, capacity[name])
            if (best_load is None or load < best_load) \
                    and self._graph.new_slot_allowed(vm.uuid, name):
                best, best_load = name, load
        return best

    def closed_to(self, vm, az, needs):
        """True when a hypervisor that got a new reservation this cycle would otherwise take
        one for ``vm`` (with ``one_per_host``): the limit, not the fleet, leaves it short."""
        return any(name in self._closed and self._graph.new_slot_allowed(vm.uuid, name)
                   for name, _free_cpu, _free_mem in self._rooms_for(vm, az, needs))

    def _rooms_for(self, vm, az, needs):
        """(name, free cpu, free memory) of the hypervisors of ``az``, by name, that may hold a
        new reservation for ``vm`` as far as host, traits and room go."""
        hosts = self._with_traits.get((az, needs))
        if hosts is None:
            hosts = self._with_traits[(az, needs)] = [
                hv.name for hv in self._zones.get(az, ()) if host_satisfies(hv.traits, needs)]
        rooms = self._ledger.rooms()
        cpu, memory = vm.vcpus or 0, vm.memory_mb or 0
        for name in hosts:
            free_cpu, free_mem = rooms[name]
            if name == vm.host or free_cpu < cpu or free_mem < memory:
                continue
            yield name, free_cpu, free_mem

    def is_closed(self, host):
        """True when ``host`` got a new reservation this cycle and the limit is on."""
        return host in self._closed

    def used(self, host):
        """Record a new reservation on ``host``: closed for the rest of the cycle when limited."""
        if self._one_per_host:
            self._closed.add(host)

    def unused(self, host):
        """Undo :meth:`used` for a new reservation that was only tried."""
        self._closed.discard(host)

    def explain(self, vm, az, needs):
        """Why no hypervisor in ``az`` can take a new reservation for ``vm``."""
        hosts = self._zones.get(az, ())
        if not hosts:
            return "no hypervisor in zone %r" % (az,)
        counts = {}
        for hv in hosts:
            free_cpu, free_mem = self._ledger.free(hv.name)
            if hv.name == vm.host:
                key = "its own host"
            elif not host_satisfies(hv.traits, needs):
                key = "without the required traits"
            elif free_cpu < (vm.vcpus or 0) or free_mem < (vm.memory_mb or 0):
                key = "without room"
            elif hv.name in self._closed:
                key = "already got a new reservation this cycle"
            else:
                key = "would break the failover constraints"
            counts[key] = counts.get(key, 0) + 1
        parts = ", ".join("%d %s" % (n, key) for key, n in sorted(counts.items()))
        return ("no shareable reservation, and no hypervisor in zone %s can hold a new one of "
                "%s vcpus / %s MiB (%s)" % (az, vm.vcpus, vm.memory_mb, parts))


# -- Choosing a VM's missing slots together, so an early choice does not strand a later one.
# Joining the most shared reservation first gives the VM many sharers, and constraint 5 then rules
# out every reservation those sharers hold; the VM's last slot may find no room. The search tries
# the choices in preference order, depth first, and keeps the first sequence that covers all the
# missing slots (or the longest one found).

BRANCH_LIMIT = 8
"""Choices tried for one slot before the search gives up on it (bounds the search)."""


def search_slots(missing, options, apply, undo):
    """Longest sequence of at most ``missing`` options that can be applied one after another.

    ``options()`` yields the choices for the next slot given what is applied so far, best first
    (the first BRANCH_LIMIT are tried); ``apply``/``undo`` change and restore that state.
    Everything is undone before returning.
    """
    best, chosen = [], []

    def extend():
        if len(chosen) > len(best):
            best[:] = chosen
        if len(chosen) == missing:
            return True
        if len(chosen) == missing - 1:
            for option in options():
                best[:] = chosen + [option]
                return True
            return False
        for option in itertools.islice(options(), BRANCH_LIMIT):
            apply(option)
            chosen.append(option)
            done = extend()
            chosen.pop()
            undo(option)
            if done:
                return True
        return False

    extend()
    return best


# -- Two missing slots in two existing reservations, rather than one of them and a new one.
# The search above keeps the first complete sequence, so a VM whose preferred first slot has no
# partner among the existing reservations opens a new one, even where two others would take it
# together: around one much shared reservation, every VM then holds a slot there and one of its
# own. Looking at pairs first lets the reservations' graph close into triangles (u in a and b,
# w in a and c, v in b and c) and holds one reservation less per such VM; joining bars the
# triangle whose b and c serve u and w alone, as the reference system leaves it open.
# Each VM that joins a reservation also closes pairs for the VMs after it: rule 5 bars a VM from
# holding two reservations that VMs of one hypervisor use. A plan whose hypervisors close the same
# pairs leaves more pairs open, so the pairs closing the fewest come first.

PAIR_OPTIONS = 32
"""Existing reservations a VM missing two slots looks at together (at most 496 pairs)."""


def slot_pairs(options, host_of, hosts_at, barred, closes):
    """The pairs of ``options`` (given best first) that might give a VM its two missing slots.

    ``host_of(option)`` is the hypervisor the option's reservation is on, ``hosts_at(option)``
    the hosts of its VMs and its own host. Two reservations qualify when they are on different
    hypervisors (rule 2), no host is at both (a VM there would use two slots of the new VM, or
    run on one of its slot hosts: rules 4 and 5), and ``barred(first, second)`` is false.
    Best first: the pairs that close the fewest other pairs (``closes(option)``, see
    DependencyGraph.pairs_closed), so the pairs later VMs could take stay open; then those used
    from the most hosts (they fill the reservations already shared); then in the order of
    ``options``. The caller still checks the chosen pair against every rule. The pairs come
    as the caller takes them: ``barred`` is asked of a pair when it comes up, so a caller that
    stops at the first pair it may take asks it of no pair after that one.
    """
    places = [(host_of(option), hosts_at(option), closes(option)) for option in options]
    pairs = []
    for i, (host1, at1, closes1) in enumerate(places):
        for j, (host2, at2, closes2) in enumerate(places[i + 1:], i + 1):
            if host1 == host2 or not at1.isdisjoint(at2):
                continue
            pairs.append((closes1 + closes2, -len(at1) - len(at2), i, j))
    pairs.sort()
    return ((options[i], options[j]) for _closes, _weight, i, j in pairs
            if not barred(options[i], options[j]))
