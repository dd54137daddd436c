#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: vm_migrate
short_description: Move a VM to another hypervisor, live, after checking that it may go there
version_added: 0.4.0
description:
  - Moves the VM O(vm) of O(provider) to O(target) - live when it runs, cold when it is stopped.
    docs/migration.md says how, and what each platform does.
  - "Before anything moves, the prechecks: the target hypervisor takes VMs (not in maintenance
    or down), has the memory and vCPUs the VM needs beyond what runs there and what failover
    reservations hold there, is in the VM's zone (unless O(allow_zone_change)), and keeps the
    failover reservations' rules (the VM is not moved onto a host holding one of its own
    reservations, nor beside a VM that shares one with it). The backend then compares the CPU
    where the platform tells. A failed check fails the task with Conflict naming each check
    and its fix, and nothing moves."
  - Idempotent - a VM already on its target is left alone (C(changed) false), also when an
    earlier run moved it and O(provider) no longer has it. A retried move looks where the VM
    is first and never makes a second copy.
  - "libvirt (one provider per host): O(target) is another libvirt provider. A running or
    paused VM moves by a managed migration that this task drives, talking to both daemons
    (they need not reach each other's libvirtd, only each other's QEMU): memory and, through
    NBD, the writable disks are copied while it runs, and it is defined on the target and
    undefined here. Each disk's volume is made on the target first, in the storage pool of the
    same name; read-only disks (a cloud-init seed) are copied before. A stopped VM moves cold -
    its volumes copied through libvirt, then defined there. Its volumes here are deleted once
    it has moved. A migration that fails or runs past O(timeout) is cancelled and the VM runs
    here as before. A disk in a storage pool both hosts share (NFS, a cluster filesystem: the
    task proves it by making a marker file through this host and finding it through the
    target) is neither copied nor deleted; moved live, such a disk must bypass the host's page
    cache (cache V(none) or V(directsync)), or the move is refused before anything happens."
  - "vSphere (one provider, many hosts): O(target) is an ESXi host of the provider.
    RelocateVM_Task - vMotion for a running VM, storage vMotion with O(datastore), into
    O(resource_pool) when given."
  - "Proxmox VE (one provider, a cluster whose nodes are its hypervisors): O(target) is a node
    of the cluster. PVE's own migration, followed by its task - online for a running or paused
    VM, its disks on local storage copied by PVE (onto O(datastore) when given), those on
    shared storage left where they are; offline for a stopped one."
author:
  - resilient.virt developers (!UNKNOWN)
options:
  vm:
    description:
      - The VM's name (or what the provider's backend takes for one).
    type: str
    required: true
  target:
    description:
      - "Where the VM goes. libvirt - another provider: the name of an entry of O(providers),
        its key (V(libvirt:hv2)) or a provider dict. vSphere - the name of an ESXi host of
        O(provider). Proxmox VE - the name of a node of O(provider)'s cluster."
    type: raw
    required: true
  live:
    description:
      - Move a running VM while it runs. V(false) on libvirt pauses it while its memory is
        copied (a shorter move, a longer downtime); vSphere and Proxmox VE move running VMs
        live only and refuse V(false) for one. A stopped VM moves cold either way.
    type: bool
    default: true
  resource_pool:
    description:
      - vSphere - the resource pool to move the VM into (its inventory path, or its name when no
        other pool where it goes has it); unset keeps its pool within its cluster.
    type: str
  datastore:
    description:
      - vSphere - the datastore to move the VM's files to (storage vMotion); unset keeps them.
      - Proxmox VE - the storage the VM's disks on local storage go to (PVE's C(targetstorage));
        unset - the storage of the same name on the target node.
    type: str
  allow_zone_change:
    description:
      - Let the VM move to a hypervisor of another availability zone.
    type: bool
    default: false
  timeout:
    description:
      - libvirt - how long the migration may take (seconds, or a duration such as V(3m)) before
        it is cancelled, the VM left running where it was; shorter than
        C(resilience.timeout_mutating). Unset - 80% of it.
    type: raw
  bandwidth_mib:
    description:
      - libvirt - the most the migration may send, in MiB/s, memory and disks; unset - no limit.
    type: int
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description: Reads where the VM is, runs the prechecks and returns the plan, without moving it.
  diff_mode:
    support: none
    description: Shows where the VM goes in RV(migration) instead.
notes:
  - The provider calls go through the provider's retries, rate limit, circuit breaker and time
    limits like any other call.
seealso:
  - module: resilient.virt.vm
  - module: resilient.virt.failover_reservation
"""

EXAMPLES = r"""
# Assumes providers hv1 and hv2 (libvirt, zones az1 and az2) and vc (vSphere) in module_defaults.
- name: A small VM with a disk, running on hv1
  resilient.virt.vm:
    provider: hv1
    name: mig-web
    vcpus: 1
    memory_mb: 64
    disks:
      - {size_gb: 1, format: qcow2}
    state: running

- name: What a move to hv2 would do (the prechecks run, nothing moves)
  resilient.virt.vm_migrate:
    provider: hv1
    vm: mig-web
    target: hv2
    allow_zone_change: true
  check_mode: true
  register: plan

- name: Move it live to hv2, in another zone, its disk copied
  resilient.virt.vm_migrate:
    provider: hv1
    vm: mig-web
    target: hv2
    allow_zone_change: true
    timeout: 2m
  register: moved

- name: How long it took and how long the guest stood still
  ansible.builtin.debug:
    msg: "{{ moved.migration.duration_seconds }} s, downtime {{ moved.migration.downtime_ms }} ms"

- name: Again - it is on hv2 already, nothing moves
  resilient.virt.vm_migrate:
    provider: hv1
    vm: mig-web
    target: hv2
    allow_zone_change: true

- name: A VM on vCenter, on host DC0_C0_H0
  resilient.virt.vm:
    provider: vc
    name: mig-vc
    vcpus: 1
    memory_mb: 64
    placement: {host: DC0_C0_H0}
    state: running

- name: vMotion to another host of its cluster (with datastore - its files too)
  resilient.virt.vm_migrate:
    provider: vc
    vm: mig-vc
    target: DC0_C0_H1

- name: Remove the VMs
  resilient.virt.vm:
    provider: "{{ item.provider }}"
    name: "{{ item.name }}"
    state: absent
  loop:
    - {provider: hv2, name: mig-web}
    - {provider: vc, name: mig-vc}
"""

RETURN = r"""
vm:
  description:
    - The VM after the move (in check mode, as it would be), as M(resilient.virt.vm_info) shows
      VMs.
  returned: success
  type: dict
migration:
  description: What moved, how, and how long it took.
  returned: success
  type: dict
  contains:
    source:
      description: Where the VM was - C(provider) and C(hypervisor); null when an earlier run had moved it.
      type: dict
    target:
      description: Where the VM is now - C(provider) and C(hypervisor).
      type: dict
    mode:
      description:
        - V(live) (moved while it ran), V(paused) (paused while its memory was copied), V(cold)
          (stopped), or V(none) (it was there already).
      type: str
    live:
      description: The O(live) option as given.
      type: bool
    prechecks:
      description:
        - Each check made before the move - C(check) (V(hypervisor), V(capacity), V(zone),
          V(failover), and V(fleet) for a VM that M(resilient.virt.vm_fleet) keeps and that
          moves to another provider, with what to change in its fleet, also as a warning),
          C(passed) and C(detail); empty when nothing had to move.
      type: list
      elements: dict
    started_at:
      description: When the move started (RFC 3339, UTC); null when nothing moved (and in check mode).
      type: str
      sample: "2026-11-29T10:00:00Z"
    ended_at:
      description: When it ended (RFC 3339, UTC); null when nothing moved.
      type: str
    duration_seconds:
      description: How long the move took; null when nothing moved.
      type: float
    downtime_ms:
      description:
        - How long the guest stood still, as the platform reports it (libvirt's job
          statistics); null where the platform does not say (vSphere, a cold move).
      type: int
    copied_disks:
      description: The paths of the disks copied to the target (libvirt).
      type: list
      elements: str
    shared_disks:
      description:
        - The paths of the disks on storage the source and the target share (libvirt - a pool
          of the same name in which a file made through one host is seen through the other),
          used where they are, neither copied nor deleted.
      type: list
      elements: str
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
from ansible_collections.resilient.virt.plugins.module_utils._migration.task import run_vm_migrate


class VmMigrateModule(ResilientModule):
    argument_spec = dict(
        vm=dict(type="str", required=True),
        target=dict(type="raw", required=True),
        live=dict(type="bool", default=True),
        resource_pool=dict(type="str"),
        datastore=dict(type="str"),
        allow_zone_change=dict(type="bool", default=False),
        timeout=dict(type="raw"),
        bandwidth_mib=dict(type="int"),
    )

    def run(self):
        return run_vm_migrate(self.params, self.context())


def main():
    VmMigrateModule.main()


if __name__ == "__main__":
    main()
