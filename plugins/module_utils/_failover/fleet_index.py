# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every plan of one cycle reads of the fleet alone, derived once per cycle and shared by
its plans (reconcile.plan_cycle builds a CycleState on it for each): a cycle plans the same fleet
up to three times (packing the plan, then packing and the plain greedy from nothing for the
target), so what depends on the fleet only is not derived again for each."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    required_count, trait_needs)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import sizes_by_host
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error


def unique(items, key, what):
    """{``key`` of each item: item}; a field error naming the second of two items with one
    ``key`` (``what``: the input's name)."""
    seen = {}
    for index, item in enumerate(items):
        name = getattr(item, key)
        if name in seen:
            raise field_error("%s[%d].%s" % (what, index, key), "%r is used twice (also at index %d); "
                              "every %s must be unique" % (name, seen[name], key))
        seen[name] = index
    return {getattr(item, key): item for item in items}


class FleetIndex:
    """The fleet of a cycle, indexed; read it, never change it (its plans share it).

    ``hv`` and ``vms`` by name; ``hosts``: VM -> the host it runs on (``running``, then the
    VMs' own); per VM the slots it ``required`` (by ``requirements``), whether it requires two
    or more (``multi``), its ``trait_needs`` and its ``zone`` (its own, else its hypervisor's);
    ``multi_on_host``: hypervisor -> how many of its VMs require two or more; ``by_size``: the
    VMs by memory (largest first), then uuid, the order a cycle serves them in; ``vm_use``: the
    (cpu, memory_mb) the VMs listed on each hypervisor use (slots.CapacityLedger);
    ``trait_hosts``: (zone, trait needs) -> the hypervisors there with those traits, filled as
    asked (joining.hosts_left)."""

    def __init__(self, hypervisors, vms, requirements, running):
        self.hv = unique(hypervisors, "name", "hypervisors")
        self.vms = unique(vms, "uuid", "vms")
        self.hosts = dict(running)
        self.hosts.update((uuid, vm.host) for uuid, vm in self.vms.items())
        self.required = {uuid: required_count(vm.flavor, requirements)
                         for uuid, vm in self.vms.items()}
        self.multi = {uuid: count > 1 for uuid, count in self.required.items()}
        self.multi_on_host = {}
        for uuid, vm in self.vms.items():
            if self.multi[uuid]:
                self.multi_on_host[vm.host] = self.multi_on_host.get(vm.host, 0) + 1
        self.trait_needs = {uuid: trait_needs(vm.extra_specs) for uuid, vm in self.vms.items()}
        self.zone = {uuid: vm.az or getattr(self.hv.get(vm.host), "az", "")
                     for uuid, vm in self.vms.items()}
        self.by_size = sorted(self.vms, key=lambda uuid: (-(self.vms[uuid].memory_mb or 0), uuid))
        self.vm_use = sizes_by_host(vms)
        self.trait_hosts = {}
