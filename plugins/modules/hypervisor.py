#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: hypervisor
short_description: Drain a hypervisor into maintenance, fence a failed one, or bring it back
version_added: 0.4.0
description:
  - "O(state=maintenance) drains the hypervisor O(name) of O(provider): it plans where each of
    its VMs goes before anything moves - with the prechecks of M(resilient.virt.vm_migrate) on
    every target (takes VMs, capacity, zone, the failover reservations' rules), counting the VMs
    already planned there - then moves the running VMs live, at most O(parallel) at a time, each
    as M(resilient.virt.vm_migrate) moves one, moves or leaves the stopped ones (O(stopped_vms)),
    and then marks the hypervisor in maintenance in the state store (vSphere - also the host's
    maintenance mode). docs/migration.md says how."
  - "A drain that cannot finish fails with Conflict naming each VM left and why; it moves only
    what passes its checks, and the hypervisor is not marked. Run it again: it plans only the
    VMs still there."
  - "While a hypervisor is in maintenance, M(resilient.virt.vm) and M(resilient.virt.vm_fleet)
    create no VM on it, M(resilient.virt.failover_reservation) places no reservation on it, moves
    to it are refused, and the P(resilient.virt.hypervisors#inventory) inventory shows it."
  - "O(state=fenced) is the confirm and fence step of hands-off recovery (docs/ha.md): the
    hypervisor must stay unreachable for O(grace) seconds from O(unreachable_since) (else from
    the task's start), checked every O(confirm_interval) seconds on a new connection of the task's
    own (not the event source's), and once more after the grace. One check that answers ends
    the task with nothing done (a flap, RV(hypervisor.reachable) true). A vSphere host is
    checked through its vCenter (unreachable when vCenter reports it not connected); when
    vCenter itself does not answer the last check, the task fails with nothing fenced
    (RV(hypervisor.reachable) null). Then the fence agent of
    O(fencing) must prove it off; when it cannot, the task fails with the agent's reason and
    nothing is marked - a hypervisor that cannot be fenced is never recovered automatically.
    A fenced hypervisor is marked fenced in the state store: the modules that place VMs and
    reservations treat it as they treat one in maintenance."
  - O(state=active) ends the maintenance, and the fenced mark (after repair). All three are
    idempotent - a hypervisor already marked fenced is checked once and not fenced again.
author:
  - resilient.virt developers (!UNKNOWN)
options:
  name:
    description:
      - The hypervisor - an ESXi host of O(provider) (vSphere); may be left out when the
        provider is one host (libvirt; with O(state=fenced), when the provider has a C(name)).
    type: str
  state:
    description:
      - V(maintenance) drains it and marks it; V(fenced) confirms it unreachable, fences it and
        marks it fenced; V(active) ends its maintenance or fenced mark (moves nothing back).
    type: str
    choices: [maintenance, active, fenced]
    default: maintenance
  fencing:
    description:
      - "O(state=fenced) (required) - the fence agent's settings: C(type), the agent
        (V(redfish) or V(ipmi) built in, or a plugin's, such as the lab's V(lab_only_power)), and
        its own settings; for V(redfish) - C(address) (the BMC's URL), C(username), C(password),
        C(system), C(ca_path), C(validate_certs); for V(ipmi) (IPMI 2.0 over LAN) - C(address)
        (the BMC's host name or IP address), C(port) (UDP, default 623), C(username),
        C(password), C(kg) (the BMC key, when the BMC has one) (docs/ha.md)."
      - The values of settings whose names say secret (C(password), C(kg), C(token), C(secret)
        ...) are kept out of results, logs and the state store.
    type: dict
  grace:
    description:
      - O(state=fenced) - seconds the hypervisor must stay unreachable, counted from
        O(unreachable_since), else from the task's start, before it is fenced; 0 fences after
        one failed check.
    type: raw
    default: 30
  confirm_interval:
    description:
      - O(state=fenced) - seconds between two checks during the grace.
    type: raw
    default: 5
  unreachable_since:
    description:
      - O(state=fenced) - when the hypervisor was first seen unreachable (RFC 3339), such as the
        C(since) of the C(hypervisor_unreachable) event of the C(resilient.virt.hypervisor_events) event source.
    type: str
  fence_timeout:
    description:
      - O(state=fenced) - seconds the fence agent has to power the hypervisor off and prove it.
    type: raw
    default: 60
  targets:
    description:
      - "Where the VMs may go. libvirt - other providers (names of O(providers), keys or dicts);
        unset - every other entry of O(providers) of the same type. vSphere - host names of
        O(provider); unset - its other hosts."
    type: list
    elements: raw
  parallel:
    description:
      - How many VMs move at a time (1 to 16).
    type: int
    default: 2
  stopped_vms:
    description:
      - What happens to the VMs that are not running or paused - V(leave) them on the
        hypervisor, or V(move) them (cold) like the others.
    type: str
    choices: [leave, move]
    default: leave
  allow_zone_change:
    description:
      - Let VMs move to a hypervisor of another availability zone.
    type: bool
    default: false
  timeout:
    description:
      - libvirt - how long each VM's migration may take, as O(resilient.virt.vm_migrate#module:timeout).
    type: raw
  bandwidth_mib:
    description:
      - libvirt - the most each migration may send, in MiB/s; unset - no limit.
    type: int
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description:
      - Plans the drain (RV(drain.planned), RV(drain.left)) without moving or marking anything.
      - O(state=fenced) - waits out the grace and checks as usual, then says what it would do in
        RV(hypervisor.reason), fencing and marking nothing.
  diff_mode:
    support: none
    description: Shows the plan in RV(drain) instead.
notes:
  - The provider calls go through the provider's retries, rate limit, circuit breaker and time
    limits like any other call.
seealso:
  - module: resilient.virt.vm_migrate
  - module: resilient.virt.failover_reservation
"""

EXAMPLES = r"""
# Assumes libvirt providers hv1 and hv2 (zones az1 and az2) and vc (vSphere) in module_defaults.
- name: A small VM running on hv1
  resilient.virt.vm:
    provider: hv1
    name: drain-web
    vcpus: 1
    memory_mb: 64
    disks:
      - {size_gb: 1, format: qcow2}
    state: running

- name: What draining hv1 would do
  resilient.virt.hypervisor:
    provider: hv1
    state: maintenance
    targets: [hv2]
    allow_zone_change: true
  check_mode: true
  register: plan

- name: Drain hv1 - its running VMs move live to hv2 - and mark it in maintenance
  resilient.virt.hypervisor:
    provider: hv1
    state: maintenance
    targets: [hv2]
    allow_zone_change: true
    parallel: 2
    timeout: 2m
  register: drained

- name: Which VMs went where
  ansible.builtin.debug:
    msg: "{{ drained.drain.moved | map(attribute='vm') | list }}"

- name: End the maintenance of hv1 (once it is patched and rebooted)
  resilient.virt.hypervisor:
    provider: hv1
    state: active

- name: Where the VMs of ESXi host DC0_C0_H1 would go before it enters maintenance mode
  resilient.virt.hypervisor:
    provider: vc
    name: DC0_C0_H1
    state: maintenance
  check_mode: true

- name: >-
    Fence hv1 once it has been unreachable for the grace (from the event's since, when a
    rulebook passes it) - hv1 answers here, so nothing is fenced: a flap
  resilient.virt.hypervisor:
    provider: hv1
    state: fenced
    unreachable_since: "{{ ansible_eda.event.since | default(omit) }}"
    grace: 3
    confirm_interval: 1
    fencing:
      type: redfish
      address: https://hv1-bmc.example.com
      username: fence
      password: "{{ bmc_password | default('change-me') }}"
  register: fenced

- name: Fenced, or why not
  ansible.builtin.debug:
    msg: "fenced={{ fenced.hypervisor.fenced }}: {{ fenced.hypervisor.reason }}"

- name: Remove the VM
  resilient.virt.vm:
    provider: hv2
    name: drain-web
    state: absent
"""

RETURN = r"""
hypervisor:
  description:
    - The hypervisor - C(provider) (its key), C(name) and the C(state) asked for; with
      O(state=fenced) also what the checks found and what was done, on failure too.
  returned: always, except when the options were refused
  type: dict
  contains:
    provider:
      description: The provider's key (C(<type>:<name>)).
      type: str
    name:
      description: The hypervisor's name.
      type: str
    state:
      description: The state asked for.
      type: str
    fenced:
      description: O(state=fenced) - true when the hypervisor is fenced (now or already marked so).
      type: bool
      returned: when O(state=fenced)
    reachable:
      description:
        - O(state=fenced) - what the last check found - true when the hypervisor answered (a
          flap - nothing fenced), false when it did not, null when it could not ask (a vSphere
          host whose vCenter did not answer - nothing fenced).
      type: bool
      returned: when O(state=fenced)
    reason:
      description: O(state=fenced) - what was found and done, or why nothing was.
      type: str
      returned: when O(state=fenced)
      sample: "reachable again at 2026-11-29T13:40:02Z; a flap, nothing fenced"
    unreachable_since:
      description: O(state=fenced) - where the grace was counted from (RFC 3339, UTC).
      type: str
      returned: when O(state=fenced)
    checked_at:
      description: O(state=fenced) - when the last check ended (RFC 3339, UTC).
      type: str
      returned: when O(state=fenced)
    checks:
      description: O(state=fenced) - how many checks the task made.
      type: int
      returned: when O(state=fenced)
fence:
  description:
    - O(state=fenced) - the fence agent's answer - C(agent) (the fencing type), C(fenced) (true
      only when it proved the hypervisor off), C(action), C(evidence), C(reason) (why not) and
      C(at) (RFC 3339, UTC); for a hypervisor already fenced, the answer its mark records. Null
      when nothing was fenced (a flap, check mode). No secret of O(fencing) is in it.
  returned: when O(state=fenced), on failure too
  type: dict
  sample: {"agent": "redfish", "fenced": true, "action": "ForceOff", "reason": null,
           "evidence": "PowerState Off read back from /redfish/v1/Systems/1", "at": "2026-11-29T13:40:05Z"}
drain:
  description:
    - The drain (O(state=maintenance)) - on failure too, in the failed result.
  returned: when O(state=maintenance)
  type: dict
  contains:
    planned:
      description: The moves planned - C(vm), C(state), C(target) (provider key or host) and C(hypervisor).
      type: list
      elements: dict
    moved:
      description:
        - The moves made (empty in check mode), as in RV(drain.planned), with C(mode),
          C(changed), C(duration_seconds) and C(downtime_ms) as M(resilient.virt.vm_migrate)
          returns them.
      type: list
      elements: dict
    stays:
      description: The stopped VMs left on the hypervisor (O(stopped_vms=leave)) - C(vm), C(why).
      type: list
      elements: dict
    left:
      description:
        - The VMs that could not move - C(vm) and C(why) (each target's failed checks, or the
          error of its move). The hypervisor is marked only when this is empty.
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
from ansible_collections.resilient.virt.plugins.module_utils._migration.task import run_hypervisor


class HypervisorModule(ResilientModule):
    argument_spec = dict(
        name=dict(type="str"),
        state=dict(type="str", choices=["maintenance", "active", "fenced"], default="maintenance"),
        fencing=dict(type="dict"),
        grace=dict(type="raw", default=30),
        confirm_interval=dict(type="raw", default=5),
        unreachable_since=dict(type="str"),
        fence_timeout=dict(type="raw", default=60),
        targets=dict(type="list", elements="raw"),
        parallel=dict(type="int", default=2),
        stopped_vms=dict(type="str", choices=["leave", "move"], default="leave"),
        allow_zone_change=dict(type="bool", default=False),
        timeout=dict(type="raw"),
        bandwidth_mib=dict(type="int"),
    )

    def run(self):
        return run_hypervisor(self.params, self.context())


def main():
    HypervisorModule.main()


if __name__ == "__main__":
    main()
