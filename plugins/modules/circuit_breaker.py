#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: circuit_breaker
short_description: List, show, reset or force open the circuit breakers that guard providers
version_added: 0.1.0
description:
  - Every provider gets a circuit breaker, shared by all forks and runs through the state store.
    After O(resilience.failure_threshold) consecutive failures that show the provider is unhealthy
    it opens and calls fail fast until O(resilience.reset_timeout) has passed since it opened.
  - This module lists breakers and their counters, shows one, resets one to closed, or forces one
    open (for example before maintenance of a hypervisor).
author:
  - resilient.virt developers (!UNKNOWN)
options:
  name:
    description:
      - The breaker to show or change, for example C(libvirt:hv1). Breakers are named after the
        provider they guard (C(<type>:<name>)).
      - Instead of O(name), O(provider) names the breaker of that provider.
      - One of them is required when O(state) is V(reset) or V(open).
    type: str
  state:
    description:
      - V(query) lists every breaker, or shows O(name).
      - V(reset) closes the breaker and clears its current failure streak (totals are kept).
      - V(open) forces it open now; it half-opens after its reset timeout like any open breaker.
    type: str
    choices: [query, reset, open]
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
"""

EXAMPLES = r"""
- name: Show every breaker
  resilient.virt.circuit_breaker:
  register: breakers

- name: Show the breaker of one hypervisor
  resilient.virt.circuit_breaker:
    name: libvirt:hv1

- name: Hold calls to a hypervisor before maintenance
  resilient.virt.circuit_breaker:
    name: libvirt:hv1
    state: open
    resilience:
      reset_timeout: 30m

- name: Let calls through again after maintenance (the breaker of a provider, by provider)
  resilient.virt.circuit_breaker:
    provider: {type: libvirt, name: hv1, uri: "qemu+ssh://root@hv1/system"}
    state: reset
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
    opened_at:
      description: Epoch seconds when it last opened, or null.
      type: float
    half_open_at:
      description: Epoch seconds when an open breaker lets probes through, or null.
      type: float
breaker:
  description: The breaker named by O(name) after the task, or null when it does not exist.
  returned: when O(name) is given
  type: dict
diff:
  description: The breaker before and after, with C(--diff).
  returned: when a breaker changes
  type: dict
ansible_facts:
  description: Facts for the fact cache and AWX.
  returned: always
  type: dict
  contains:
    resilient_virt_breakers:
      description: The breakers by name.
      type: dict
"""

from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule
from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound


class CircuitBreakerModule(ResilientModule):
    argument_spec = dict(
        name=dict(type="str"),
        state=dict(type="str", default="query", choices=["query", "reset", "open"]),
    )
    module_kwargs = dict(
        mutually_exclusive=[("name", "provider")],
        required_if=[("state", "reset", ["name", "provider"], True), ("state", "open", ["name", "provider"], True)],
    )

    def _name(self):
        if self.params["provider"] is None:
            return self.params["name"]
        from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import provider_key

        return provider_key(self.provider_config())

    def run(self):
        from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy

        name, state = self._name(), self.params["state"]
        result = dict(changed=False)
        if state != "query":
            breaker = Policy(self.store, name, self.settings).breaker
            wanted = "closed" if state == "reset" else "open"
            result["changed"], before, after = breaker.set_state(wanted, self.check_mode)
            if result["changed"] and self.diff_mode:
                result["diff"] = dict(before=before, after=after)
        facts = self.breaker_facts()
        result["breakers"] = [snap for key, snap in sorted(facts.items()) if name is None or key == name]
        if name is not None:
            result["breaker"] = facts.get(name) if not (self.check_mode and result["changed"]) else after
            if state == "query" and result["breaker"] is None:
                raise NotFound("no circuit breaker named %r; list them with this module without 'name'" % name)
        result["ansible_facts"] = {"resilient_virt_breakers": facts}
        return result


def main():
    CircuitBreakerModule.main()


if __name__ == "__main__":
    main()
