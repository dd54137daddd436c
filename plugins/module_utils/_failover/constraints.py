# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules a reservation must keep: the five sharing constraints, traits and required counts.

The :class:`DependencyGraph` indexes who shares which slot with whom so that the five placement
constraints are checked in a few lookups, and VMs that break them leave their reservations; a
flavor's ``trait:X`` extra specs must match the host; a flavor's glob patterns say how many slots
its VMs require.
"""
import itertools

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import Removal
from ansible_collections.resilient.virt.plugins.module_utils._failover.requirements import (  # noqa: F401
    MAX_REQUIRED, check_requirements_met, required_count, validate_requirements)  # for importers

__all__ = ("DependencyGraph", "remove_ineligible", "TraitNeeds", "trait_needs", "host_satisfies",
           "validate_requirements", "required_count", "MAX_REQUIRED", "check_requirements_met")


# -- Who shares which failover slot with whom, indexed for the five placement constraints.
# For VM v with slots R (the reservations it holds):
#   1. no slot of v is on v's own host;
#   2. v's slots are on distinct hosts;
#   3. VMs sharing one reservation run on distinct hosts (follows from 4);
#   4. no other VM using a slot in R runs on v's host or on a host of R;
#   5. the other VMs using slots in R run on distinct hosts, each using one slot of R only.
#
# A "sharer pair" of v is (u, S): S in R and u another VM in S. Counting those pairs by u's host,
# 4 and 5 read: no host is v's host or a slot host, and no count exceeds 1. Per reservation the
# graph keeps its members' hosts and the reservations its members hold (``_linked``); per host, the
# reservations placed on it and those with a member running on it. Linking costs O(slots^2) and
# asking whether a VM may join a reservation a few lookups, whatever the reservation's size.

_NO_RESERVATIONS = frozenset()  # what reservations_of gives for a VM the graph does not know


def _bump(counts, key, delta):
    value = counts.get(key, 0) + delta
    if value:
        counts[key] = value
    else:
        del counts[key]


class DependencyGraph:
    """VM <-> reservation relations with the hosts involved; mutate with link/unlink."""

    def __init__(self):
        self._res_host = {}
        self._members = {}
        self._vm_res = {}
        self._vm_host = {}
        self._slot_hosts = {}
        self._member_hosts = {}
        self._crowded = {}  # reservation -> how many hosts run two or more of its members
        self._linked = {}
        self._placed_on = {}
        self._running_on = {}

    @classmethod
    def from_reservations(cls, reservations, vm_hosts=None):
        """Graph of ``reservations``; a VM's host comes from ``vm_hosts`` or its allocations.

        A VM not in ``vm_hosts`` whose allocations disagree on its host gets no known host and
        is never eligible.
        """
        graph = cls()
        seen = {}
        for res in reservations:
            for uuid, host in res.allocations.items():
                seen.setdefault(uuid, set()).add(host)
        for uuid, hosts in seen.items():
            if vm_hosts and uuid in vm_hosts:
                graph.add_vm(uuid, vm_hosts[uuid])
            else:
                graph.add_vm(uuid, next(iter(hosts)) if len(hosts) == 1 else None)
        for res in reservations:
            graph.add_reservation(res.name, res.host)
            for uuid in res.allocations:
                graph.link(uuid, res.name)
        return graph

    # -- structure -------------------------------------------------------------------------

    def add_vm(self, uuid, host):
        """Register a VM and the host it runs on (None: unknown); a known VM is moved there."""
        if uuid not in self._vm_host:
            self._vm_host[uuid] = host
            self._vm_res[uuid] = set()
            self._slot_hosts[uuid] = {}
        elif self._vm_host[uuid] != host:
            held = sorted(self._vm_res[uuid], key=repr)
            for name in held:
                self.unlink(uuid, name)
            self._vm_host[uuid] = host
            for name in held:
                self.link(uuid, name)

    def add_reservation(self, name, host):
        if name not in self._res_host:
            self._res_host[name] = host
            self._members[name] = set()
            self._member_hosts[name] = {}
            self._crowded[name] = 0
            self._linked[name] = {}
            self._placed_on.setdefault(host, set()).add(name)

    def remove_reservation(self, name):
        for uuid in sorted(self._members.get(name, ())):
            self.unlink(uuid, name)
        host = self._res_host.pop(name, None)
        if host is not None:
            self._placed_on[host].discard(name)
        for table in (self._members, self._member_hosts, self._crowded, self._linked):
            table.pop(name, None)

    def link(self, uuid, name):
        """Let VM ``uuid`` (registered with add_vm) use reservation ``name``."""
        if uuid not in self._members[name]:
            self._change(uuid, name, 1)

    def unlink(self, uuid, name):
        """Stop VM ``uuid`` using reservation ``name``."""
        if uuid in self._members[name]:
            self._change(uuid, name, -1)

    def _change(self, uuid, name, sign):
        host = self._vm_host[uuid]
        members = self._members[name]
        slots = self._vm_res[uuid]
        if sign > 0:
            members.add(uuid)
            slots.add(name)
        else:
            members.discard(uuid)
            slots.discard(name)
        member_hosts = self._member_hosts[name]
        before = member_hosts.get(host, 0)
        _bump(member_hosts, host, sign)
        self._crowded[name] += (before + sign >= 2) - (before >= 2)
        _bump(self._running_on.setdefault(host, {}), name, sign)
        _bump(self._slot_hosts[uuid], self._res_host[name], sign)
        linked = self._linked[name]
        for held in slots:
            _bump(linked, held, sign)
            if held != name:
                _bump(self._linked[held], name, sign)
        if sign < 0:
            _bump(linked, name, sign)

    # -- queries -----------------------------------------------------------------------------

    def host_of(self, uuid):
        return self._vm_host.get(uuid)

    def reservations_of(self, uuid):
        """The reservations VM ``uuid`` holds (the graph's own set: read it, do not change it)."""
        return self._vm_res.get(uuid, _NO_RESERVATIONS)

    def slot_hosts(self, uuid):
        """The hosts of the reservations VM ``uuid`` holds."""
        return self._slot_hosts.get(uuid, {}).keys()

    def members(self, name):
        return self._members.get(name, set())

    def hosts_at(self, name):
        """The hosts running VMs that use reservation ``name``, and the host it is placed on."""
        return self._member_hosts[name].keys() | {self._res_host[name]}

    def pairs_closed(self, host, name):
        """How many pairs of reservations a VM on ``host`` closes by joining ``name``.

        A pair (``name``, x) closes when ``host`` already runs a VM using x or holds x, and no
        host did so for both before: a VM holding ``name`` and x would then have two sharers
        on ``host``, or a sharer on a slot host (rules 4 and 5), so no VM requiring two slots
        may take that pair any more. Pairs a host already closed cost nothing more.
        """
        at = self.hosts_at(name)
        closed = 0
        for other in itertools.chain(self._running_on.get(host, ()), self._placed_on.get(host, ())):
            # no host at both: as hosts_at(other).isdisjoint(at), without building that set
            if other != name and self._res_host[other] not in at and \
                    at.isdisjoint(self._member_hosts[other]):
                closed += 1
        return closed

    def vm_ok(self, uuid):
        """True when VM ``uuid`` meets constraints 1-5 as the graph stands.

        Its sharer pairs run on distinct hosts, none its own or a slot host, and none unknown:
        in each of its reservations no host runs two members (so none runs with it on its host),
        no member runs on a slot host, and two of its reservations share no member
        host but its own.
        """
        host = self._vm_host.get(uuid)
        if host is None:
            return False
        slots = self._slot_hosts[uuid]
        held = self._vm_res[uuid]
        if host in slots or len(slots) < len(held):
            return False
        seen = []
        for name in held:
            member_hosts = self._member_hosts[name]
            # it is a member of ``name``: its host counts 1, or 2 and more when crowded
            if self._crowded[name] or None in member_hosts or not member_hosts.keys().isdisjoint(slots.keys()):
                return False
            for other in seen:
                if len(member_hosts.keys() & other.keys()) > 1:
                    return False
            seen.append(member_hosts)
        return True

    def can_join(self, uuid, name):
        """Fast check that VM ``uuid`` may join ``name``, given every VM now meets 1-5 (the
        checks that fail most often first)."""
        host = self._vm_host.get(uuid)
        if host is None or uuid in self._members[name]:
            return False
        member_hosts = self._member_hosts[name]
        if host in member_hosts:
            return False
        linked = self._linked[name].keys()
        if not linked.isdisjoint(self._running_on.get(host, ())) or \
                not linked.isdisjoint(self._placed_on.get(host, ())):
            return False
        if not self.new_slot_allowed(uuid, self._res_host[name]):
            return False
        for held in self._vm_res[uuid]:
            if not member_hosts.keys().isdisjoint(self._member_hosts[held]):
                return False
        return member_hosts.keys().isdisjoint(self._slot_hosts[uuid])

    def new_slot_allowed(self, uuid, host):
        """True when VM ``uuid`` may take a slot on ``host`` as far as its own slots and
        sharers go: not its host, not a slot host, no sharer running there."""
        own = self._vm_host.get(uuid)
        if own is None or host == own or host in self._slot_hosts[uuid]:
            return False
        running = self._running_on.get(host)
        return running is None or running.keys().isdisjoint(self._vm_res[uuid])


# -- VMs that no longer meet constraints 1-5 (see DependencyGraph) leave their reservations.

INELIGIBLE = "VM no longer meets the failover constraints"


def remove_ineligible(graph, order, vm_hosts):
    """Unlink VMs that break constraints 1-5, visiting reservations in ``order`` and members by
    uuid; each removal takes effect at once. VMs without a host in ``vm_hosts`` are left alone;
    a VM whose host there differs from the graph's is removed. Returns the removals."""
    passed = set()
    out = []
    for name in order:
        for uuid in sorted(graph.members(name)):
            current = vm_hosts.get(uuid)
            if current is None or uuid in passed:
                continue
            recorded = graph.host_of(uuid)
            if current == recorded and graph.vm_ok(uuid):
                passed.add(uuid)
                continue
            graph.unlink(uuid, name)
            if current == recorded:
                why = INELIGIBLE
            elif recorded is None:
                why = "the VM's allocations disagree on its host"
            else:
                why = "VM runs on %s, not on recorded %s" % (current, recorded)
            out.append(Removal(name, uuid, recorded if recorded is not None else current, why))
    return out


# -- Flavor trait requirements (``trait:X=required|forbidden``) against a host's traits.

class TraitNeeds(tuple):
    """(required, forbidden) frozensets of trait names."""

    __slots__ = ()

    @property
    def required(self):
        return self[0]

    @property
    def forbidden(self):
        return self[1]


_NO_TRAIT_NEEDS = TraitNeeds((frozenset(), frozenset()))


def trait_needs(extra_specs):
    """Read ``trait:NAME`` extra specs; values other than required/forbidden are ignored."""
    if not extra_specs:
        return _NO_TRAIT_NEEDS  # most VMs: one value for all of them
    required, forbidden = set(), set()
    for key, value in extra_specs.items():
        if not key.startswith("trait:") or not isinstance(value, str):
            continue
        name, value = key[len("trait:"):], value.strip().lower()
        if value == "required":
            required.add(name)
        elif value == "forbidden":
            forbidden.add(name)
    return TraitNeeds((frozenset(required), frozenset(forbidden)))


def host_satisfies(host_traits, needs):
    """True when the host has every required trait and none of the forbidden ones."""
    return needs.required <= host_traits and not (needs.forbidden & host_traits)
