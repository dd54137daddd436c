# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The least capacity any valid plan must reserve, to judge how much of a plan the guarantee needs.

Per zone, for the VMs that require slots, ``count(s)`` is how many reservations of at least s MiB
every valid plan holds, for each VM memory size s; the memory bound adds, for sizes largest first,
``(count(s) - count(previous larger size)) * s``, and the count bound is ``count`` at the smallest
size. A slot of VM v is a reservation v fits in, so at least ``mem(v)`` MiB; below, "VMs" means
the VMs of at least s MiB and n(v) how many slots v requires. ``count(s)`` is the largest of:

* one hypervisor, ``N_H(s)`` = the sum of n(v) over H's VMs: a VM's slots are distinct (rule 2)
  and two VMs of H never share a slot (rule 3), so all of H's slots are distinct reservations;
* two hypervisors, ``N_H1(s) + D_H2(s)`` with ``D_H(s)`` = the sum of n(v) - 1 over H's VMs:
  a VM v of H2 holds at most one reservation that a VM of H1 holds. Were v in r1 of VM a and r2
  of VM b, a and b on H1: if a == b, v would use two of a's slots; if not, a and b, on one host,
  would use two of v's slots; rule 5 bars both. H2's slots are distinct (rules 2 and 3), so at
  most one per VM of H2 is among H1's;
* sharing: two VMs never hold the same two reservations (either would use two of the other's
  slots, rule 5), so the n(v) (n(v) - 1) / 2 pairs the VMs hold are distinct pairs of
  reservations of at least s MiB; and some pairs no VM may hold at all. Let T_H be the N_H(s)
  reservations H's VMs hold. A VM u holding two of them, r1 and r2, runs on H: were r1 held by a
  and r2 by b of H, with u elsewhere, a == b would use two of u's slots and a != b would be two
  sharers of u on one host (rule 5). So of the pairs inside T_H, VMs hold only each VM v of H's
  own n(v) (n(v) - 1) / 2, and the ``B_H`` others are barred. Two hosts' barred pairs overlap
  only inside T_H1 and T_H2, which share at most min(V_H1, V_H2) reservations, V_H being how
  many VMs H runs (a VM of H1 holds at most one of T_H2, as above). Taking the sixteen hosts
  with the most barred pairs one by one, each adds its B_H less its overlaps with those already
  taken, when that is positive: at least ``barred`` pairs are barred, and r reservations need
  r (r - 1) / 2 >= the VMs' pairs + barred. Since a plan's reservations of at least s include
  those of any larger size, the count found at a larger size is kept when this one is smaller.

Each other term only grows as s decreases, and so does ``count``. Computed in one pass over the
sizes, largest first, keeping the two largest N, D and V with their hosts and the sixteen largest
B_H: O(VMs log VMs), and 16^2 steps per size where those sixteen change; the reservations the
pairs need are found in closed form (:func:`reservations_for_pairs`), whatever the counts.

The failure bound is reported alone (``failure_memory_mb``, ``failure_reservations``): sort each
hypervisor's VMs by memory, largest first, and let m_j be the largest j-th value over the zone's
hypervisors (for VMs requiring 2 or more slots, also over the union of any two hypervisors' such
VMs). When the hypervisor (or pair) holding that maximum fails, its j largest VMs need j distinct
reservations of at least m_j. Its count at s (H's VMs, or H1's and H2's VMs requiring 2 or more)
is at most N_H(s), or N_H1(s) + D_H2(s) (each VM adds at least 1 to N_H, and each requiring 2 or
more at least 1 to D_H), so ``count`` already holds it and leaves it out.
"""
import itertools
import math

from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import required_count

__all__ = ("LowerBound", "lower_bound", "reservations_for_pairs")


class LowerBound:
    """``memory_mb`` and ``reservations`` no valid plan goes below, and the same for the failure
    bound alone (``failure_memory_mb``, ``failure_reservations``); ``counts``: per zone, how many
    reservations of at least each VM size every valid plan holds."""

    def __init__(self):
        self.memory_mb = 0
        self.reservations = 0
        self.failure_memory_mb = 0
        self.failure_reservations = 0
        self.counts = {}  # zone -> [(size, count)], largest size first

    def add_zone(self, zone, steps):
        """Add one zone: ``steps`` lists (size, count, failure count) at each size, largest first."""
        self.counts[zone] = [(size, new_count) for size, new_count, _failure in steps]
        count = failure = 0
        for size, new_count, new_failure in steps:
            self.memory_mb += (new_count - count) * size
            self.failure_memory_mb += (new_failure - failure) * size
            count, failure = new_count, new_failure
        self.reservations += count
        self.failure_reservations += failure

    def to_dict(self):
        return {"memory_mb": self.memory_mb, "reservations": self.reservations,
                "failure_memory_mb": self.failure_memory_mb,
                "failure_reservations": self.failure_reservations}


class _Leaders:
    """Per-host counters that only grow, with the ``size`` largest and their hosts at hand."""

    def __init__(self, size=2):
        self.values = {}
        self.size = size
        self.top = []  # (value, host), largest first
        self._ranked = set()  # the hosts in top

    def add(self, host, delta):
        self.raise_to(host, self.values.get(host, 0) + delta)

    def raise_to(self, host, value):
        """Set ``host``'s counter to ``value``, at least its current value."""
        self.values[host] = value
        top = self.top
        if host not in self._ranked:
            if len(top) == self.size and value <= top[-1][0]:
                return  # any other host is at most the last: values only grow
            self._ranked.add(host)
        top = [entry for entry in top if entry[1] != host]
        top.append((value, host))
        top.sort(key=lambda entry: -entry[0])
        for _value, dropped in top[self.size:]:
            self._ranked.discard(dropped)
        self.top = top[:self.size]

    def pair(self, other):
        """The largest ``self[h1] + other[h2]`` over distinct hosts (a missing host counts 0)."""
        first, second = (self.top + [(0, None)] * 2)[:2]
        other_first, other_second = (other.top + [(0, None)] * 2)[:2]
        if first[1] != other_first[1]:
            return first[0] + other_first[0]
        return max(first[0] + other_second[0], second[0] + other_first[0])


def _barred_pairs(barred, vms):
    """How many pairs of reservations no VM may hold, at least: each host among the leaders of
    ``barred`` (B_H) adds its B_H less its overlap with those counted before, if positive."""
    total = 0
    counted = []  # V_H of the hosts counted
    for value, host in barred.top:
        own = vms.values[host]
        overlap = sum(min(own, other) * (min(own, other) - 1) // 2 for other in counted)
        if value > overlap:
            total += value - overlap
            counted.append(own)
    return total


def reservations_for_pairs(pairs):
    """The fewest reservations r whose r (r - 1) / 2 pairs number at least ``pairs``, in closed
    form: (2r - 1)^2 <= 8 pairs + 1 holds for r up to (1 + isqrt(8 pairs + 1)) // 2, the most r
    with r (r - 1) / 2 <= pairs; one more when that r gives fewer. Time does not grow with the
    slots VMs require (a VM requiring n slots brings n (n - 1) / 2 pairs)."""
    if pairs <= 0:
        return 0
    most = (1 + math.isqrt(8 * pairs + 1)) // 2
    return most if most * (most - 1) // 2 >= pairs else most + 1


def _zone_steps(items):
    """(size, count, failure count) per size, largest first, of one zone's (memory, host, n)."""
    slots, spare = _Leaders(), _Leaders()  # N_H and D_H
    vms, multi = _Leaders(), _Leaders()  # V_H (the failure bound's VMs per host), and those requiring 2+
    barred = _Leaders(16)  # B_H
    own_pairs = {}
    pairs = sharing = needed_barred = 0
    ranked = None
    steps = []
    for size, group in itertools.groupby(sorted(items, key=lambda item: -item[0]),
                                         key=lambda item: item[0]):
        for _size, host, required in group:
            slots.add(host, required)
            vms.add(host, 1)
            if required >= 2:  # a one-slot VM adds nothing to D_H
                spare.add(host, required - 1)
                multi.add(host, 1)
                pairs += required * (required - 1) // 2
                own_pairs[host] = own_pairs.get(host, 0) + required * (required - 1) // 2
            held = slots.values[host]
            barred.raise_to(host, held * (held - 1) // 2 - own_pairs.get(host, 0))
        if barred.top is not ranked:  # a new list: its hosts or values changed
            ranked, needed_barred = barred.top, _barred_pairs(barred, vms)
        sharing = max(sharing, reservations_for_pairs(pairs + needed_barred))
        steps.append((size, max(slots.top[0][0], slots.pair(spare), sharing),
                      max(vms.top[0][0], multi.pair(multi))))
    return steps


def lower_bound(vms, requirements, zone_of):
    """:class:`LowerBound` of ``vms`` (model VMs) under ``requirements``; ``zone_of(vm)`` gives
    a VM's zone. VMs of unknown memory are left out."""
    zones = {}
    counts = {}  # flavor -> required count: a fleet has few flavors
    for vm in vms:
        required = counts.get(vm.flavor)
        if required is None:
            required = counts[vm.flavor] = required_count(vm.flavor, requirements)
        if required and vm.memory_mb is not None:
            zones.setdefault(zone_of(vm), []).append((vm.memory_mb, vm.host, required))
    bound = LowerBound()
    for zone in sorted(zones):
        bound.add_zone(zone, _zone_steps(zones[zone]))
    return bound
