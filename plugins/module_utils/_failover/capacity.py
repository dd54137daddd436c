"""Free room per hypervisor: capacity minus its VMs minus every failover reservation on it."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.resources import reservation_size

__all__ = ("CapacityLedger",)


class CapacityLedger:
    """Free (cpu, memory_mb) per known hypervisor, updated as reservations come and go.

    A hypervisor's ``used_*`` counts its VMs; when None, the VMs listed on it are summed.
    """

    def __init__(self, hypervisors, vms, reservations):
        vm_cpu, vm_mem = {}, {}
        for vm in vms:
            vm_cpu[vm.host] = vm_cpu.get(vm.host, 0) + (vm.vcpus or 0)
            vm_mem[vm.host] = vm_mem.get(vm.host, 0) + (vm.memory_mb or 0)
        self._free = {}
        for hv in hypervisors:
            used_cpu = hv.used_cpu if hv.used_cpu is not None else vm_cpu.get(hv.name, 0)
            used_mem = hv.used_memory_mb if hv.used_memory_mb is not None else vm_mem.get(hv.name, 0)
            self._free[hv.name] = [hv.cpu - used_cpu, hv.memory_mb - used_mem]
        for res in reservations:
            self.take(res.host, *reservation_size(res.resources))

    def free(self, host):
        """(cpu, memory_mb) still free on ``host``; None for an unknown host."""
        room = self._free.get(host)
        return None if room is None else (room[0], room[1])

    def take(self, host, cpu, memory_mb):
        room = self._free.get(host)
        if room is not None:
            room[0] -= cpu
            room[1] -= memory_mb

    def give_back(self, host, cpu, memory_mb):
        self.take(host, -cpu, -memory_mb)
