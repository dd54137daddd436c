# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The least capacity any valid plan must reserve, to judge how much of a plan the guarantee needs.

Per zone, for the VMs that require slots:

* the failure bound: sort each hypervisor's VMs by memory, largest first, and let m_j be the
  largest j-th value over the zone's hypervisors (for a requirement of 2 or more, also over the
  union of any two hypervisors' VMs that require that many). When the hypervisor (or pair)
  holding that maximum fails, its j largest VMs need j distinct reservations of at least m_j:
  every plan holds, for each j, j reservations of at least m_j;
* the sharing bound: a VM may not use two of another VM's slots (constraint 5), so two VMs that
  require two slots never hold the same pair of reservations. k such VMs of at least s MiB need
  r reservations of at least s MiB with r * (r - 1) / 2 >= k.

Both count, for every size s, reservations of at least s MiB a plan must hold; the larger count
holds, and the memory bound is the sum over sizes. The count bound is the longest such list.
"""
import itertools

from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import required_count

__all__ = ("LowerBound", "lower_bound")


class LowerBound:
    """``memory_mb`` and ``reservations`` no valid plan goes below, and the same for the failure
    bound alone (``failure_memory_mb``, ``failure_reservations``)."""

    def __init__(self):
        self.memory_mb = 0
        self.reservations = 0
        self.failure_memory_mb = 0
        self.failure_reservations = 0

    def add_zone(self, failure_sizes, shared_sizes):
        """Add one zone: ``failure_sizes`` is the m_j list (largest first), ``shared_sizes`` the
        memory of the VMs that require two or more slots (largest first)."""
        self.failure_memory_mb += sum(failure_sizes)
        self.failure_reservations += len(failure_sizes)
        needed = list(failure_sizes)  # the j-th largest reservation is at least needed[j]
        reservations = 0
        for count, size in enumerate(shared_sizes, 1):
            # ``count`` VMs of at least ``size`` need r reservations that big, r (r - 1) / 2 >= count;
            # sizes come largest first, so only the reservations added here take ``size``
            while reservations * (reservations - 1) // 2 < count:
                if reservations < len(needed):
                    needed[reservations] = max(needed[reservations], size)
                else:
                    needed.append(size)
                reservations += 1
        self.memory_mb += sum(needed)
        self.reservations += len(needed)

    def to_dict(self):
        return {"memory_mb": self.memory_mb, "reservations": self.reservations,
                "failure_memory_mb": self.failure_memory_mb,
                "failure_reservations": self.failure_reservations}


def _merge_max(into, sizes):
    for j, size in enumerate(sizes):
        if j == len(into):
            into.append(size)
        elif size > into[j]:
            into[j] = size


def lower_bound(vms, requirements, zone_of):
    """:class:`LowerBound` of ``vms`` (model VMs) under ``requirements``; ``zone_of(vm)`` gives
    a VM's zone. VMs of unknown memory are left out."""
    zones = {}
    for vm in vms:
        required = required_count(vm.flavor, requirements)
        if required and vm.memory_mb is not None:
            hosts = zones.setdefault(zone_of(vm), {})
            hosts.setdefault(vm.host, []).append((vm.memory_mb, required))
    bound = LowerBound()
    for zone in sorted(zones):
        hosts = zones[zone]
        failure = []
        for items in hosts.values():
            _merge_max(failure, sorted((size for size, _n in items), reverse=True))
        multi = [sorted((size for size, n in items if n >= 2), reverse=True)
                 for items in hosts.values()]
        multi = [sizes for sizes in multi if sizes]
        for first, second in itertools.combinations(multi, 2):
            _merge_max(failure, sorted(first + second, reverse=True))
        shared = sorted((size for sizes in multi for size in sizes), reverse=True)
        bound.add_zone(failure, shared)
    return bound
