#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: circuit_breaker
short_description: List, show, reset, force open or remove the circuit breakers that guard providers
version_added: 0.1.0
description:
  - Every provider gets a circuit breaker, shared by all forks and runs through the state store.
    After O(resilience.failure_threshold) consecutive failures that show the provider is unhealthy
    it opens and calls fail fast until O(resilience.reset_timeout) has passed since it opened.
  - This module lists breakers and their counters, shows one, resets one to closed, forces one
    open (for example before maintenance of a hypervisor), or removes one.
author:
  - resilient.virt developers (!UNKNOWN)
options:
  name:
    description:
      - The breaker to show or change, for example C(libvirt:hv1). Breakers are named after the
        provider they guard (C(<type>:<name>)).
      - Instead of O(name), O(provider) names the breaker of that provider.
      - Checked before the state store is read - a non-empty string of at most 255 characters
        without control, invisible or direction-changing characters.
      - One of them is required when O(state) is V(reset), V(open) or V(absent).
      - A breaker comes into being with the first call to its provider. O(state=open) and
        O(state=reset) refuse a O(name) that names no breaker (a typo would otherwise create and
        open a breaker that guards nothing); give O(provider) to open or reset the breaker of a
        provider that has not been called yet.
    type: str
  state:
    description:
      - V(query) lists every breaker, or shows O(name).
      - V(reset) closes the breaker and clears its current failure streak (totals are kept).
      - V(open) forces it open now; it half-opens after its reset timeout like any open breaker.
      - V(absent) removes the breaker with its counters; the next call to its provider starts a
        new, closed one.
    type: str
    choices: [query, reset, open, absent]
    default: query
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description: Reports what would change without writing to the state store.
  diff_mode:
    description: Shows the breaker before and after.
notes:
  - The O(resilience) failure threshold and reset timeout used for a breaker created by this
    module are those of the task; a breaker created by a provider call keeps that call's settings.
  - Every module that uses the state store publishes all its breakers in the fact
    C(resilient_virt_breakers), in short form. Ansible does not keep the facts of a failed task,
    so after a failure the fact holds what the last task that succeeded published; this module
    shows the breakers as they are.
"""

EXAMPLES = r"""
# Assumes providers hv1 (libvirt) and vc (vSphere) in module_defaults, as in resilient.virt.vm's examples.
- name: Show every breaker
  resilient.virt.circuit_breaker:
  register: breakers

- name: Hold calls to a hypervisor before maintenance (a breaker comes into being with its first call)
  resilient.virt.circuit_breaker:
    provider: hv1
    state: open
    resilience:
      reset_timeout: 30m

- name: Show the breaker of one hypervisor, by name
  resilient.virt.circuit_breaker:
    name: libvirt:hv1

- name: Skip the hypervisors whose breaker is open
  ansible.builtin.debug:
    msg: "{{ item.key }} refuses calls until {{ item.value.half_open_at }}"
  loop: "{{ resilient_virt_breakers | default({}) | dict2items | selectattr('value.state', 'eq', 'open') }}"

- name: Let calls through again after maintenance
  resilient.virt.circuit_breaker:
    provider: hv1
    state: reset

- name: Forget the breaker of a decommissioned hypervisor
  resilient.virt.circuit_breaker:
    name: libvirt:hv9
    state: absent
"""

RETURN = r"""
breakers:
  description: Every breaker in the state store (only O(name) when given), sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Breaker name, C(<provider type>:<provider name>).
      type: str
      sample: libvirt:hv1
    state:
      description: V(closed), V(open) or V(half_open).
      type: str
      sample: open
    consecutive_failures:
      description: Failures in a row in the current episode.
      type: int
    failures_total:
      description: Failures that counted against the breaker since it was created.
      type: int
    opened_total:
      description: How many times it opened.
      type: int
    rejected_total:
      description: Calls rejected without reaching the provider.
      type: int
    successes_total:
      description: Calls that proved the provider alive.
      type: int
    opened_at:
      description: When it last opened (RFC 3339, UTC), or null.
      type: str
      sample: "2026-11-21T10:00:00Z"
    half_open_at:
      description: When an open breaker lets a probe through (RFC 3339, UTC, rounded up to the
        second), or null.
      type: str
      sample: "2026-11-21T10:00:30Z"
    last_error:
      description: The last failure that counted against it (C(type), C(message)), or null.
      type: dict
    probes_in_flight:
      description: Probe calls of a half-open breaker under way.
      type: int
    failure_threshold:
      description: Failures in a row that open it.
      type: int
    reset_timeout:
      description: Seconds from opening to half-opening.
      type: float
    half_open_max_calls:
      description: Probe calls let through at once while half-open.
      type: int
    success_threshold:
      description: Successful probes that close it.
      type: int
    probe_lease:
      description: Seconds a probe holds its slot at most.
      type: float
breaker:
  description: The breaker named by O(name) or O(provider) after the task (as in RV(breakers)),
    or null when it does not exist (after O(state=absent)).
  returned: when O(name) or O(provider) is given
  type: dict
diff:
  description: The breaker before and after, with C(--diff).
  returned: when a breaker changes
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

from ansible_collections.resilient.virt.plugins.module_utils._health.task import run_circuit_breaker
from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule


class CircuitBreakerModule(ResilientModule):
    argument_spec = dict(
        name=dict(type="str"),
        state=dict(type="str", default="query", choices=["query", "reset", "open", "absent"]),
    )
    module_kwargs = dict(
        mutually_exclusive=[("name", "provider")],
        required_if=[("state", "reset", ["name", "provider"], True),
                     ("state", "open", ["name", "provider"], True),
                     ("state", "absent", ["name", "provider"], True)],
    )

    def run(self):
        return run_circuit_breaker(self.params, self.context())


def main():
    CircuitBreakerModule.main()


if __name__ == "__main__":
    main()
