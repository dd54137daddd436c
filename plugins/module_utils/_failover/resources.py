"""Resource keys of a reservation and whether a VM fits in one."""

__all__ = ("RESOURCE_KEYS", "resource_error", "vm_fits", "reservation_size")

RESOURCE_KEYS = ("cpu", "memory_mb")


def resource_error(resources):
    """Message naming the first key other than cpu/memory_mb, or None when all keys are valid."""
    for key in sorted(resources):
        if key not in RESOURCE_KEYS:
            return "invalid resource key %r: only 'cpu' and 'memory_mb' are allowed" % (key,)
    return None


def vm_fits(vm, resources):
    """True when the VM's vcpus and memory are at most the reservation's.

    A size the VM does not state is not checked; a key the reservation lacks does not fit.
    """
    if vm.memory_mb is not None:
        held = resources.get("memory_mb")
        if held is None or vm.memory_mb > held:
            return False
    if vm.vcpus is not None:
        held = resources.get("cpu")
        if held is None or vm.vcpus > held:
            return False
    return True


def reservation_size(resources):
    """(cpu, memory_mb) a reservation blocks on its host; a missing key blocks nothing."""
    return resources.get("cpu", 0), resources.get("memory_mb", 0)
