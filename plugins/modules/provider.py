#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: provider
short_description: Validate a hypervisor provider and report its capabilities, health and breaker
version_added: 0.1.0
description:
  - Checks that a provider answers and accepts the credentials, and reports what its backend can
    do, its conditions (C(ProviderRuntimeReady), C(ProviderAvailable)), its hypervisors and the
    state of its circuit breaker.
  - A provider that is down gives a result with C(ProviderAvailable=False) and a failed task, so
    a play can stop early or skip that provider.
  - O(state=reset) closes the provider's circuit breaker after an outage that is known to be over.
author:
  - resilient.virt developers (!UNKNOWN)
options:
  state:
    description:
      - V(validated) checks connectivity and credentials.
      - V(reset) closes the provider's circuit breaker (without contacting the provider), then reports it.
    type: str
    choices: [validated, reset]
    default: validated
  list_hypervisors:
    description: Also return the provider's hypervisors with their capacity and usage.
    type: bool
    default: true
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description: Validation is read-only; V(reset) reports whether it would change the breaker.
  diff_mode:
    description: Shows the breaker before and after a reset.
"""

EXAMPLES = r"""
# Assumes providers hv1 (libvirt) and vc (vSphere) in module_defaults, as in resilient.virt.vm's examples.
- name: Check a libvirt host
  resilient.virt.provider:
    provider: hv1
  register: hv1_check

- name: Check a vCenter without listing its hosts
  resilient.virt.provider:
    provider: vc
    list_hypervisors: false

- name: Check every host of the inventory, each with its own provider dict in the host variable resilient_virt_provider
  resilient.virt.provider:
    provider: "{{ resilient_virt_provider }}"
  ignore_errors: true  # a provider that is down fails its host's task; the play goes on

- name: Close the breaker after maintenance
  resilient.virt.provider:
    provider: hv1
    state: reset
"""

RETURN = r"""
provider:
  description: What is known of the provider.
  returned: always
  type: dict
  contains:
    key:
      description: C(<type>:<name>); also the name of its circuit breaker.
      type: str
      sample: libvirt:hv1
    type:
      description: Backend type.
      type: str
    capabilities:
      description: Operations the backend supports.
      type: list
      elements: str
    info:
      description: What validation learnt (versions, host name); absent for O(state=reset).
      type: dict
hypervisors:
  description:
    - Hypervisors of the provider with C(name), C(az), C(cpu), C(memory_mb), C(used_cpu),
      C(used_memory_mb), C(state), C(traits) and, where the backend counts them (libvirt,
      vSphere), C(vm_count).
  returned: when O(list_hypervisors) and validation succeeded
  type: list
  elements: dict
conditions:
  description: C(ProviderRuntimeReady) (the backend loaded) and C(ProviderAvailable) (the health check passed).
  returned: always
  type: list
  elements: dict
breaker:
  description:
    - The provider's circuit breaker after the task.
    - When the task fails with the error that the breaker recorded last, C(last_error) holds only
      its C(type), since the message is given once, in C(msg).
  returned: always
  type: dict
available:
  description: True when the provider answered its health check; false when it did not.
  returned: when O(state=validated) and the backend loaded
  type: bool
diff:
  description: The breaker before and after a reset, with C(--diff).
  returned: when O(state=reset) changes the breaker
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

from ansible_collections.resilient.virt.plugins.module_utils._health.task import run_provider
from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule


class ProviderModule(ResilientModule):
    argument_spec = dict(
        state=dict(type="str", default="validated", choices=["validated", "reset"]),
        list_hypervisors=dict(type="bool", default=True),
    )

    def run(self):
        return run_provider(self.params, self.context())


def main():
    ProviderModule.main()


if __name__ == "__main__":
    main()
