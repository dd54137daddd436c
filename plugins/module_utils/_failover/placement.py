"""Choosing the hypervisor for a new reservation, and explaining when none qualifies."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.traits import host_satisfies

__all__ = ("HostPicker",)


class HostPicker:
    """Picks, per zone, the hypervisor with the most free memory (then cpu, then name) that is
    not the VM's host, has the traits, has room for the VM, keeps constraints 1-5, and - with
    ``one_per_host`` - got no other new reservation this cycle."""

    def __init__(self, hypervisors, ledger, graph, one_per_host):
        self._ledger = ledger
        self._graph = graph
        self._one_per_host = one_per_host
        self._zones = {}
        for hv in sorted(hypervisors, key=lambda h: h.name):
            self._zones.setdefault(hv.az, []).append(hv)
        self._closed = set()

    def pick(self, vm, az, needs):
        """Name of the best hypervisor, or None."""
        best, best_room = None, None
        cpu, mem = vm.vcpus or 0, vm.memory_mb or 0
        for hv in self._zones.get(az, ()):
            if hv.name == vm.host or hv.name in self._closed or not host_satisfies(hv.traits, needs):
                continue
            free_cpu, free_mem = self._ledger.free(hv.name)
            if free_cpu < cpu or free_mem < mem:
                continue
            if (best_room is None or (free_mem, free_cpu) > best_room) \
                    and self._graph.new_slot_allowed(vm.uuid, hv.name):
                best, best_room = hv.name, (free_mem, free_cpu)
        return best

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
