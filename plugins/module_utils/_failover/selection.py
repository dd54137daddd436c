"""Which VMs a cycle works on: those short of slots, largest memory first, in a rotating window."""
from typing import NamedTuple

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM

__all__ = ("Need", "select_window")


class Need(NamedTuple):
    vm: VM
    required: int
    held: int


def select_window(needs, max_vms, cycle):
    """(selected, deferred) lists of needs.

    Needs are ordered by memory (largest first), then uuid. With ``max_vms`` > 0 and more needs
    than that, the window of ``max_vms`` starts at ``cycle * max_vms`` (wrapping), so consecutive
    cycles walk the whole list and every VM is processed within ceil(len / max_vms) cycles.
    """
    ordered = sorted(needs, key=lambda n: (-(n.vm.memory_mb or 0), n.vm.uuid))
    if max_vms <= 0 or len(ordered) <= max_vms:
        return ordered, []
    start = (cycle * max_vms) % len(ordered)
    picked = set((start + i) % len(ordered) for i in range(max_vms))
    selected = [n for i, n in enumerate(ordered) if i in picked]
    deferred = [n for i, n in enumerate(ordered) if i not in picked]
    return selected, deferred
