"""Who shares which failover slot with whom, indexed for the five placement constraints.

For VM v with slots R (the reservations it holds):
  1. no slot of v is on v's own host;
  2. v's slots are on distinct hosts;
  3. VMs sharing one reservation run on distinct hosts (follows from 4);
  4. no other VM using a slot in R runs on v's host or on a host of R;
  5. the other VMs using slots in R run on distinct hosts, each using one slot of R only.

A "sharer pair" of v is (u, S): S in R and u another VM in S. Counting those pairs by u's host,
4 and 5 read: no host is v's host or a slot host, and no count exceeds 1. Per reservation the
graph keeps its members' hosts and the reservations its members hold (``_linked``); per host, the
reservations placed on it and those with a member running on it. Linking costs O(slots^2) and
asking whether a VM may join a reservation a few lookups, whatever the reservation's size.
"""

__all__ = ("DependencyGraph",)


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
            self._linked[name] = {}
            self._placed_on.setdefault(host, set()).add(name)

    def remove_reservation(self, name):
        for uuid in sorted(self._members.get(name, ())):
            self.unlink(uuid, name)
        host = self._res_host.pop(name, None)
        if host is not None:
            self._placed_on[host].discard(name)
        for table in (self._members, self._member_hosts, self._linked):
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
        _bump(self._member_hosts[name], host, sign)
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
        return self._vm_res.get(uuid, set())

    def members(self, name):
        return self._members.get(name, set())

    def vm_reservations(self):
        """{vm: sorted reservation names} for every VM holding at least one."""
        return {u: sorted(r) for u, r in self._vm_res.items() if r}

    def reservation_members(self):
        return {name: sorted(m) for name, m in self._members.items()}

    def current_hosts(self):
        """{vm: host} for every VM whose host is known."""
        return {u: h for u, h in self._vm_host.items() if h is not None and self._vm_res[u]}

    def _sharer_hosts(self, uuid):
        """{host: sharer pairs of ``uuid`` whose other VM runs there}."""
        counts = {}
        for name in self._vm_res[uuid]:
            for member in self._members[name]:
                if member != uuid:
                    host = self._vm_host[member]
                    counts[host] = counts.get(host, 0) + 1
        return counts

    def vm_ok(self, uuid):
        """True when VM ``uuid`` meets constraints 1-5 as the graph stands."""
        host = self._vm_host.get(uuid)
        if host is None:
            return False
        slots = self._slot_hosts[uuid]
        if host in slots or len(slots) < len(self._vm_res[uuid]):
            return False
        sharers = self._sharer_hosts(uuid)
        if host in sharers or None in sharers:
            return False
        for sharer_host, count in sharers.items():
            if count > 1 or sharer_host in slots:
                return False
        return True

    def reservation_ok(self, name):
        return all(self.vm_ok(uuid) for uuid in self._members.get(name, ()))

    def would_be_eligible(self, uuid, host, name):
        """Exact check: after ``uuid`` (on ``host``) joins ``name``, does every member meet 1-5?"""
        if uuid in self._members.get(name, ()):
            return False
        known = uuid in self._vm_host
        self.add_vm(uuid, host)
        self.link(uuid, name)
        ok = self.reservation_ok(name)
        self.unlink(uuid, name)
        if not known:
            self._forget_vm(uuid)
        return ok

    def _forget_vm(self, uuid):
        for table in (self._vm_host, self._vm_res, self._slot_hosts):
            table.pop(uuid, None)

    def can_join(self, uuid, name):
        """Fast check that VM ``uuid`` may join ``name``, given every VM now meets 1-5."""
        host = self._vm_host.get(uuid)
        if host is None or uuid in self._members[name]:
            return False
        member_hosts = self._member_hosts[name]
        if host in member_hosts or not self.new_slot_allowed(uuid, self._res_host[name]):
            return False
        for slot_host in self._slot_hosts[uuid]:
            if slot_host in member_hosts:
                return False
        for held in self._vm_res[uuid]:
            small, large = (self._member_hosts[held], member_hosts)
            if len(large) < len(small):
                small, large = large, small
            for other in small:
                if other in large:
                    return False
        linked = self._linked[name]
        for placed in self._placed_on.get(host, ()):
            if placed in linked:
                return False
        for shared in self._running_on.get(host, ()):
            if shared in linked:
                return False
        return True

    def new_slot_allowed(self, uuid, host):
        """True when VM ``uuid`` may take a slot on ``host`` as far as its own slots and
        sharers go: not its host, not a slot host, no sharer running there."""
        own = self._vm_host.get(uuid)
        if own is None or host == own or host in self._slot_hosts[uuid]:
            return False
        running = self._running_on.get(host, ())
        return not any(held in running for held in self._vm_res[uuid])
