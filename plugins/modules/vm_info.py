#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: vm_info
short_description: List or describe virtual machines across one or more providers
version_added: 0.1.0
description:
  - Lists the VMs of one or more providers, or describes one VM by name, with filters.
  - Read-only; every call goes through the provider's retries, circuit breaker, rate limit and
    describe timeout.
author:
  - resilient.virt developers (!UNKNOWN)
options:
  name:
    description: Describe only this VM. Without it, every VM that matches the filters is listed.
    type: str
  all_providers:
    description: Query every entry of O(providers) instead of O(provider).
    type: bool
    default: false
  filters:
    description: Keep only VMs that match every given filter.
    type: dict
    suboptions:
      name:
        description: Shell-style pattern the VM name must match, for example V(web-*).
        type: str
      state:
        description: Power state.
        type: str
        choices: [running, stopped, paused, suspended, unknown]
      tags:
        description: Tags the VM must all carry.
        type: list
        elements: str
      hypervisor:
        description: Host the VM runs on.
        type: str
      az:
        description: Availability zone of the VM's hypervisor.
        type: str
  snapshots:
    description:
      - Also list each VM's snapshots (RV(vms[].snapshots)), one more provider call per VM; off
        by default, so that listing VMs stays one bulk read. A provider whose backend cannot
        take snapshots gives V(null), with a warning.
    type: bool
    default: false
  on_provider_error:
    description:
      - With several providers, what to do when one of them fails (unreachable, breaker open).
      - V(fail) fails the task; V(warn) returns the VMs of the others, the error under
        RV(provider_errors) and a warning.
    type: str
    choices: [fail, warn]
    default: fail
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Only reads, so there is nothing to diff.
"""

EXAMPLES = r"""
# Assumes providers hv1 (libvirt) and vc (vSphere) in module_defaults, as in resilient.virt.vm's examples.
- name: Every VM on one libvirt host
  resilient.virt.vm_info:
    provider: hv1
  register: found

- name: Running web VMs on every provider set in module_defaults, tolerating one that is down
  resilient.virt.vm_info:
    all_providers: true
    filters:
      state: running
      tags: [web]
    on_provider_error: warn

- name: One VM (an empty list when there is none of that name)
  resilient.virt.vm_info:
    provider: hv1
    name: db1

- name: Name every VM found on hv1
  ansible.builtin.debug:
    msg: "{{ found.vms | map(attribute='name') | list }}"
"""

RETURN = r"""
vms:
  description: The VMs found, sorted by provider then name (empty when O(name) does not exist).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name on the provider.
      type: str
    uuid:
      description: Provider's unique id.
      type: str
    provider:
      description: The provider that reported it, by the name it was given (its entry of
        O(providers), or its C(name)), which O(provider) accepts; its key when it has no name.
      type: str
      sample: hv1
    provider_key:
      description: The provider's key, C(<type>:<name>), which names its circuit breaker and which
        O(provider) accepts too.
      type: str
      sample: libvirt:hv1
    hypervisor:
      description: Host the VM is on.
      type: str
    state:
      description: Power state - V(running), V(stopped), V(paused), V(suspended) or V(unknown).
      type: str
    vcpus:
      description: Virtual CPUs, as configured (what the VM runs with after its next start).
      type: int
    memory_mb:
      description: Memory in MiB, as configured.
      type: int
    tags:
      description: Tags stored with the VM.
      type: list
      elements: str
    autostart:
      description: Whether the VM starts with its host (null when the provider does not say).
      type: bool
    guest:
      description:
        - What the guest reports - C(agent) (true when the QEMU guest agent or VMware Tools
          answers), C(agent_state) (the platform's word for it, such as V(connected),
          V(disconnected), V(unresponsive) or V(guestToolsRunning); null without an agent
          channel), C(os) and C(hostname) (null when unknown).
      type: dict
    placement:
      description:
        - Where the VM is (vSphere) - C(datacenter), C(cluster) (null on a standalone host),
          C(host), C(resource_pool) and C(folder) (inventory paths) and C(datastore) (of its
          configuration file), in the form O(resilient.virt.vm#module:placement) takes. Absent
          on providers that have no placement.
      type: dict
    restart_required:
      description: True when the running VM still runs with something other than its
        configuration (a change waits for its restart).
      type: bool
    addresses:
      description:
        - IP addresses the provider knows for the VM, interface by interface, the primary first
          (vSphere - from VMware Tools; libvirt - from the guest agent, else the DHCP leases of the
          libvirt networks its interfaces use; a read of one VM by O(name) without wildcards
          also asks the host's ARP table). Empty when it knows none, and for a VM that is not
          running or paused (a stopped VM's last DHCP lease is not an address it holds).
        - Each interface of C(interfaces) carries its own C(addresses) and C(address_source)
          (V(agent), V(lease), V(arp), V(tools), or null).
      type: list
      elements: str
    snapshots:
      description:
        - With O(snapshots), the VM's snapshots, parents first (null when its provider cannot take
          snapshots); without it, absent.
      returned: when O(snapshots=true)
      type: list
      elements: dict
      contains:
        name:
          description: The snapshot's name.
          type: str
        created:
          description: When it was taken (RFC 3339, UTC).
          type: str
          sample: "2026-11-23T03:00:00Z"
        parent:
          description: The snapshot it builds on, or null.
          type: str
        memory:
          description: True when it holds the VM's running state.
          type: bool
        current:
          description: True for the VM's current snapshot (what it last took or reverted to).
          type: bool
        description:
          description: Its description (without the line that marks those M(resilient.virt.vm_snapshot) made).
          type: str
        quiesced:
          description: True when the guest's filesystems were frozen while it was taken.
          type: bool
        vm_state:
          description: The state a revert to it leaves the VM in.
          type: str
        id:
          description: The platform's reference of it.
          type: str
        managed:
          description: True when M(resilient.virt.vm_snapshot) made it.
          type: bool
        pinned:
          description: True when it was taken pinned (retention never deletes it).
          type: bool
provider_errors:
  description: Providers that failed, with the error, when O(on_provider_error=warn).
  returned: always
  type: list
  elements: dict
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
from ansible_collections.resilient.virt.plugins.module_utils._vm.task import run_vm_info
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import VM_STATES


class VmInfoModule(ResilientModule):
    argument_spec = dict(
        name=dict(type="str"),
        all_providers=dict(type="bool", default=False),
        filters=dict(
            type="dict",
            options=dict(
                name=dict(type="str"),
                state=dict(type="str", choices=list(VM_STATES)),
                tags=dict(type="list", elements="str"),
                hypervisor=dict(type="str"),
                az=dict(type="str"),
            ),
        ),
        on_provider_error=dict(type="str", default="fail", choices=["fail", "warn"]),
        snapshots=dict(type="bool", default=False),
    )

    def run(self):
        return run_vm_info(self.params, self.context())


def main():
    VmInfoModule.main()


if __name__ == "__main__":
    main()
