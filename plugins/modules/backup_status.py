#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: backup_status
short_description: Show, wait on, set and reconcile the status records of backups and restores
version_added: 0.3.0
description:
  - Works on the records that M(resilient.virt.backup) writes in the state store, one per backup
    or restore.
  - V(show) lists records (filtered by O(name), O(vm), O(kind), O(phase)) or shows one.
  - V(wait) waits until the record O(name) reaches a final phase, and fails when it ended Failed,
    FailedValidation or PartiallyFailed unless O(fail_on_failure) is false. When the record's
    owner is gone (its lease expired) and a provider for it is given, it adopts the record and
    follows the provider operation itself.
  - V(set) moves a record to O(set_phase) by hand - an operator's override, whoever holds the
    record, under the same transition rules and the same retried writes as any other change.
  - V(reconcile) adopts every selected record that is not final and whose lease has expired - its
    provider operation is followed to its real outcome when the provider still knows it, else the
    record is marked Failed with reason C(OwnerLost). A record whose provider is not given (by
    O(provider) or by name in O(providers)) is skipped with a warning.
  - An adoption (by V(wait) or V(reconcile)) that fails before the record's outcome is written -
    the provider's circuit breaker open, the provider unreachable, the wait timed out - gives the
    record back, its owner and expired lease as they were and its phase and history untouched,
    so that the next run adopts it at once; the task then fails with that error.
author:
  - resilient.virt developers (!UNKNOWN)
options:
  mode:
    description: What to do; see the description.
    type: str
    choices: [show, wait, set, reconcile]
    default: show
  name:
    description: The record; required with V(wait) and V(set).
    type: str
  vm:
    description: Only records of this VM.
    type: str
  kind:
    description: Only backups or only restores.
    type: str
    choices: [backup, restore]
  phase:
    description:
      - Only records in these phases - each one of the phases of O(set_phase); another value
        fails with InvalidSpec naming it (C(phase[0])).
    type: list
    elements: str
  set_phase:
    description: With V(set), the phase to move the record to.
    type: str
    choices: [New, FailedValidation, InProgress, WaitingForPluginOperations,
              WaitingForPluginOperationsPartiallyFailed, Finalizing, FinalizingPartiallyFailed,
              Completed, PartiallyFailed, Failed]
  set_reason:
    description: With V(set), the reason to record (for example C(OperatorAborted)).
    type: str
  set_message:
    description: With V(set), a message added to the record's errors.
    type: str
  timeout:
    description:
      - How long V(wait) waits, and how long V(reconcile) follows an adopted operation (seconds
        or a duration such as V(10m)).
    type: raw
    default: 10m
  fail_on_failure:
    description: With V(wait), fail when the record ended Failed, FailedValidation or PartiallyFailed.
    type: bool
    default: true
  accept_partial:
    description: With V(wait), a PartiallyFailed record does not fail the task.
    type: bool
    default: false
  resource_timeout:
    description:
      - How long a status write that leaves InProgress or reaches a final phase is retried through
        state store failures. Default from C(RESILIENT_VIRT_RESOURCE_TIMEOUT), else V(10m).
    type: raw
  lease:
    description:
      - How long this task holds a record it adopts without renewing it; a failed adoption gives
        the record back at once.
    type: raw
    default: 2m
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description: V(set) and V(reconcile) report what they would change without writing or contacting a provider.
  diff_mode:
    description: V(set) shows the phase before and after.
seealso:
  - module: resilient.virt.backup
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

- name: Start a backup and return at once
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

- name: List the failed backups of a VM
  resilient.virt.backup_status:
    vm: app2
    kind: backup
    phase: [Failed, PartiallyFailed]
  register: failed_backups

- name: Adopt or fail the records whose run died (for example on a schedule)
  resilient.virt.backup_status:
    mode: reconcile

- name: Start another backup
  resilient.virt.backup:
    provider: hv1
    vm: app2
    wait: false
  register: aborted

- name: Mark it failed by hand (an operator stopped it)
  resilient.virt.backup_status:
    mode: set
    name: "{{ aborted.record.name }}"
    set_phase: Failed
    set_reason: OperatorAborted
    set_message: the storage behind the backup pool was replaced
"""

RETURN = r"""
records:
  description:
    - The selected records after the task, oldest first, each with the keys of
      RV(resilient.virt.backup#module:record) (C(name), C(phase), C(ready), C(conditions)...).
  returned: always
  type: list
  elements: dict
record:
  description: The record O(name) after the task (shown like an element of RV(records)).
  returned: when O(name) is given
  type: dict
adopted:
  description:
    - With V(reconcile), the records adopted, after their outcome was written (shown like an
      element of RV(records)).
  returned: with V(reconcile)
  type: list
  elements: dict
skipped:
  description: With V(reconcile), records left alone because no provider was given for them - C(name) and C(reason).
  returned: with V(reconcile)
  type: list
  elements: dict
diff:
  description: With V(set), the phase before and after, with C(--diff).
  returned: when a phase changes
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

from ansible_collections.resilient.virt.plugins.module_utils._backup.task import run_backup_status
from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule


class BackupStatusModule(ResilientModule):
    argument_spec = dict(
        mode=dict(type="str", default="show", choices=["show", "wait", "set", "reconcile"]),
        name=dict(type="str"),
        vm=dict(type="str"),
        kind=dict(type="str", choices=["backup", "restore"]),
        phase=dict(type="list", elements="str"),
        set_phase=dict(type="str", choices=[
            "New", "FailedValidation", "InProgress", "WaitingForPluginOperations",
            "WaitingForPluginOperationsPartiallyFailed", "Finalizing", "FinalizingPartiallyFailed",
            "Completed", "PartiallyFailed", "Failed"]),
        set_reason=dict(type="str"),
        set_message=dict(type="str"),
        timeout=dict(type="raw", default="10m"),
        fail_on_failure=dict(type="bool", default=True),
        accept_partial=dict(type="bool", default=False),
        resource_timeout=dict(type="raw"),
        lease=dict(type="raw", default="2m"),
    )
    module_kwargs = dict(
        required_if=[("mode", "wait", ["name"]), ("mode", "set", ["name", "set_phase"])],
    )

    def run(self):
        return run_backup_status(self.params, self.context())


def main():
    BackupStatusModule.main()


if __name__ == "__main__":
    main()
