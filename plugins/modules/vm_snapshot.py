#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: vm_snapshot
short_description: Take, delete and revert to snapshots of VMs, with retention and honest quiescing
version_added: 0.4.0
description:
  - Takes a snapshot of a VM (V(present)), deletes one (V(absent)) or reverts the VM to one
    (V(reverted)). A snapshot is kept beside the VM and reverted in place, quickly; it is not a
    backup, which is a copy kept elsewhere that restores on its own (M(resilient.virt.backup)).
    docs/snapshots.md says when to use which.
  - Idempotent by name - V(present) takes a snapshot only when the VM has none named O(name),
    V(absent) deletes one only when it has. A retried take looks first, so it never makes two.
    Two snapshots of one name (vSphere allows it) make the task fail with Conflict rather than
    pick one.
  - "libvirt: internal snapshots, inside the VM's qcow2 images (the kind libvirt 9.0 can revert).
    A running VM's snapshot always holds its memory (give O(memory=true)); a stopped VM's holds
    its disks. Refused with NotSupported, before anything is made: a writable disk that is not
    qcow2, a snapshot without memory of a running VM (and so a quiesced one), and a VM with
    backup checkpoints (QEMU cannot revert a disk that carries their bitmaps)."
  - "vSphere: CreateSnapshot_Task, RemoveSnapshot_Task (children keep their data) and
    RevertToSnapshot_Task, each followed to its end; the tree as vCenter keeps it."
  - "Proxmox VE: PVE's snapshot, delete and rollback tasks, followed by their UPID (O(memory) is
    PVE's C(vmstate)). PVE has no quiesce option: O(quiesce=true) is refused with NotSupported
    before anything is made, V(best_effort) takes the snapshot unquiesced and says so. A VM
    with a disk on a storage that keeps no snapshots (a raw image on a directory storage) is
    refused with NotSupported."
author:
  - resilient.virt developers (!UNKNOWN)
options:
  vm:
    description:
      - The VM, as M(resilient.virt.backup) names it (its name, or what the provider's backend
        takes for one).
    type: str
    required: true
  name:
    description:
      - The snapshot's name. libvirt refuses V(/) in it; Proxmox VE takes a letter, then at
        least one more letter, digit, V(_) or V(-) (at most 40 characters).
    type: str
    required: true
  state:
    description:
      - V(present) takes the snapshot unless the VM has one of that name, then applies the
        retention; V(absent) deletes it (its children keep their data); V(reverted) brings the
        VM back to it - its disks, and its memory and running state when the snapshot has them.
        A VM reverted to a snapshot with memory runs, to one without is stopped, whatever state
        it was in. A revert is made every time it is asked for (C(changed) is always true).
    type: str
    choices: [present, absent, reverted]
    default: present
  description:
    description:
      - Stored with a new snapshot. An existing snapshot's description is not changed (a
        warning says when it differs).
    type: str
  memory:
    description:
      - Keep the VM's running state too, so that a revert resumes it as it was. A VM that is not
        running has none - its snapshot then holds its disks only, with a warning.
      - libvirt needs V(true) for a running VM.
    type: bool
    default: false
  quiesce:
    description:
      - Freeze the guest's filesystems through its agent (VMware Tools) while a running VM's
        disks are taken, so that they hold what the guest had written. V(true) fails with the
        reason when that cannot be done (no agent, the guest refuses) and nothing is made;
        V(best_effort) then takes the snapshot unquiesced and says why in RV(not_quiesced);
        V(false) does not try.
      - A snapshot with memory is whole without it (V(true) with O(memory=true) is refused);
        a stopped VM's disks are at rest.
    type: raw
    default: false
  pinned:
    description:
      - Mark a new snapshot as never to be deleted by retention.
    type: bool
    default: false
  keep_last:
    description:
      - With V(present), after taking the snapshot, delete the VM's older snapshots made by this
        module beyond the newest O(keep_last), pinned ones not counted. Snapshots made
        otherwise (by hand, by M(resilient.virt.backup)) and pinned ones are never deleted.
      - From V(1) to V(10000); unset keeps them all.
    type: int
  max_age:
    description:
      - With V(present), delete the VM's snapshots made by this module (not pinned) that are
        older than this (seconds, or a duration such as V(7d) for a week, at most V(366d)); never
        the one O(name) names.
    type: raw
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description: Reads the VM and its snapshots, and reports what it would take, delete or revert, without doing it.
  diff_mode:
    description: Shows the VM's snapshot names and its current snapshot before and after.
notes:
  - Retention deletes oldest first. A snapshot's creation time is kept to the second by libvirt;
    two taken in the same second are ordered parent first.
  - The provider calls go through the provider's retries, rate limit, circuit breaker and time
    limits like any other call; a retried take or delete looks at the VM's snapshots first.
seealso:
  - module: resilient.virt.backup
  - module: resilient.virt.vm_info
"""

EXAMPLES = r"""
# Assumes providers hv1 (libvirt) and vc (vSphere) in module_defaults, as in resilient.virt.vm's examples.
- name: A VM with a qcow2 disk
  resilient.virt.vm:
    provider: hv1
    name: app3
    vcpus: 1
    memory_mb: 256
    disks:
      - {size_gb: 1, format: qcow2}
    state: running

- name: Before an upgrade - a snapshot with the running state (libvirt needs memory for a running VM)
  resilient.virt.vm_snapshot:
    provider: hv1
    vm: app3
    name: before-upgrade
    description: Before the upgrade to 2.0
    memory: true
    pinned: true

- name: A nightly snapshot, keeping the last 3 and none older than a week (pinned ones are kept)
  resilient.virt.vm_snapshot:
    provider: hv1
    vm: app3
    name: "nightly-{{ now(utc=true).strftime('%Y%m%dt%H%M%S') }}"
    memory: true
    keep_last: 3
    max_age: 7d

- name: The upgrade went wrong - back to the snapshot (the VM runs again as it was)
  resilient.virt.vm_snapshot:
    provider: hv1
    vm: app3
    name: before-upgrade
    state: reverted

- name: It went well - delete the snapshot
  resilient.virt.vm_snapshot:
    provider: hv1
    vm: app3
    name: before-upgrade
    state: absent

- name: vSphere - a disk-only snapshot, quiesced through VMware Tools when they run
  resilient.virt.vm_snapshot:
    provider: vc
    vm: DC0_C0_RP0_VM1
    name: before-patching
    quiesce: best_effort
  register: taken

- name: Say when it could not be quiesced
  ansible.builtin.debug:
    msg: "{{ taken.not_quiesced }}"
  when: taken.not_quiesced is not none

- name: vSphere - delete it again
  resilient.virt.vm_snapshot:
    provider: vc
    vm: DC0_C0_RP0_VM1
    name: before-patching
    state: absent

- name: List each VM's snapshots
  resilient.virt.vm_info:
    provider: hv1
    name: app3
    snapshots: true
"""

RETURN = r"""
snapshot:
  description:
    - The snapshot O(name) after the task (in check mode, as it would be); null when the VM has
      none (after V(absent)).
  returned: always
  type: dict
  contains:
    name:
      description: Its name.
      type: str
    description:
      description: Its description as given (without the line that marks the snapshots this module made).
      type: str
    created:
      description: When it was taken (RFC 3339, UTC).
      type: str
      sample: "2026-11-23T03:00:00Z"
    parent:
      description: The snapshot it builds on (the VM's current snapshot when it was taken), or null.
      type: str
    memory:
      description: True when it holds the VM's running state.
      type: bool
    quiesced:
      description: True when the guest's filesystems were frozen while it was taken.
      type: bool
    vm_state:
      description:
        - The state a revert to it leaves the VM in - V(running) (with memory), V(stopped),
          V(paused) or V(suspended).
      type: str
    current:
      description: True for the VM's current snapshot (what it last took or reverted to; the parent of the next one).
      type: bool
    id:
      description: The platform's reference of it (libvirt - its name; vSphere - its managed object id).
      type: str
    managed:
      description: True when this module made it (only such snapshots are deleted by retention).
      type: bool
    pinned:
      description: True when it was taken with O(pinned) - retention never deletes it.
      type: bool
snapshots:
  description:
    - Every snapshot of the VM after the task (in check mode, as they would be), parents first;
      each as RV(snapshot).
  returned: always
  type: list
  elements: dict
pruned:
  description: The snapshots retention deleted (in check mode, would delete), oldest first.
  returned: always
  type: list
  elements: str
not_quiesced:
  description:
    - Why a snapshot taken with O(quiesce) was not quiesced (no agent, with O(quiesce=best_effort);
      a snapshot with memory; a stopped VM), or null.
  returned: always
  type: str
vm:
  description:
    - With V(reverted), the VM after the revert (in check mode, as it would be), as
      M(resilient.virt.vm_info) shows VMs.
  returned: when O(state=reverted)
  type: dict
diff:
  description: With C(--diff) and a change, the VM's snapshot names and its current snapshot before and after.
  returned: when diff mode is on and something changed
  type: dict
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

from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule
from ansible_collections.resilient.virt.plugins.module_utils._snapshot.task import run_vm_snapshot


class VmSnapshotModule(ResilientModule):
    argument_spec = dict(
        vm=dict(type="str", required=True),
        name=dict(type="str", required=True),
        state=dict(type="str", default="present", choices=["present", "absent", "reverted"]),
        description=dict(type="str"),
        memory=dict(type="bool", default=False),
        quiesce=dict(type="raw", default=False),
        pinned=dict(type="bool", default=False),
        keep_last=dict(type="int"),
        max_age=dict(type="raw"),
    )

    def run(self):
        return run_vm_snapshot(self.params, self.context())


def main():
    VmSnapshotModule.main()


if __name__ == "__main__":
    main()
