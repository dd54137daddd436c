"""The settled plan against the plain greedy on fleets of other shapes than the bench's: VMs of
one-slot and two-slot flavors drawn from the same sizes, in two or three zones, hypervisors under
half full, and on some fleets a trait that the two-slot VMs require and the others forbid.

Each example settles in a few cycles and stops at the first that changes nothing: a plan that
grows along its target no longer moves afterwards, the moves that took up to 20 cycles and
made the test last minutes. GREEDY_SHAPES_EXAMPLES runs more examples than the 60 of a unit
run (300 found nothing)."""
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM, Hypervisor
from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import run_cycle
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import (
    FailoverSettings)

from .oracle import guarantee_breaches
from .test_packing import no_worse_than, plain_greedy
from .test_properties import NOW, PROFILE, constraint_violations

REQUIREMENTS = {"hana_*": 2, "*": 1}
GIB = 1024


@st.composite
def shaped_fleets(draw):
    """(hypervisors, vms): 4 to 10 hypervisors of 128 to 256 GiB in 2 or 3 zones, 4 to 24 VMs
    of 2 to 64 GiB and 1 to 16 vCPUs, none placed past half a hypervisor's memory, 15 to 30 %
    of them two-slot (hana_*); with ``traits``, every third hypervisor has trait X, which the
    two-slot VMs require and the others forbid."""
    zones = ["az-%d" % i for i in range(draw(st.integers(2, 3)))]
    traits = draw(st.booleans())
    hosts = [("h%02d" % i, zones[i % len(zones)], draw(st.integers(128, 256)) * GIB,
              traits and i % 3 < 1) for i in range(draw(st.integers(4, 10)))]
    share = draw(st.integers(15, 30)) / 100
    used = {name: [0, 0] for name, *_rest in hosts}
    vms = []
    for index in range(draw(st.integers(4, 24))):
        two = draw(st.floats(0, 1)) < share
        memory, cpu = draw(st.integers(2, 64)) * GIB, draw(st.integers(1, 16))
        room = [h for h in hosts if (h[3] == two or not traits)
                and used[h[0]][1] + memory <= h[2] // 2]
        if not room:
            continue
        name, zone, _memory, _trait = room[draw(st.integers(0, len(room) - 1))]
        used[name][0] += cpu
        used[name][1] += memory
        specs = {"trait:X": "required" if two else "forbidden"} if traits else {}
        vms.append(VM("vm-%02d" % index, name, zone, "hana_m" if two else "web", cpu, memory,
                      specs))
    hypervisors = [Hypervisor(name, zone, 128, memory, frozenset(["X"]) if trait else frozenset(),
                              used[name][0], used[name][1]) for name, zone, memory, trait in hosts]
    return hypervisors, vms


def _settle(hypervisors, vms, most=20):
    options = FailoverSettings(requirements=dict(REQUIREMENTS))
    reservations, result = [], None
    for cycle in range(most):
        result = run_cycle(hypervisors, vms, reservations, options, now=NOW + 60 * cycle,
                           cycle=cycle)
        reservations = result.reservations
        if not result.changed_anything:
            break
    return result


@settings(**dict(PROFILE, max_examples=int(os.environ.get("GREEDY_SHAPES_EXAMPLES", 60))))
@given(shaped_fleets())
def test_the_settled_plan_is_never_worse_than_the_plain_greedy(fleet):
    """Settled over cycles under the one-new-per-hypervisor limit (the greedy has none), the plan
    leaves fewer slots missing than the greedy, or as many holding no more memory and no more
    reservations; and it keeps the guarantee."""
    hypervisors, vms = fleet
    result = _settle(hypervisors, vms)
    assert not result.changed_anything
    greedy = plain_greedy(hypervisors, vms, REQUIREMENTS)
    assert no_worse_than(result, greedy), (result.summary, greedy)
    assert constraint_violations(result.reservations, {vm.uuid: vm.host for vm in vms}) == []
    held = {s.uuid: min(s.held, s.required) for s in result.vm_status}
    assert guarantee_breaches([hv.name for hv in hypervisors], vms, result.reservations,
                              {vm.uuid: held.get(vm.uuid, 0) for vm in vms}) == []
