#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: vm_fleet
short_description: Bring a whole fleet of VMs to its desired state in one task, with per-VM status across runs
version_added: 0.2.0
description:
  - Reconciles every VM of O(vms), on any number of providers, in one task; VMs are worked on in
    parallel, at most O(concurrency) at once and O(provider_concurrency) on one provider, every
    call through the provider's retries, rate limit, circuit breaker and time limits.
  - Remembers each VM's status in the state store (keyed by O(owner) and VM) - the hash of the
    spec it was reconciled for, done or error, the attempts, the last error and the next retry
    time. An incremental run (the default) does not touch a VM whose spec did not change and whose
    last reconcile succeeded; a full run (O(full), or once O(full_interval) has passed) reads every
    VM, reports drift as out of sync, and fixes it.
  - A VM whose reconcile failed is retried in a later run after its own exponential backoff
    (O(backoff_min) doubling up to O(backoff_max)), at most O(max_attempts) times in a row; errors
    that cannot pass with the same spec (InvalidSpec, Unauthorized, NotSupported, QuotaExceeded,
    Conflict) wait for a spec change. Until then the VM is reported deferred. O(retry_now) retries
    them all at once. A provider whose circuit breaker is open defers its VMs (BreakerOpen) while
    the others proceed.
  - Every VM it creates carries the marker O(owner) (metadata C(resilient_virt_owner)). With
    O(prune), VMs with this marker that are no longer listed are deleted, at most O(max_prune);
    a VM without the marker is never pruned. A listed VM that exists already (created by hand,
    by another tool, or before) is managed but not marked, so a prune never deletes it, unless
    its entry sets C(adopt=true).
  - Work is done in rounds of O(round_size) VMs, and the statuses of a round are written as soon
    as it ends, so a killed task loses at most one round of status; a VM is always read before
    it is created, so nothing is created twice.
  - Check mode returns the full plan (reads only); C(--diff) shows the VMs before and after.
  - For each VM the same rules as M(resilient.virt.vm) apply (the same spec fields, the same
    look-before-retry, the same day-2 changes on existing VMs); only C(template), C(libvirt) and
    C(cloud_init) apply when a VM is created alone.
author:
  - resilient.virt developers (!UNKNOWN)
options:
  vms:
    description:
      - The desired VMs. Each is a dict with the options of M(resilient.virt.vm) that describe a
        VM - C(name) (required), C(provider) (a name of O(providers) or a dict; default
        O(provider)), C(state) (V(present), V(running), V(stopped) or V(absent); default
        V(present)), C(vcpus), C(memory_mb), C(disks), C(interfaces), C(boot), C(metadata),
        C(tags), C(autostart), C(placement), C(template), C(libvirt) and C(cloud_init) (see
        M(resilient.virt.vm); its C(user_data) is masked in every result as a secret).
      - C(adopt) (bool, default V(false)) makes a VM that exists already this fleet's - it
        writes the owner marker on it, so that once the VM is no longer listed a run with
        O(prune) deletes it. Without it the marker is written only on the VMs the fleet creates,
        and a listed VM that exists already is managed (power state, vCPUs, memory, metadata...)
        but never marked, so never pruned. A VM marked by another owner fails with Conflict,
        adopted or not. Setting C(adopt) counts as a spec change; removing it again does not
        remove the marker.
      - C(metadata) may not set C(resilient_virt_owner) (InvalidSpec naming
        C(vms[N].metadata.resilient_virt_owner)); use C(adopt) instead.
      - Checked as a whole before anything is contacted; every problem is reported by its path,
        such as C(vms[3].memory_mb). A VM (provider and name) may be listed once.
      - The same bounds as M(resilient.virt.vm) - C(name) and each tag and metadata key at most
        255 characters without control, invisible or direction-changing characters (such as
        U+200B or U+202E); C(vcpus) 1 to 4096; C(memory_mb) 1 to 16777216; each disk's
        C(size_gb) 1 to 1048576; C(metadata) one level of at most 256 keys.
      - C(placement) takes C(esxi_hostname) as another name of C(host), as in M(resilient.virt.vm).
    type: list
    elements: dict
    required: true
  owner:
    description:
      - Names this fleet. Written on every VM it creates (metadata C(resilient_virt_owner)), and
        on the VMs its entries adopt (C(adopt=true)), and keys the statuses in the state store; 1
        to 63 letters, digits, C(.), C(_) or C(-).
      - A listed VM that carries another owner's marker fails with Conflict; a listed VM without
        a marker (created elsewhere) is managed, but not marked and never pruned, unless adopted.
    type: str
    required: true
  prune:
    description:
      - Delete the VMs of this owner that are no longer listed, on the providers the list names and
        on those where this owner's VMs were recorded (when still named in O(providers)).
      - A VM is this owner's when it carries its marker, that is when this fleet created it or an
        entry adopted it (C(adopt=true)); no other VM is ever pruned.
    type: bool
    default: false
  max_prune:
    description:
      - The most VMs a prune may delete, as a count (V(5)) or a percentage of this owner's VMs
        found (V(10%), rounded down); a count is at most 1000000. More candidates than that fails
        the task before anything is changed, naming them.
    type: raw
    default: 10%
  full:
    description: Read every VM, report drift (out of sync) and fix it, whatever the statuses say.
    type: bool
    default: false
  full_interval:
    description:
      - Make a run full when the last full run of this owner is older than this (seconds, or
        C(30m), C(1h)); V(0) never does.
    type: raw
    default: 1h
  retry_now:
    description: Retry the failed VMs now, ignoring their backoff, their attempt count and terminal errors.
    type: bool
    default: false
  backoff_min:
    description: Wait after a VM's first failure before a later run retries it (seconds, or C(30s), C(5m)).
    type: raw
    default: 30s
  backoff_max:
    description: The longest wait between two retries of a VM; the wait doubles after each failure up to this.
    type: raw
    default: 1h
  max_attempts:
    description:
      - Failed attempts in a row (across runs) after which a VM waits for a spec change or
        O(retry_now). The per-VM result says the attempt number and whether it was the last.
      - From 1 to 100.
    type: int
    default: 5
  concurrency:
    description: VMs worked on at the same time, over all providers; from 1 to 1024.
    type: int
    default: 16
  provider_concurrency:
    description: VMs worked on at the same time on one provider (each with its own connection); from 1 to 1024.
    type: int
    default: 4
  round_size:
    description: VMs per round; the statuses of a round are written when it ends; from 1 to 100000.
    type: int
    default: 50
  fail_on_error:
    description:
      - Fail the task when any VM failed (the result still has every VM). With V(false) the task
        succeeds, C(summary.failed) counts the failures and a warning names them.
    type: bool
    default: true
  force:
    description: Power a VM off when its graceful shutdown does not finish within O(shutdown_timeout).
    type: bool
    default: false
  shutdown_timeout:
    description: How long a shutdown waits for the guest (seconds, or C(30s), C(2m)).
    type: raw
    default: 60s
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description:
      - Reads the VMs and returns the plan for each, with the predicted summary; nothing is changed or recorded.
  diff_mode:
    description: Shows state, vCPUs and memory of every VM that changes, before and after.
notes:
  - Unlike a C(loop) over M(resilient.virt.vm), the whole fleet is one task and one process, its
    VMs are worked on in parallel, and what failed is remembered and retried with backoff by
    later runs. See the collection's docs/fleet.md.
seealso:
  - module: resilient.virt.vm
  - module: resilient.virt.vm_info
"""

EXAMPLES = r"""
# Assumes providers hv1, hv2 (libvirt) and vc (vSphere) in module_defaults, as in resilient.virt.vm's examples.
- name: Web VMs on two libvirt hosts and vCenter, running
  resilient.virt.vm_fleet:
    owner: web
    vms:
      - {name: web1, provider: hv1, vcpus: 1, memory_mb: 1024, state: running}
      - {name: web2, provider: hv2, vcpus: 1, memory_mb: 1024, state: running}
      - {name: web3, provider: vc, vcpus: 2, memory_mb: 2048, state: running, tags: [web]}

- name: Nightly, read every VM and fix drift, and retry what failed
  resilient.virt.vm_fleet:
    owner: web
    vms: "{{ web_vms }}"
    full: true
    retry_now: true
    fail_on_error: false
  vars:
    web_vms:  # the list of the first task, kept in one variable (group_vars) for every run
      - {name: web1, provider: hv1, vcpus: 1, memory_mb: 1024, state: running}
      - {name: web2, provider: hv2, vcpus: 1, memory_mb: 1024, state: running}
      - {name: web3, provider: vc, vcpus: 2, memory_mb: 2048, state: running, tags: [web]}
  register: fleet

- name: Show the VMs that are not where they should be
  ansible.builtin.debug:
    msg: "{{ fleet.vms | selectattr('outcome', 'in', ['failed', 'deferred']) | map(attribute='name') }}"

- name: Keep exactly the listed VMs of the "ci" fleet on hv1, deleting at most 3 others
  resilient.virt.vm_fleet:
    owner: ci
    provider: hv1
    vms:
      - {name: ci-runner-1, vcpus: 2, memory_mb: 2048, state: running}
      - {name: ci-runner-2, vcpus: 2, memory_mb: 2048, state: running}
    prune: true
    max_prune: 3

- name: A VM created by hand (here by resilient.virt.vm), outside any fleet
  resilient.virt.vm:
    provider: hv1
    name: ci-legacy
    vcpus: 1
    memory_mb: 512

- name: Make it part of the "ci" fleet, so that a later prune may delete it
  resilient.virt.vm_fleet:
    owner: ci
    provider: hv1
    vms:
      - {name: ci-runner-1, vcpus: 2, memory_mb: 2048, state: running}
      - {name: ci-runner-2, vcpus: 2, memory_mb: 2048, state: running}
      - {name: ci-legacy, state: running, adopt: true}

- name: Retire the "ci" fleet - every VM listed absent
  resilient.virt.vm_fleet:
    owner: ci
    provider: hv1
    vms:
      - {name: ci-runner-1, state: absent}
      - {name: ci-runner-2, state: absent}
      - {name: ci-legacy, state: absent}

- name: Retire the "web" fleet - every VM listed absent
  resilient.virt.vm_fleet:
    owner: web
    vms:
      - {name: web1, provider: hv1, state: absent}
      - {name: web2, provider: hv2, state: absent}
      - {name: web3, provider: vc, state: absent}
"""

RETURN = r"""
summary:
  description: How many VMs had each outcome, how many drifted, and how many there were.
  returned: always
  type: dict
  contains:
    created:
      description: VMs created.
      type: int
    updated:
      description: VMs whose vCPUs or memory were changed.
      type: int
    started:
      description: VMs started (or rebooted).
      type: int
    stopped:
      description: VMs stopped.
      type: int
    deleted:
      description: Listed VMs with C(state=absent) that were deleted.
      type: int
    pruned:
      description: VMs of this owner deleted because they are no longer listed.
      type: int
    unchanged:
      description: VMs left as they were (in sync, or not looked at in an incremental run).
      type: int
    failed:
      description: VMs whose reconcile failed in this run.
      type: int
    deferred:
      description: VMs not attempted - backing off, waiting for a spec change, or their provider's breaker open.
      type: int
    out_of_sync:
      description: VMs a full run found drifted from their last reconciled state (and fixed, unless they failed).
      type: int
    total:
      description: VMs in this result (listed and pruned).
      type: int
  sample: {created: 3, updated: 0, started: 0, stopped: 0, deleted: 0, pruned: 1, unchanged: 56,
           failed: 0, deferred: 0, out_of_sync: 0, total: 60}
full:
  description: True when this run read every VM (O(full), or O(full_interval) had passed).
  returned: always
  type: bool
vms:
  description: One entry per listed VM, in list order, then the pruned VMs.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: VM name.
      type: str
    provider:
      description: The provider's key, such as C(libvirt:kvm1).
      type: str
    state:
      description: The desired state (V(absent) for a pruned VM).
      type: str
    outcome:
      description:
        - V(created), V(updated), V(started), V(stopped), V(deleted), V(pruned), V(unchanged), V(failed) or
          V(deferred).
      type: str
    actions:
      description: What was done (or, in check mode, would be), such as V([create, start]).
      type: list
      elements: str
    reason:
      description: Why the VM was looked at or not (V(new), V(spec changed), V(in sync), V(full run), a backoff...).
      type: str
    out_of_sync:
      description: True when a full run found the VM drifted.
      type: bool
    status:
      description:
        - The recorded status - V(done), V(error), or V(pending) (not reconciled yet; in check mode, would
          change).
      type: str
    attempt:
      description: The attempt number for this spec (1 for the first), or null when none was made.
      type: int
    last_attempt:
      description: True when this failure was the last attempt allowed by O(max_attempts) or a terminal error.
      type: bool
    error:
      description:
        - The error of this run's attempt, or of the last attempt for a deferred VM (C(type), C(message)...), or
          null.
      type: dict
    next_retry_at:
      description: When a later run retries the VM (RFC 3339 UTC), or null.
      type: str
    updated_at:
      description: When the status was last written (RFC 3339 UTC), or null.
      type: str
    restart_required:
      description: True when a vCPU or memory change takes effect only after the VM restarts.
      type: bool
    vm:
      description:
        - The VM as last seen (C(state), C(vcpus), C(memory_mb), C(hypervisor), C(uuid)), or null when absent or
          never seen.
      type: dict
    conditions:
      description:
        - C(Ready) V(True)/C(VMReady) when the VM is in its desired state; V(False) with
          C(ProviderError), C(ValidationError), C(Deferred) or, in check mode, C(Pending).
      type: list
      elements: dict
diff:
  description: With C(--diff), state, vCPUs and memory of every VM that changed, keyed by C(provider/name).
  returned: when diff mode is on and something changed
  type: dict
error:
  description:
    - On failure, what failed - C(type) (one of the error taxonomy, such as V(InvalidSpec),
      V(Unavailable), V(BreakerOpen) or V(MissingLibrary)), C(retryable), C(retry_after) (seconds,
      or null) and C(details). The message is in C(msg), once.
  returned: failure
  type: dict
  sample: {"type": "Unavailable", "retryable": true, "retry_after": null, "details": {"attempts": 3}}
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

from ansible_collections.resilient.virt.plugins.module_utils._fleet.task import run_vm_fleet
from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule


class VmFleetModule(ResilientModule):
    argument_spec = dict(
        vms=dict(type="list", elements="dict", required=True),
        owner=dict(type="str", required=True),
        prune=dict(type="bool", default=False),
        max_prune=dict(type="raw", default="10%"),
        full=dict(type="bool", default=False),
        full_interval=dict(type="raw", default="1h"),
        retry_now=dict(type="bool", default=False),
        backoff_min=dict(type="raw", default="30s"),
        backoff_max=dict(type="raw", default="1h"),
        max_attempts=dict(type="int", default=5),
        concurrency=dict(type="int", default=16),
        provider_concurrency=dict(type="int", default=4),
        round_size=dict(type="int", default=50),
        fail_on_error=dict(type="bool", default=True),
        force=dict(type="bool", default=False),
        shutdown_timeout=dict(type="raw", default="60s"),
    )

    def run(self):
        return run_vm_fleet(self.params, self.context())


def main():
    VmFleetModule.main()


if __name__ == "__main__":
    main()
