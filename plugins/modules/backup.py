#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: backup
short_description: Back up and restore VMs, with a status record that never gets stuck
version_added: 0.3.0
description:
  - Takes a backup of a VM (V(present)), restores one (V(restored)) or deletes one (V(absent)),
    each followed through a record in the state store, shared by every fork, run and controller
    that uses the same store. See M(resilient.virt.backup_status) to list, wait on, set and
    reconcile records.
  - "libvirt: a running VM is backed up with libvirt's push-mode backup job - full, or
    incremental on top of the last backup (checkpoints; qcow2 v3 disks) - and its definition is
    saved with it; a stopped VM's disks are copied. Backups live in the storage pool
    C(provider.backup_pool) (default C(backups)). A restore brings back the disks and the
    definition, to the same (stopped) VM or to a new VM O(target), which is left stopped."
  - "vSphere: a backup is a snapshot of the VM (no memory, no quiescing); a restore reverts the
    VM to it; O(target) must be the VM itself."
  - "Proxmox VE: a backup is a full vzdump archive (mode snapshot) on the storage
    C(provider.backup_storage) (default C(local)); O(incremental) is not offered (NotSupported).
    A restore is PVE's qmrestore of the archive, its disks on C(provider.storage): onto the same
    (stopped) VM, or to a new VM O(target) (a new VM id and MAC addresses), left stopped."
  - The record is written before the provider operation starts, and the operation's handle
    before anything waits on it. The owner of a record (this task) holds a lease of O(lease) and
    renews it while it waits. A run that dies leaves a record whose lease expires; the next
    backup of the same VM, or M(resilient.virt.backup_status) with V(reconcile), adopts it -
    follows the provider operation to its real outcome - or marks it Failed with reason
    C(OwnerLost) when the provider has no trace of it. An adoption that fails before the outcome
    is written (the provider's breaker open, the provider unreachable) gives the record back, its
    owner and expired lease as they were, so that the next run adopts it at once.
  - The write that moves a record out of InProgress, or to a final phase, is retried through
    state store outages until O(resource_timeout). A wait that times out leaves the record
    InProgress for a later run (or cancels the operation with O(cancel_on_timeout)); a failure is
    never reported that was not seen.
author:
  - resilient.virt developers (!UNKNOWN)
options:
  vm:
    description:
      - The VM to back up, or whose backup to restore. Required with V(present) and V(restored).
    type: str
  name:
    description:
      - The record's name - 1 to 128 letters, digits, C(_), C(.) or C(-).
      - With V(present) or V(restored), a task that names an existing record reports it
        (C(changed=false)) and, when it is still running and its owner is gone, adopts it. Without
        O(name), every run takes a new backup named C(<vm>-backup-<time>-<id>).
      - Required with V(absent).
    type: str
  state:
    description:
      - V(present) takes a backup; V(restored) restores O(backup); V(absent) deletes the backup
        O(name) and its record, cancelling it first when it is still running.
    type: str
    choices: [present, restored, absent]
    default: present
  incremental:
    description:
      - Back up only what changed since the VM's last completed backup (its parent). Fails with
        InvalidSpec when the VM has none.
      - "libvirt: a stopped VM's disks are always copied in full (the record then says
        C(incremental: false) and carries a warning)."
    type: bool
    default: false
  backup:
    description:
      - With V(restored), the backup to restore (a record name); default the VM's newest completed
        backup on this provider.
    type: str
  target:
    description:
      - With V(restored), the VM to restore to; default O(vm). It must be stopped when it exists.
      - Like O(vm), checked before anything is read - at most 255 characters, without control,
        invisible or direction-changing characters.
    type: str
  wait:
    description:
      - Wait until the operation ends. V(false) returns at once with the record InProgress; wait
        for it with M(resilient.virt.backup_status).
    type: bool
    default: true
  timeout:
    description:
      - How long to wait (seconds, or a duration such as V(30m)). When it passes, the task fails
        with Timeout and the record stays InProgress, unless O(cancel_on_timeout).
    type: raw
    default: 1h
  cancel_on_timeout:
    description:
      - When the wait times out, cancel the provider's operation and record Failed (C(Cancelled)).
    type: bool
    default: false
  keep_last:
    description:
      - After a completed backup, delete the VM's older completed backups on this provider beyond
        the newest O(keep_last), never one that a kept backup builds on.
      - From V(1) to V(10000); unset keeps them all.
    type: int
  resource_timeout:
    description:
      - How long a status write that leaves InProgress or reaches a final phase is retried through
        state store failures (capped exponential backoff with jitter, a last attempt at the
        deadline).
      - Default from the environment variable C(RESILIENT_VIRT_RESOURCE_TIMEOUT), else V(10m).
    type: raw
  lease:
    description:
      - How long this task's hold on its records lasts without renewal; it renews it while it
        waits. When it dies, its records can be adopted this long after its last renewal.
    type: raw
    default: 2m
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description: Reports the record it would write, without contacting the provider or writing it.
  diff_mode:
    description: Shows the record before and after.
notes:
  - Backups and restores are not idempotent by nature - each run without O(name) takes a new
    backup. Give O(name) for a task that must run once (for example a restore).
  - The provider calls (plan, start, poll, cancel, delete) go through the provider's retries,
    rate limit, circuit breaker and time limits like any other call.
seealso:
  - module: resilient.virt.backup_status
"""

EXAMPLES = r"""
# Assumes providers hv1 (libvirt) and vc (vSphere) in module_defaults, as in resilient.virt.vm's examples.
- name: A VM to back up
  resilient.virt.vm:
    provider: hv1
    name: app2
    vcpus: 1
    memory_mb: 512
    disks:
      - {size_gb: 1}
    state: running

- name: Back up the VM (full)
  resilient.virt.backup:
    provider: hv1
    vm: app2
  register: full

- name: Back up only what changed, keeping the last 7 backups
  resilient.virt.backup:
    provider: hv1
    vm: app2
    incremental: true
    keep_last: 7
  register: incremental

- name: Start a backup and return at once (resilient.virt.backup_status waits for it)
  resilient.virt.backup:
    provider: hv1
    vm: app2
    wait: false
  register: started

- name: Wait for it
  resilient.virt.backup_status:
    mode: wait
    name: "{{ started.record.name }}"
    provider: hv1
    timeout: 30m

- name: Restore the newest backup to a new VM (left stopped)
  resilient.virt.backup:
    provider: hv1
    vm: app2
    state: restored
    target: app2-restored
    name: app2-restore-drill

- name: Delete a backup (one that no other builds on)
  resilient.virt.backup:
    provider: hv1
    name: "{{ incremental.record.name }}"
    state: absent
"""

RETURN = r"""
record:
  description:
    - The record after the task (in check mode, the record it would write; null after V(absent)
      of a missing record).
  returned: always
  type: dict
  contains:
      name:
        description: The record's name (unique in the state store).
        type: str
        sample: web1-backup-20261123t030000-1a2b
      kind:
        description: V(backup) or V(restore).
        type: str
      vm:
        description: The VM backed up, or whose backup is restored.
        type: str
      provider:
        description: The provider's key, C(<type>:<name>).
        type: str
        sample: libvirt:hv1
      provider_name:
        description: The provider's name (a key of O(providers), or its C(name) setting), used to reach it again.
        type: str
      phase:
        description:
          - V(New), V(FailedValidation), V(InProgress), V(WaitingForPluginOperations),
            V(WaitingForPluginOperationsPartiallyFailed), V(Finalizing), V(FinalizingPartiallyFailed),
            V(Completed), V(PartiallyFailed) or V(Failed).
        type: str
        sample: Completed
      reason:
        description:
          - Why it failed - V(OwnerLost) (its run died before the operation started, or the provider
            has no trace of it), V(Cancelled), V(ProviderFailed), or the error type of a refusal such
            as V(InvalidSpec) - or the reason an operator set; null otherwise.
        type: str
      incremental:
        description: True for a backup that holds only what changed since its C(parent).
        type: bool
      parent:
        description: The backup an incremental backup builds on, or null.
        type: str
      backup:
        description: For a restore, the backup restored.
        type: str
      target:
        description: For a restore, the VM restored to.
        type: str
      created_at:
        description: When the record was written (RFC 3339, UTC).
        type: str
        sample: "2026-11-23T03:00:00Z"
      started_at:
        description: When it entered InProgress (RFC 3339, UTC), or null.
        type: str
      completed_at:
        description: When it reached a final phase (RFC 3339, UTC), or null.
        type: str
      updated_at:
        description: Its last write (RFC 3339, UTC).
        type: str
      progress:
        description: Percent done as the provider last reported it, or null.
        type: int
      errors:
        description: What went wrong, oldest first.
        type: list
        elements: str
      warnings:
        description: What the user should know about it (for example a full copy made for an incremental request).
        type: list
        elements: str
      artifact:
        description:
          - The stored backup as the provider describes it - C(location) (files, a snapshot),
            C(size_bytes), C(created_at), C(incremental), C(parent), C(complete); null until it
            completes.
        type: dict
      handle:
        description: The provider operation it follows (a job, a task), written before anything waits on it.
        type: dict
      owner:
        description: The run that works on it (host/pid/id), while its lease runs.
        type: str
      lease_until:
        description: Until when the owner holds it (RFC 3339, UTC); null at a final phase.
        type: str
      version:
        description: Raised by every write (compare-and-set).
        type: int
      ready:
        description: True when the phase is Completed.
        type: bool
      finished:
        description: True when the phase is final (Completed, PartiallyFailed, Failed or FailedValidation).
        type: bool
      failed:
        description: True when it ended in PartiallyFailed, Failed or FailedValidation.
        type: bool
      conditions:
        description:
        - The Ready condition - status V(true) (Completed), V(false) (failed) or null
          (running); reason the record's reason or phase; C(errors) say what failed.
        type: list
        elements: dict

ready:
  description: True when the record is Completed.
  returned: always
  type: bool
adopted:
  description: Records of the same VM whose owner was gone, adopted before this backup (shown like RV(record)).
  returned: with V(present) or V(restored), outside check mode
  type: list
  elements: dict
deleted:
  description: Backups deleted by O(keep_last).
  returned: when O(keep_last) deleted some
  type: list
  elements: str
diff:
  description: The record before and after, with C(--diff).
  returned: when something changes
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

from ansible_collections.resilient.virt.plugins.module_utils._backup.task import run_backup
from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule


class BackupModule(ResilientModule):
    argument_spec = dict(
        vm=dict(type="str"),
        name=dict(type="str"),
        state=dict(type="str", default="present", choices=["present", "restored", "absent"]),
        incremental=dict(type="bool", default=False),
        backup=dict(type="str"),
        target=dict(type="str"),
        wait=dict(type="bool", default=True),
        timeout=dict(type="raw", default="1h"),
        cancel_on_timeout=dict(type="bool", default=False),
        keep_last=dict(type="int"),
        resource_timeout=dict(type="raw"),
        lease=dict(type="raw", default="2m"),
    )

    def run(self):
        return run_backup(self.params, self.context())


def main():
    BackupModule.main()


if __name__ == "__main__":
    main()
