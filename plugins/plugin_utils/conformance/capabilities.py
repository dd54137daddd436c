# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A case per optional capability, each skipped (saying why) where the backend does not declare
it: the operations of ``Provider.capabilities`` beyond the lifecycle, and native failover
capacity (the ``resilient_virt_hold_capacity`` hooks)."""
from __future__ import annotations

import json
import uuid
from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils._vm.converge import reconcile
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, NotFound
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    SNAPSHOT_FIELDS)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.checks import (
    HYPERVISOR_FIELDS, check_vm, declared, expect, raised, same, skip)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.faults import (
    Attempts, LostReply)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.harness import Harness

__all__ = ("CapabilityCases",)

FINISHED = ("success", "error")


class CapabilityCases:
    """Cases of the optional capabilities; mixed into ``ConformanceSuite``."""

    def test_validate(self, conformance_backend: Any, tmp_path: Any) -> None:
        """validate answers a JSON-able dict about the endpoint."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            declared(guarded, "validate")
            facts = guarded.validate()
            expect(isinstance(facts, dict), "validate returns a dict, not %r" % (facts,))
            json.dumps(facts)

    def test_list_vms(self, conformance_backend: Any, tmp_path: Any) -> None:
        """list_vms and list_vm_summaries list a new VM as describe does and apply the filters;
        an unknown filter is InvalidSpec naming it."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            declared(guarded, "list_vms")
            name = harness.name("list")
            spec = harness.spec(name)
            guarded.create(spec)
            listed = [vm for vm in guarded.list_vms() if vm["name"] == name]
            expect(len(listed) == 1, "list_vms() lists %r %d times" % (name, len(listed)))
            check_vm(listed[0], guarded, name, spec)
            same(listed[0]["uuid"], guarded.describe(name)["uuid"], "the uuid list_vms() gives")
            for filters, wanted in (({"name": name}, [name]), ({"name": name[:-3] + "*"}, [name]),
                                    ({"name": name, "state": "stopped"}, [name]),
                                    ({"name": name, "state": "running"}, [])):
                same([vm["name"] for vm in guarded.list_vms(filters)], wanted,
                     "the names list_vms(%r) gives" % filters)
            summaries = guarded.list_vm_summaries({"name": name})
            expect([vm["name"] for vm in summaries] == [name], summaries)
            err = raised(guarded.list_vms, {"colour": "red"})
            expect(isinstance(err, InvalidSpec) and "filters.colour" in err.message, err)

    def test_list_hypervisors(self, conformance_backend: Any, tmp_path: Any) -> None:
        """list_hypervisors gives dicts of every hypervisor field, and names the hypervisor a
        new VM reports."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            declared(guarded, "list_hypervisors")
            hypervisors = guarded.list_hypervisors()
            expect(hypervisors, "list_hypervisors() gives none")
            for hypervisor in hypervisors:
                absent = [key for key in HYPERVISOR_FIELDS if key not in hypervisor]
                expect(not absent, "hypervisor %r lacks %s" % (hypervisor.get("name"), absent))
                for key in ("cpu", "memory_mb", "used_cpu", "used_memory_mb"):
                    expect(hypervisor[key] is None or hypervisor[key] >= 0, (key, hypervisor))
                json.dumps(hypervisor)
            name = harness.name("hypervisor")
            where = guarded.create(harness.spec(name))["hypervisor"]
            expect(where in [hypervisor["name"] for hypervisor in hypervisors],
                   "the new VM is on %r, which list_hypervisors() does not name" % where)

    def test_find(self, conformance_backend: Any, tmp_path: Any) -> None:
        """find(uuid) names the VM so that describe finds it; an unknown uuid is NotFound."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            declared(guarded, "find")
            name = harness.name("find")
            vm = guarded.create(harness.spec(name))
            found = guarded.describe(guarded.find(vm["uuid"]))
            expect((found["name"], found["uuid"]) == (name, vm["uuid"]), found)
            err = raised(guarded.find, str(uuid.uuid4()))
            expect(isinstance(err, NotFound), "find of an unknown uuid: %r" % err)

    def test_reconfigure(self, conformance_backend: Any, tmp_path: Any) -> None:
        """The vm task with more memory changes the VM once, then nothing."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            declared(guarded, "reconfigure")
            if "memory_mb" not in guarded.reconfigurable:
                skip("the %s provider cannot change memory_mb (Provider.reconfigurable)"
                     % guarded.type_name)
            name = harness.name("reconfigure")
            spec = harness.spec(name)
            reconcile(guarded, name, "present", spec)
            bigger = dict(spec, memory_mb=spec["memory_mb"] * 2)
            changed = reconcile(guarded, name, "present", bigger)
            expect((changed["changed"], changed["actions"]) == (True, ["reconfigure"]), changed)
            same(guarded.describe(name)["memory_mb"], bigger["memory_mb"], "memory_mb described")
            again = reconcile(guarded, name, "present", bigger)
            expect((again["changed"], again["actions"]) == (False, []), again)

    def test_task_status(self, conformance_backend: Any, tmp_path: Any) -> None:
        """Every operation a create and the power actions recorded with ``Provider.started``
        has ended by the time the call returns, as task_status tells."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            declared(guarded, "task_status")
            handles: list[str] = []
            record = guarded.provider.started

            def started(handle: str) -> None:
                handles.append(handle)
                record(handle)

            guarded.provider.started = started
            name = harness.name("tasks")
            reconcile(guarded, name, "running", harness.spec(name))
            guarded.power(name, "off")
            if not handles:
                skip("the %s provider recorded no operation with Provider.started"
                     % guarded.type_name)
            for handle in handles:
                status = guarded.task_status(handle)
                expect(status.get("state") in FINISHED, (handle, status))

    def test_migrate(self, conformance_backend: Any, tmp_path: Any) -> None:
        """migrate moves a VM to another hypervisor (one of its availability zone first)."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            declared(guarded, "migrate")
            declared(guarded, "list_hypervisors")
            name = harness.name("migrate")
            vm = guarded.create(harness.spec(name))
            others = sorted((hypervisor["az"] != vm["az"], hypervisor["name"])
                            for hypervisor in guarded.list_hypervisors()
                            if hypervisor["name"] != vm["hypervisor"])
            if not others:
                skip("the test environment has one hypervisor only")
            target = others[0][1]
            moved = guarded.migrate(name, target)
            expect(moved["hypervisor"] == target == guarded.describe(name)["hypervisor"], moved)

    def test_snapshots(self, conformance_backend: Any, tmp_path: Any) -> None:
        """Snapshots of a stopped VM: taken (a lost reply not taken again), listed parents
        first, reverted to once the VM runs (it stops again), deleted; deleting one already
        gone is NotFound."""
        with Harness(conformance_backend, tmp_path) as harness:
            attempts = Attempts()
            guarded = harness.open(plugins=(LostReply("create_snapshot"), attempts))
            declared(guarded, "list_snapshots")
            name = harness.name("snapshots")
            guarded.create(harness.spec(name))
            same(guarded.list_snapshots(name), [], "the snapshots of a new VM")
            first = guarded.create_snapshot(name, "first", description="conformance")
            absent = [key for key in SNAPSHOT_FIELDS if key not in first]
            expect(not absent, "the snapshot dict lacks %s (contract.SNAPSHOT_FIELDS)" % absent)
            expect((first["name"], first["description"]) == ("first", "conformance"), first)
            json.dumps(first)
            expect(attempts.outcomes("create_snapshot") == ["error", "ok"], attempts.ended)
            expect(attempts.started.count("create_snapshot") == 1, "the snapshot was taken twice")
            second = guarded.create_snapshot(name, "second")
            expect(second["parent"] == "first", second)
            same([snap["name"] for snap in guarded.list_snapshots(name)], ["first", "second"],
                 "the snapshots listed")
            expect(first["vm_state"] == "stopped", first)
            guarded.power(name, "on")
            reverted = guarded.revert_snapshot(name, "first")
            expect(reverted["state"] == "stopped" == guarded.describe(name)["state"],
                   "a revert to a snapshot of the stopped VM left it %s" % reverted["state"])
            guarded.delete_snapshot(name, "second")
            guarded.delete_snapshot(name, "first")
            same(guarded.list_snapshots(name), [], "the snapshots left after deleting both")
            err = raised(guarded.delete_snapshot, name, "first")
            expect(isinstance(err, NotFound), "deleting a deleted snapshot: %r" % err)

    def test_native_capacity(self, conformance_backend: Any, tmp_path: Any) -> None:
        """hold_capacity answers a JSON-able dict, holding twice works, and release answers
        True, also for what is already released."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            hypervisor = guarded.list_hypervisors()[0] if "list_hypervisors" in \
                guarded.capabilities else {"name": None, "az": guarded.provider.config.get("az")}
            reservation = {"name": "conformance-capacity-%s" % uuid.uuid4().hex[:6],
                           "hypervisor": hypervisor["name"], "az": hypervisor["az"],
                           "vcpus": 1, "memory_mb": 64}
            held = guarded.hold_capacity(reservation)
            if held is None:
                skip("no plugin holds capacity natively for the %s provider "
                     "(resilient_virt_hold_capacity)" % guarded.type_name)
            try:
                json.dumps(held)
                expect(guarded.hold_capacity(reservation) is not None, "holding again failed")
                same(guarded.release_capacity(dict(reservation, held=held)), True,
                     "what release_capacity answers")
            finally:
                released = guarded.release_capacity(dict(reservation, held=held))
            expect(released is True, "releasing what is already released must answer True")
