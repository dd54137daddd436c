#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: failover_reservation
short_description: Hold spare capacity so VMs survive hypervisor failures, and evacuate failed hosts
version_added: 0.1.0
description:
  - Plans failover reservations, spare capacity slots on other hypervisors, so that every VM whose
    flavor requires N slots can be restarted elsewhere when up to N hypervisors fail. Slots are
    shared between VMs only when that stays safe (no two VMs of one hypervisor share a slot, a VM's
    slots are on distinct hypervisors, and the other rules in the documentation).
  - O(state=present) runs one reconcile cycle - drop allocations of VMs that are gone or moved,
    drop VMs no longer eligible, revalidate old reservations, delete empty ones, then give each VM
    that is short its slots, reusing shared reservations first (the smallest that fits, growing one
    where its hypervisor has room before opening a new one) - and stores the result in the state
    store. A cycle that gives no VM a slot packs the plan - moves VMs out of the least used
    reservations into others (a VM holding two slots may move both) and deletes the emptied
    ones, at most O(max_changes) moves - and every cycle shrinks a reservation to the largest
    VM it serves. In such a cycle, a zone whose plan built from nothing would hold at least 10%
    less memory moves towards that plan, VM by VM with all its slots, within the same
    O(max_changes) and the one-new-per-hypervisor limit, where its hypervisors have room; the
    zone holds more on the way, for a few cycles.
  - The result reports the least capacity any valid plan must hold (C(summary.lower_bound_memory_mb))
    and what the plan holds against it.
  - O(state=absent) removes every reservation of O(creator).
  - O(state=evacuated) maps every VM on O(failed_hosts) to one of its own reservations on a
    surviving hypervisor (no reservation used twice) and, unless in check mode or O(execute=false),
    moves it there (vSphere - relocate, or, off a host vCenter reports disconnected, register the
    VM again from its datastore on the target; Proxmox VE - migrate, or, off an offline node,
    recover it through PVE's HA manager; libvirt - define and start the recorded definition on the
    target, for VMs without local disks; a VM with local disks opted in with
    O(restore_from_backup) is restored from its last completed backup instead).
  - The fleet comes from providers (O(provider) or O(all_providers)) or is given with O(hypervisors) and O(vms).
author:
  - resilient.virt developers (!UNKNOWN)
options:
  state:
    description:
      - V(present) reconciles, V(absent) removes this creator's reservations, V(evacuated)
        evacuates O(failed_hosts).
    type: str
    choices: [present, absent, evacuated]
    default: present
  creator:
    description:
      - Owner of the reservations; each creator's reservations are reconciled and removed independently.
      - At most 255 characters, without control, invisible or direction-changing characters;
        checked before the state store is read.
    type: str
    default: resilient.virt
  requirements:
    description:
      - Flavor name glob pattern to the number of slots a VM of that flavor needs; the highest
        matching count wins, a VM with an empty flavor needs none, C(*) does not match C(/).
      - VMs listed from providers take their flavor from their metadata key C(flavor).
      - A count is a whole number from V(0) to V(100) (the hypervisor failures a VM survives).
        A count that a VM of the fleet could never hold - more slots than the fleet has
        hypervisors besides the VM's own, since a VM's slots are on distinct hypervisors other
        than its own - fails the task with C(InvalidSpec) naming the pattern
        (C(requirements['web'])), before anything is stored. A VM whose zone, or whose traits,
        leave fewer hypervisors than it requires is planned short instead, its C(why) in
        RV(vm_status) saying so.
    type: dict
  max_vms_to_process:
    description:
      - VMs given slots per cycle at most, in a window that moves every cycle (V(0) - all).
      - From V(0) to V(10000000).
    type: int
    default: 0
  revalidation_interval:
    description: Age after which a reservation is checked again (each VM must still fit on its host).
    type: raw
    default: 30m
  limit_one_new_per_hypervisor:
    description:
      - Create at most one new reservation per hypervisor per cycle.
      - Once this limit leaves a VM that requires two or more slots short (a hypervisor that
        already got a new reservation this cycle would otherwise take one for it), the VMs after
        it that require two or more slots - none larger, in its zone, with the same trait needs -
        wait for the next cycle, and RV(vm_status) says so. They would otherwise take the
        reservations built for the larger VMs, which then need more of their own. One-slot VMs
        never wait. The plain greedy plan, computed beside the packing one, does not wait; the
        cheaper plan is kept.
    type: bool
    default: true
  max_changes:
    description:
      - Slots a cycle may move from one reservation to another to pack the plan, or to move it
        towards the plan built from nothing (V(0) - none); at most V(10000000).
      - A move records the VM in its new reservation in the same store write that takes it out
        of the old one, so no VM is ever left with fewer slots; a large plan is packed over a few cycles.
    type: int
    default: 500
    version_added: 0.2.0
  vm_status:
    description:
      - Which VMs RV(vm_status) lists - V(short), those short of their slots (a fleet of
        thousands of VMs gives a result of the ones that need attention), or V(all).
    type: str
    choices: [short, all]
    default: short
    version_added: 0.2.0
  all_providers:
    description: List the fleet from every entry of O(providers) instead of O(provider).
    type: bool
    default: false
  hypervisors:
    description:
      - The hypervisors, instead of listing them from providers - C(name), C(az), C(cpu),
        C(memory_mb), C(traits), and optionally C(used_cpu) and C(used_memory_mb).
    type: list
    elements: dict
  vms:
    description:
      - The VMs, instead of listing them from providers - C(uuid), C(host), C(az), C(flavor),
        C(vcpus), C(memory_mb), C(extra_specs) (C(trait:X=required) or C(forbidden)).
      - Each VM's C(host) must be one of O(hypervisors).
    type: list
    elements: dict
  failed_hosts:
    description:
      - Hypervisors that failed, for O(state=evacuated).
      - Each must be a hypervisor of the fleet (given, recorded at the last cycle, holding a
        reservation, or marked fenced by M(resilient.virt.hypervisor)); an unknown name fails the
        task rather than report a complete evacuation of nothing.
    type: list
    elements: str
  priorities:
    description:
      - With O(state=evacuated), the order the VMs move in - C(match), a VM name glob pattern
        (globbing as in O(requirements); a VM whose name is not known is matched by its uuid),
        and C(priority), a whole number; the highest matching priority is the VM's, V(0) when
        none matches.
      - VMs are placed and started highest priority first (then largest memory first); when
        not all of them find a reservation, a VM of higher priority is never left unplaced
        for one of lower priority.
    type: list
    elements: dict
    version_added: 0.4.0
  restore_from_backup:
    description:
      - With O(state=evacuated), the VMs to restore from their last completed backup onto their
        reservation's host when their disks were on the failed hypervisor's local storage -
        C(match), a VM name glob pattern (globbing as in O(priorities)).
      - The backup must be one the reservation's host lists itself - kept on storage it also
        sees (libvirt - C(backup_pool) naming a directory pool on shared storage); a VM without
        one is a failed move saying so. The VM comes back with the data of that backup - the
        result gives its time (C(recovery_point)) and age - keeps its name and uuid, and is
        started; a restore that fails leaves neither the VM nor its volumes on the target.
      - A VM of which the target sees some disks but not all is never restored (its disks
        would come back from different times).
      - A VM no pattern matches, with disks on local storage, is a failed move, as without
        this option.
    type: list
    elements: dict
    default: []
    version_added: 0.4.0
  execute:
    description: With O(state=evacuated), move the VMs; V(false) only returns the plan.
    type: bool
    default: true
  allow_partial:
    description:
      - With O(state=evacuated), an evacuation that leaves VMs unplaced or whose moves fail ends
        the task failed (the plan and every move are in the result). V(true) accepts a partial
        evacuation - the task ends with a warning and C(evacuation.complete=false).
    type: bool
    default: false
    version_added: 0.2.0
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description: Computes and returns the plan (or the evacuation plan) without writing or moving anything.
  diff_mode:
    description: Shows the reservations (host and allocations) before and after.
notes:
  - A creator's reservations are one record of the state store, so a cycle replaces them atomically
    and concurrent runs for the same creator are serialised.
  - Free capacity of a hypervisor is its capacity minus its VMs minus every failover reservation
    held on it, of any creator.
  - With O(resilience.deadline) set, planning one cycle (every strategy, order and the plan it
    may move towards) takes at most that long - counted from the start of the cycle - and a cycle
    that runs out of time fails the task with C(Timeout) naming the deadline, storing nothing;
    the reservations stay as the last cycle left them. Unset, planning has no time limit.
seealso:
  - module: resilient.virt.vm_info
"""

EXAMPLES = r"""
# Assumes providers hv1, hv2 (libvirt) and vc (vSphere) in module_defaults, as in resilient.virt.vm's examples.
- name: Plan reservations for every VM of every provider
  resilient.virt.failover_reservation:
    all_providers: true
    requirements:
      "hana_*": 2
      "*": 1
  register: plan

- name: Say how much of the reserved capacity the guarantee needs
  ansible.builtin.debug:
    msg: >-
      {{ plan.summary.reserved_memory_mb }} MiB reserved,
      {{ plan.summary.memory_vs_lower_bound }}x the least any valid plan can hold

- name: Plan for an explicit fleet, without writing (check mode)
  resilient.virt.failover_reservation:
    creator: capacity-team
    requirements: {"*": 1}
    hypervisors:
      - {name: kvm1, az: az1, cpu: 32, memory_mb: 262144}
      - {name: kvm2, az: az1, cpu: 32, memory_mb: 262144}
    vms:
      - {uuid: 5d3e6f1a-0b7c-4c2e-9a61-3f2d8e4b7c10, host: kvm1, az: az1, flavor: m1.large, vcpus: 4, memory_mb: 16384}
  check_mode: true

- name: Evacuate a failed hypervisor onto the reservations
  resilient.virt.failover_reservation:
    all_providers: true
    state: evacuated
    failed_hosts: [hv2]

- name: Move what can be moved off two failed hypervisors, and report the rest
  resilient.virt.failover_reservation:
    all_providers: true
    state: evacuated
    failed_hosts: [hv1, hv2]
    allow_partial: true
  register: evacuation

- name: Evacuate hv2, bringing the databases on its local disks back from their last backups
  resilient.virt.failover_reservation:
    all_providers: true
    state: evacuated
    failed_hosts: [hv2]
    restore_from_backup:
      - match: "db-*"
  register: evacuation

- name: Say how old the data of each restored VM is
  ansible.builtin.debug:
    msg: "{{ item.name }}: data of {{ item.recovery_point }} ({{ item.recovery_point_age_seconds }} s old)"
  loop: "{{ evacuation.evacuation.moves | selectattr('action', 'equalto', 'restore') | list }}"

- name: Drop all reservations of a creator
  resilient.virt.failover_reservation:
    creator: capacity-team
    state: absent
"""

RETURN = r"""
reservations:
  description: This creator's reservations after the task (planned ones in check mode).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Availability zone plus a unique suffix.
      type: str
    host:
      description: Hypervisor the slot is on.
      type: str
    az:
      description: Availability zone.
      type: str
    resources:
      description: C(cpu) and C(memory_mb) held.
      type: dict
    allocations:
      description: VM UUID to the host that VM ran on when it was added.
      type: dict
    creator:
      description: Owner.
      type: str
    last_changed:
      description: When allocations last changed (RFC 3339).
      type: str
    acknowledged_at:
      description: When the reservation was last validated (RFC 3339).
      type: str
    conditions:
      description: C(Ready) condition, with a reason when invalid.
      type: list
      elements: dict
summary:
  description:
    - The cycle in numbers - created, reused, moved (slots moved by packing), resized (reservations
      shrunk to their largest VM), allocations_removed, deleted, acknowledged, reservations,
      vms_requiring, vms_covered, coverage_ratio, slots_missing, vms_processed, vms_deferred,
      reserved_cpu, reserved_memory_mb.
    - The least any valid plan holds for these VMs - lower_bound_memory_mb and
      lower_bound_reservations (per zone and VM size, the most of - the slots one hypervisor's VMs
      require; one hypervisor's slots plus another's less one per VM; the reservations that give
      every VM's pairs of slots distinct pairs, since two VMs never share two slots, and leave
      apart the pairs no VM may hold, two slots of one hypervisor's VMs other than one VM's own),
      failure_bound_memory_mb and failure_bound_reservations (from failures alone, never more) -
      and memory_vs_lower_bound and reservations_vs_lower_bound, what the plan holds divided by
      them (null when nothing needs a slot).
  returned: when O(state=present)
  type: dict
vm_status:
  description:
    - Per VM - uuid, host, az, flavor, required, held, short_by and why it is short; only the VMs
      that are short unless O(vm_status=all). C(summary) counts them all.
  returned: when O(state=present)
  type: list
  elements: dict
deleted:
  description: Reservations the cycle deleted, with the reason (Empty, InvalidResources, HostNotFound, VMDoesNotFit).
  returned: when O(state=present)
  type: list
  elements: dict
removed:
  description: Names of the reservations removed by O(state=absent).
  returned: when O(state=absent)
  type: list
  elements: str
native_capacity:
  description:
    - Where a provider's backend holds failover capacity natively (the optional
      C(resilient_virt_hold_capacity) hook), the reservations it now holds (C(held)), released
      (C(released)), and C(errors) (such a reservation stays tracked by the collection, with a warning).
  returned: when a backend held or released capacity
  type: dict
evacuation:
  description:
    - The evacuation plan - failed_hosts, complete, affected, placed, moves (vm, from_host,
      reservation, to_host, priority, name when known and, when executed, action and error), in
      the order they are carried out, and unplaced (vm, host, priority, name when known, reason).
  returned: when O(state=evacuated)
  type: dict
  contains:
    moves:
      description: The moves, in the order they are carried out.
      type: list
      elements: dict
      contains:
        action:
          description:
            - What the move did (or, in check mode, would do) - V(recover) (off a host the
              provider reports disconnected, started on the target host the platform's way,
              see docs/ha.md),
              V(migrate), V(recreate),
              V(restore) (from the last completed backup, O(restore_from_backup)), V(none)
              (the VM already runs on its target) or V(failed) (with C(error)).
          type: str
        backup:
          description: The backup restored (its record name), when C(action=restore).
          type: str
        recovery_point:
          description:
            - When C(action=restore), when the restored backup was made (RFC 3339 UTC) - the
              VM's data is as it was then.
          type: str
          sample: "2026-11-29T15:00:00Z"
        recovery_point_age_seconds:
          description:
            - When C(action=restore), how old that data was when the restore was made (in
              check mode, when it was planned), in whole seconds.
          type: int
ansible_facts:
  description: Facts for the fact cache and AWX.
  returned: success, unless the state store could not be read
  type: dict
  contains:
    resilient_virt_breakers:
      description:
        - Every circuit breaker of the state store by name (C(<type>:<name>)), in short form, not only
          those of the providers this task used; see M(resilient.virt.circuit_breaker).
      type: dict
      contains:
        state:
          description: V(closed), V(open) or V(half_open).
          type: str
        consecutive_failures:
          description: Failures in a row in the current episode.
          type: int
        half_open_at:
          description: When an open breaker lets a probe through (RFC 3339, UTC), or null.
          type: str
        last_error:
          description: The last failure that counted against it (C(type), C(message)), or null.
          type: dict
diff:
  description: The reservations before and after, with C(--diff), when the task changed them.
  returned: when changed and in diff mode
  type: dict
error:
  description:
    - On failure, what failed - C(type) (one of the error taxonomy, such as V(InvalidSpec),
      V(Unavailable), V(BreakerOpen) or V(MissingLibrary)), C(retryable), C(retry_after) (seconds,
      or null) and C(details). The message is in C(msg), once.
  returned: failure
  type: dict
  sample: {"type": "Unavailable", "retryable": true, "retry_after": null, "details": {"attempts": 3}}
resilience_spans:
  description:
    - Each provider call of the task, for the traces of the callback plugin
      P(resilient.virt.resilience_summary#callback), which asks for them with its C(traces) option
      (it sets C(RESILIENT_VIRT_RECORD_SPANS=true)); see docs/observability.md.
    - Calls beyond the first 200 are only counted, in RV(resilience_spans.dropped).
  returned: when the task's environment sets C(RESILIENT_VIRT_RECORD_SPANS=true)
  type: dict
  contains:
    spans:
      description:
        - One dict per call - C(provider) (its key), C(operation), C(outcome) (C(ok) or the error
          type), C(start) and C(end) (nanoseconds since the epoch), C(timeout), C(attempts),
          C(retries), C(backoff_seconds), C(rate_limit_waits), C(rate_limit_seconds), C(refused),
          C(breaker_state) - and its C(events) (attempts, waits, breaker refusal and changes of
          state) as C([name, time, attributes]). No message, argument or URL.
      type: list
      elements: dict
    dropped:
      description: Calls left out beyond the first 200.
      type: int
resilience:
  description:
    - What the resilience layer did during the task, by provider key (C(<type>:<name>)), counted
      for failed tasks too; the callback plugin P(resilient.virt.resilience_summary#callback) adds
      them up for a play. Empty when the task called no provider.
    - Keys beyond the first 100 (sorted) are added up under C((others)).
  returned: always, except when Ansible itself refused the arguments
  type: dict
  sample: {"libvirt:hv1": {"calls": 2, "attempts": 4, "retries": 2, "backoff_seconds": 1.52,
           "rate_limit_waits": 0, "rate_limit_seconds": 0.0, "failures": 3, "refused": 1,
           "failed_calls": 2, "transitions": [{"from": "closed", "to": "open", "count": 1}]}}
  contains:
    calls:
      description: Calls made to the provider; each may make several attempts.
      type: int
    attempts:
      description: Attempts that reached the provider (its operation, or the look before a retry).
      type: int
    retries:
      description: Waits between two attempts of a call.
      type: int
    backoff_seconds:
      description: Seconds spent in those waits.
      type: float
    rate_limit_waits:
      description: Attempts that waited for their turn at the provider's rate limit.
      type: int
    rate_limit_seconds:
      description: Seconds spent waiting for the rate limit.
      type: float
    failures:
      description: Attempts the circuit breaker counted as failures (the provider unreachable or too slow).
      type: int
    refused:
      description: Calls refused at once because the provider's circuit breaker was open.
      type: int
    failed_calls:
      description: Calls that got no answer from the provider (unreachable or too slow after every
        attempt, refused by the breaker); an answer such as V(NotFound) is not counted.
      type: int
    transitions:
      description: Changes of the circuit breaker's state that this task made (C(from), C(to),
        C(count)), in the order first seen; states are V(closed), V(open) and V(half_open).
      type: list
      elements: dict
    operations:
      description:
        - Per provider operation (such as C(describe)) - C(outcomes), calls by how they ended
          (V(ok) or the error type), C(buckets), calls by duration in the bins of the
          C(resilient_virt_provider_call_duration_seconds) histogram (non-cumulative, the last for
          calls longer than 600 s), C(seconds), their total, and C(timeout), the time limit of
          one attempt. See docs/observability.md.
      type: dict
"""

from ansible_collections.resilient.virt.plugins.module_utils._failover.task import run_failover_reservation
from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule


class FailoverReservationModule(ResilientModule):
    argument_spec = dict(
        state=dict(type="str", default="present", choices=["present", "absent", "evacuated"]),
        creator=dict(type="str", default="resilient.virt"),
        requirements=dict(type="dict"),
        max_vms_to_process=dict(type="int", default=0),
        revalidation_interval=dict(type="raw", default="30m"),
        limit_one_new_per_hypervisor=dict(type="bool", default=True),
        all_providers=dict(type="bool", default=False),
        hypervisors=dict(type="list", elements="dict"),
        vms=dict(type="list", elements="dict"),
        failed_hosts=dict(type="list", elements="str"),
        priorities=dict(type="list", elements="dict"),
        restore_from_backup=dict(type="list", elements="dict", default=[]),
        execute=dict(type="bool", default=True),
        allow_partial=dict(type="bool", default=False),
        max_changes=dict(type="int", default=500),
        vm_status=dict(type="str", default="short", choices=["short", "all"]),
    )
    module_kwargs = dict(
        required_if=[("state", "present", ["requirements"]), ("state", "evacuated", ["failed_hosts"])],
        required_together=[("hypervisors", "vms")],
    )

    def run(self):
        return run_failover_reservation(self.params, self.context())


def main():
    FailoverReservationModule.main()


if __name__ == "__main__":
    main()
