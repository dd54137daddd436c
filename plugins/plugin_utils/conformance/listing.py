# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The case of ``list_hypervisors_and_vms`` for a backend that declares its own (overrides the
contract's, which is ``list_hypervisors`` and ``list_vm_summaries`` called one after the other):
its answer must be what those two give, apart from what the contract lets it leave unknown.
Mixed into ``ConformanceSuite``."""
from __future__ import annotations

from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils._vm.converge import reconcile
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import Provider
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.checks import (
    HYPERVISOR_FIELDS, check_vm, declared, expect, same, skip)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.harness import Harness

__all__ = ("ListingCases",)

# VM fields the combined listing gives as list_vm_summaries does; the contract lets it leave the
# others of UNKNOWN_ALLOWED unknown (they may cost a request per VM)
SAME_FIELDS = ("name", "hypervisor", "state", "vcpus", "memory_mb", "tags", "provider_key")
UNKNOWN_ALLOWED = {"uuid": None, "metadata": {}, "autostart": None}


def _declares(guarded: Any) -> bool:
    """True when the provider's class has its own ``list_hypervisors_and_vms``."""
    return type(guarded.provider).list_hypervisors_and_vms is not Provider.list_hypervisors_and_vms


def _by_name(vms: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [vm for vm in vms if vm.get("name") == name]


class ListingCases:
    """Cases of the inventory's one listing (``Provider.list_hypervisors_and_vms``)."""

    def test_list_hypervisors_and_vms(self, conformance_backend: Any, tmp_path: Any) -> None:
        """A backend's own list_hypervisors_and_vms gives the hypervisors list_hypervisors
        gives (names and states, every hypervisor field) and the VMs list_vm_summaries gives,
        with the same filters: a stopped and a running VM each listed once, their name,
        hypervisor, state, vCPUs, memory, tags and provider key the same, their uuid, metadata
        and autostart the same or unknown."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            declared(guarded, "list_hypervisors")
            declared(guarded, "list_vms")
            if not _declares(guarded):
                skip("the %s provider keeps the contract's list_hypervisors_and_vms "
                     "(list_hypervisors, then list_vm_summaries)" % guarded.type_name)
            stopped, running = harness.name("listing-off"), harness.name("listing-on")
            guarded.create(harness.spec(stopped))
            reconcile(guarded, running, "running", harness.spec(running))
            both = guarded.list_hypervisors_and_vms()
            expect(isinstance(both, dict) and set(both) >= {"hypervisors", "vms"},
                   "list_hypervisors_and_vms gives a dict of hypervisors and vms: %r" % (both,))
            self._same_hypervisors(both["hypervisors"], guarded.list_hypervisors())
            summaries = guarded.list_vm_summaries()
            for name, spec_name in ((stopped, stopped), (running, running)):
                self._same_vm(guarded, harness.spec(spec_name), name, both["vms"], summaries)
            for filters, wanted in (({"name": stopped}, [stopped]),
                                    ({"name": running, "state": "running"}, [running]),
                                    ({"name": stopped, "state": "running"}, [])):
                filtered = guarded.list_hypervisors_and_vms(filters)
                same([vm["name"] for vm in filtered["vms"]], wanted,
                     "the VMs list_hypervisors_and_vms(%r) gives" % filters)
                same([vm["name"] for vm in guarded.list_vm_summaries(filters)], wanted,
                     "the VMs list_vm_summaries(%r) gives" % filters)
                same(sorted(h["name"] for h in filtered["hypervisors"]),
                     sorted(h["name"] for h in both["hypervisors"]),
                     "the hypervisors with the filters %r (filters apply to VMs only)" % filters)

    @staticmethod
    def _same_hypervisors(combined: list[dict[str, Any]], alone: list[dict[str, Any]]) -> None:
        for hypervisor in combined:
            absent = [key for key in HYPERVISOR_FIELDS if key not in hypervisor]
            expect(not absent, "hypervisor %r lacks %s" % (hypervisor.get("name"), absent))
        same(sorted((h["name"], h["state"]) for h in combined),
             sorted((h["name"], h["state"]) for h in alone),
             "the hypervisors (name, state) of list_hypervisors_and_vms against list_hypervisors")

    @staticmethod
    def _same_vm(guarded: Any, spec: dict[str, Any], name: str, combined: list[dict[str, Any]],
                 summaries: list[dict[str, Any]]) -> None:
        found, alone = _by_name(combined, name), _by_name(summaries, name)
        expect(len(found) == 1, "list_hypervisors_and_vms lists %r %d times" % (name, len(found)))
        expect(len(alone) == 1, "list_vm_summaries lists %r %d times" % (name, len(alone)))
        vm, summary = found[0], alone[0]
        check_vm(vm, guarded, name, spec)
        for field in SAME_FIELDS:
            same(vm[field], summary[field], "%s of %r in list_hypervisors_and_vms against "
                 "list_vm_summaries" % (field, name))
        for field, unknown in UNKNOWN_ALLOWED.items():
            expect(vm[field] in (summary[field], unknown),
                   "%s of %r is %r in list_hypervisors_and_vms, %r in list_vm_summaries (the "
                   "same, or unknown: %r)" % (field, name, vm[field], summary[field], unknown))
