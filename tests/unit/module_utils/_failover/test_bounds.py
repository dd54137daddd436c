"""The lower bound: each term on a fleet computed by hand, and never above the least plan a brute
force finds under the five rules on tiny fleets; the planner's settled plans against that least
plan."""
import functools
import itertools
import random

from ansible_collections.resilient.virt.plugins.module_utils._failover.bounds import lower_bound
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM, Hypervisor
from ansible_collections.resilient.virt.plugins.module_utils._failover import reconcile
from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import run_cycle
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import FailoverSettings

from .oracle import vm_keeps_the_rules

GIB = 1024
REQUIREMENTS = {"one": 1, "two": 2, "three": 3}


def _bound(vms):
    bound = lower_bound(vms, REQUIREMENTS, lambda vm: vm.az)
    return bound.memory_mb, bound.reservations


def _vm(uuid, host, flavor, memory_gib, zone="z"):
    return VM(uuid, host, zone, flavor, 1, memory_gib * GIB)


def test_one_hypervisor_counts_every_slot_of_its_vms():
    # two VMs of h1 requiring two slots: four distinct reservations (sharing alone says 3)
    vms = [_vm("a", "h1", "two", 16), _vm("b", "h1", "two", 16)]
    assert _bound(vms) == (4 * 16 * GIB, 4)


def test_two_hypervisors_add_all_but_one_slot_per_vm_of_the_second():
    # h1: 2 VMs requiring two slots (4 slots); h2's VM may reuse one of them only: 4 + 1 = 5
    # (sharing: 3 pairs need 3 reservations)
    vms = [_vm("a", "h1", "two", 16), _vm("b", "h1", "two", 16), _vm("c", "h2", "two", 16)]
    assert _bound(vms) == (5 * 16 * GIB, 5)


def test_sharing_counts_every_pair_of_slots_a_vm_holds():
    # four VMs requiring three slots, one per host: 3 pairs each, 12 distinct pairs need 6
    # reservations (5 give 10 pairs); one host gives 3, two hosts 3 + 2 = 5
    vms = [_vm("v%d" % i, "h%d" % i, "three", 8) for i in range(4)]
    assert _bound(vms) == (6 * 8 * GIB, 6)


def test_memory_sums_the_count_added_at_each_size():
    vms = [_vm("a", "h1", "two", 32), _vm("w", "h1", "one", 8),
           _vm("b", "h2", "two", 16), _vm("c", "h2", "two", 16), _vm("x", "h9", "one", 64, "y")]
    # zone z, at 32 GiB: h1 holds a's 2 slots; sharing: 1 pair -> 2        -> 2 of 32 GiB
    # at 16 GiB: N_h2 = 4, D_h1 = 1 -> 5; N_h1 + D_h2 = 2 + 2 = 4; 3 pairs -> 3    -> 3 more of 16
    # at 8 GiB: N_h1 = 3 (w), D unchanged -> still 5                        -> none of 8
    # zone y: x alone, 1 slot of 64 GiB
    assert _bound(vms) == (2 * 32 * GIB + 3 * 16 * GIB + 64 * GIB, 5 + 1)
    bound = lower_bound(vms, REQUIREMENTS, lambda vm: vm.az)
    # the failure bound as before: h1 [32, 8], h2 [16, 16], h1+h2 two-slot VMs [32, 16, 16]
    assert (bound.failure_memory_mb, bound.failure_reservations) == ((32 + 16 + 16 + 64) * GIB, 4)


def _failure_by_definition(fleet):
    """(memory, count) of the issue's failure bound, from its definition: per zone, m_j is the
    largest j-th size over each host's VMs and over each two hosts' VMs requiring 2 or more."""
    memory = count = 0
    for zone in {vm[4] for vm in fleet}:
        hosts = sorted({vm[1] for vm in fleet if vm[4] == zone})
        lists = [[vm[3] for vm in fleet if vm[4] == zone and vm[1] == host] for host in hosts]
        multi = [[vm[3] for vm in fleet if vm[4] == zone and vm[1] == host and vm[2] >= 2] for host in hosts]
        lists += [first + second for first, second in itertools.combinations(multi, 2)]
        lists = [sorted(sizes, reverse=True) for sizes in lists]
        m = [max(sizes[j] for sizes in lists if len(sizes) > j) for j in range(max(map(len, lists)))]
        memory += sum(m)
        count += len(m)
    return memory, count


def test_the_failure_bound_keeps_the_issues_definition():
    rng = random.Random(7)
    flavors = {1: "one", 2: "two", 3: "three"}
    for _case in range(300):
        fleet = [("v%d" % i, rng.choice("abcdef"), rng.choice((1, 1, 2, 3)), rng.choice((1, 2, 3, 8)),
                  rng.choice("yz")) for i in range(rng.randint(1, 12))]
        bound = lower_bound([_vm(*vm[:2], flavors[vm[2]], vm[3], vm[4]) for vm in fleet],
                            REQUIREMENTS, lambda vm: vm.az)
        memory, count = _failure_by_definition(fleet)
        assert (bound.failure_memory_mb, bound.failure_reservations) == (memory * GIB, count), fleet


# -- The oracle: the least plan under the five rules, by brute force over abstract reservations
# (a host and a size; capacity and traits left out, they only make plans bigger).

def _least_plan(hosts, fleet, cost):
    """The least ``cost(sizes)`` over plans giving each (name, host, required, memory) of
    ``fleet`` its slots, or None; branch and bound, VMs largest first so that a reservation's
    size is its first member's. Remembered per (hosts, fleet, cost): two tests ask it of the
    same tiny fleets."""
    return _least_plan_of(tuple(hosts), tuple(fleet), cost)


@functools.cache
def _least_plan_of(hosts, fleet, cost):
    order = sorted(fleet, key=lambda vm: -vm[3])
    host_of = {vm[0]: vm[1] for vm in fleet}
    idle = [h for h in hosts if h not in host_of.values()]  # interchangeable until one is used
    best = [None]

    def search(index, res_host, sizes, slots):
        if best[0] is not None and cost(sizes) >= best[0]:
            return
        if index == len(order):
            best[0] = cost(sizes)
            return
        name, host, required, memory = order[index]
        for reused in range(required, -1, -1):  # reuse first: cheap plans early prune more
            for old in itertools.combinations(range(len(res_host)), reused):
                taken = {res_host[res] for res in old}
                if host in taken or len(taken) != reused:
                    continue  # rules 1 and 2 already broken: skip the hosts of new slots
                free = [h for h in hosts if h != host and h not in taken]
                untouched = [h for h in idle if h not in res_host]
                for new_hosts in itertools.combinations(free, required - reused):
                    opened = [h for h in new_hosts if h in untouched]
                    if opened != untouched[:len(opened)]:
                        continue  # the same plan with idle hosts renamed
                    more_hosts = res_host + list(new_hosts)
                    more_sizes = sizes + [memory] * len(new_hosts)
                    if best[0] is not None and cost(more_sizes) >= best[0]:
                        continue
                    held = set(old) | set(range(len(res_host), len(more_hosts)))
                    plan = dict(slots, **{name: held})
                    # the VMs whose rules this step can change: this one and those holding a
                    # reservation it joins (the others kept them a level up, on the same hosts)
                    touched = [name] + [vm for vm in slots if not slots[vm].isdisjoint(old)]
                    if all(vm_keeps_the_rules(vm, host_of, more_hosts, plan) for vm in touched):
                        search(index + 1, more_hosts, more_sizes, plan)

    search(0, [], [], {})
    return best[0]


def test_the_oracle_finds_the_least_plans_counted_by_hand():
    hosts = ["h1", "h2", "h3", "h4"]
    # two VMs of h1 requiring two slots may not share (rule 3): 4 reservations on h2..h4
    assert _least_plan(hosts[:3], [("a", "h1", 2, 16), ("b", "h1", 2, 16)], len) == 4
    # and c of h2 may join one of them: a {h3, h4}, b {h3, h4}, c {a's h3, h4}
    fleet = [("a", "h1", 2, 16), ("b", "h1", 2, 16), ("c", "h2", 2, 16)]
    assert _least_plan(hosts, fleet, len) == 5 and _least_plan(hosts, fleet, sum) == 80
    # with three hosts a and b each hold a slot on h2, c's host: c joins neither (rule 4)
    assert _least_plan(hosts[:3], fleet, len) == 6
    # and a VM requiring three slots of three hosts has no plan (rules 1 and 2)
    assert _least_plan(hosts[:3], [("a", "h1", 3, 16)], len) is None


def _tiny_fleets(seed, count):
    """(hosts, fleet) pairs: 3 to 5 hosts, 2 to 5 VMs (name, host, slots required, GiB)."""
    rng = random.Random(seed)
    for _case in range(count):
        hosts = ["h%d" % i for i in range(rng.randint(3, 5))]
        yield hosts, [("v%d" % i, rng.choice(hosts), rng.choice((1, 2, 2, 3)), rng.choice((1, 2, 4)))
                      for i in range(rng.randint(2, 5))]


def test_no_plan_under_the_rules_holds_less_than_the_bound():
    checked = tight = 0
    for hosts, fleet in _tiny_fleets(17, 300):
        least_count = _least_plan(hosts, fleet, len)
        if least_count is None:
            continue  # no valid plan: any bound holds
        least_memory = _least_plan(hosts, fleet, sum)
        flavors = {1: "one", 2: "two", 3: "three"}
        memory, count = _bound([_vm(name, host, flavors[n], size) for name, host, n, size in fleet])
        assert least_count >= count and least_memory * GIB >= memory, fleet
        checked += 1
        tight += (least_memory * GIB, least_count) == (memory, count)
    assert checked >= 200 and tight >= 100  # the oracle found plans, and the bound meets some


def _without_barred_pairs(fleet):
    """The count of the three terms with no pair barred (one zone): per size, the largest of one
    host's slots, one host's slots plus another's less one per VM, and the r with r (r - 1) / 2 at
    least the VMs' pairs."""
    count = 0
    for size in sorted({vm[3] for vm in fleet}, reverse=True):
        big = [vm for vm in fleet if vm[3] >= size]
        slots = {host: sum(vm[2] for vm in big if vm[1] == host) for host in {vm[1] for vm in big}}
        spare = {host: sum(vm[2] - 1 for vm in big if vm[1] == host) for host in slots}
        pairs = sum(vm[2] * (vm[2] - 1) // 2 for vm in big)
        two = max([slots[a] + spare[b] for a in slots for b in slots if a != b], default=0)
        sharing = 0
        while sharing * (sharing - 1) // 2 < pairs:
            sharing += 1
        count = max(count, two, sharing, *slots.values())
    return count


def test_barred_pairs_raise_the_bound_and_no_plan_goes_below_it():
    """Fleets where two VMs of h0 (and of h1) hold reservations no VM may hold together, and VMs of
    other hosts need pairs: the brute force's least plan is never below the bound, and the bound
    is above the three terms without barred pairs on many."""
    rng = random.Random(5)
    flavors = {1: "one", 2: "two"}
    raised = checked = 0
    for _case in range(150):
        hosts = ["h%d" % i for i in range(rng.randint(5, 6))]
        fleet = [("v%d" % i, "h%d" % (i % 2), rng.choice((1, 1, 2)), rng.choice((1, 2, 4)))
                 for i in range(rng.choice((2, 4)))]  # h0 alone, or h0 and h1 with two each
        fleet += [("w%d" % i, host, 2, rng.choice((1, 2, 4)))
                  for i, host in enumerate(rng.sample(hosts[2:], rng.randint(1, 3)))]
        least_count = _least_plan(hosts, fleet, len)
        if least_count is None:
            continue
        memory, count = _bound([_vm(name, host, flavors[n], size) for name, host, n, size in fleet])
        assert least_count >= count and _least_plan(hosts, fleet, sum) * GIB >= memory, fleet
        checked += 1
        raised += count > _without_barred_pairs(fleet)
    assert checked >= 100 and raised >= 10  # 150 and 14 when written


def _settled(hosts, fleet):
    """The planner's plan once a cycle changes nothing, hypervisors roomy enough for any plan."""
    flavors = {1: "one", 2: "two", 3: "three"}
    vms = [_vm(name, host, flavors[n], size) for name, host, n, size in fleet]
    hypervisors = [Hypervisor(host, "z", 1000, 1000 * GIB, frozenset(), 0, 0) for host in hosts]
    reservations = []
    for cycle in range(10):
        result = run_cycle(hypervisors, vms, reservations, FailoverSettings(requirements=REQUIREMENTS),
                           now=1.8e9 + 60 * cycle, cycle=cycle)
        reservations = result.reservations
        if not result.changed_anything:
            return result
    raise AssertionError("no settled plan in 10 cycles: %r" % (fleet,))


def test_settled_plans_of_tiny_fleets_stay_near_the_least_plan():
    """Where the brute force knows the least plan, the planner gives every VM its slots and holds
    at most 1.5 times the least plan's memory and count, the least plan itself on most fleets."""
    memory_ratios, count_ratios = [], []
    for hosts, fleet in _tiny_fleets(17, 300):
        least_count = _least_plan(hosts, fleet, len)
        if least_count is None:
            continue
        result = _settled(hosts, fleet)
        assert result.summary["slots_missing"] == 0, fleet
        memory = sum(res.resources["memory_mb"] for res in result.reservations) / float(GIB)
        memory_ratios.append(memory / _least_plan(hosts, fleet, sum))
        count_ratios.append(len(result.reservations) / float(least_count))
    assert len(memory_ratios) >= 200
    assert max(memory_ratios) <= 1.5 and max(count_ratios) <= 1.5
    assert sum(r == 1 for r in memory_ratios) > len(memory_ratios) / 2
    assert sum(memory_ratios) / len(memory_ratios) <= 1.1


def test_another_order_reaches_the_least_plan_where_the_first_does_not(monkeypatch):
    """A plan built from nothing: served in uuid order among VMs of one size, the settled plan
    holds 18 GiB; planned again in other orders, the first cycle keeps one on the way to the
    brute force's least plan, 16 GiB."""
    hosts = ["h0", "h1", "h2", "h3", "h4"]
    fleet = [("v0", "h3", 1, 2), ("v1", "h1", 1, 2), ("v2", "h3", 3, 2), ("v3", "h4", 2, 2),
             ("v4", "h1", 2, 4)]
    least = _least_plan(hosts, fleet, sum)
    assert least == 16

    def held(result):
        return sum(res.resources["memory_mb"] for res in result.reservations) / float(GIB)

    result = _settled(hosts, fleet)
    assert result.summary["slots_missing"] == 0 and held(result) == least
    monkeypatch.setattr(reconcile, "ORDERS", (0, 0))
    first_order = _settled(hosts, fleet)
    assert first_order.summary["slots_missing"] == 0 and held(first_order) == 18
