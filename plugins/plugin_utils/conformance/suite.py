# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The conformance suite: what every backend owes the contract, as pytest test methods.

A backend's test module subclasses :class:`ConformanceSuite` in a class whose name starts with
``Test`` and gives a fixture ``conformance_backend`` returning a :class:`~.backend.Backend`;
every case takes it and pytest's ``tmp_path`` (the case's state store). Cases call the provider
as the collection's tasks do, through ``open_provider`` (hooks and resilience policy included);
the VM states and idempotence go through the ``vm`` task's own planner (``_vm/converge.py``).
docs/providers.md, "Conformance suite", says what each case checks and how to run it.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils._vm.converge import reconcile
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotFound, NotSupported, Timeout, Unauthorized, Unavailable)
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    differences)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.backups import BackupCases
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.capabilities import (
    CapabilityCases)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.checks import (
    check_hidden, check_vm, expect, missing, named, raised, same, skip)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.faults import (
    Attempts, LateAttempt, LostReply)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.harness import (
    RESILIENCE, Harness)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.listing import (
    ListingCases)

__all__ = ("ConformanceSuite", "DEADLINE", "ROOM")

DEADLINE = 3.0  # s: the deadline of a call to a hung endpoint
ROOM = 30.0     # s: what a loaded machine may add to a bound before the suite calls it late
LATE_LIMIT = 2.0  # s: the time limit of a changing call whose first attempt comes back late


def _probe(guarded: Any) -> Any:
    """A call that must reach the endpoint: ``validate``, or a read where it is not declared."""
    if "validate" in guarded.capabilities:
        return guarded.validate
    return lambda: guarded.describe("conformance-probe")


class ConformanceSuite(CapabilityCases, BackupCases, ListingCases):
    """The cases every backend must pass; :class:`CapabilityCases` adds one per optional
    capability, skipped where the backend does not declare it, :class:`BackupCases` the one of
    the backup hooks, :class:`ListingCases` the one of a backend's own
    ``list_hypervisors_and_vms``."""

    # -- lifecycle and idempotence -----------------------------------------------------------
    def test_lifecycle(self, conformance_backend: Any, tmp_path: Any) -> None:
        """create gives a stopped VM as the spec says, describe the same, delete removes it."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            name = harness.name("lifecycle")
            spec = harness.spec(name)
            created = guarded.create(spec)
            check_vm(created, guarded, name, spec)
            expect(created["state"] == "stopped", "a new VM is stopped, not %s" % created["state"])
            described = guarded.describe(name)
            check_vm(described, guarded, name, spec)
            expect(described["uuid"] == created["uuid"], "describe gives another VM's uuid")
            same(guarded.delete(name), None, "what delete returns")
            expect(missing(guarded, name), "%r is still there after delete" % name)

    def test_create_twice_makes_one_vm(self, conformance_backend: Any, tmp_path: Any) -> None:
        """The vm task with the same spec twice creates once, then changes nothing; a second
        create of the name is a Conflict."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            name = harness.name("twice")
            spec = harness.spec(name)
            first = reconcile(guarded, name, "present", spec)
            expect((first["changed"], first["actions"]) == (True, ["create"]), first)
            second = reconcile(guarded, name, "present", spec)
            described = second["vm"] or {}
            differs = differences(described, spec)
            expect((second["changed"], second["actions"]) == (False, []),
                   "the same spec again changed the VM: describe reports %r for the spec's %r"
                   % (dict((field, described.get(field)) for field in differs), differs))
            err = raised(guarded.create, spec)
            expect(isinstance(err, Conflict),
                   "a create of an existing name is a Conflict: %r" % err)
            same(named(guarded, name), 1, "the number of VMs of that name")

    def test_power_on_and_off_are_idempotent(self, conformance_backend: Any,
                                             tmp_path: Any) -> None:
        """on and off reach their state; asked again, they answer changed False."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            name = harness.name("power")
            spec = harness.spec(name)
            started = reconcile(guarded, name, "running", spec)
            expect(started["actions"] == ["create", "start"], started)
            same(guarded.describe(name)["state"], "running", "the state described after on")
            same(reconcile(guarded, name, "running", spec)["changed"], False,
                 "changed of the vm task asked again for a running VM")
            again = guarded.power(name, "on")
            expect(again["state"] == "running" and again.get("changed") is False,
                   "power on of a running VM must return changed False: %r" % again)
            off = guarded.power(name, "off")
            expect(off["state"] == "stopped" and off.get("changed", True) is True, off)
            same(guarded.describe(name)["state"], "stopped", "the state described after off")
            again = guarded.power(name, "off")
            expect(again["state"] == "stopped" and again.get("changed") is False,
                   "power off of a stopped VM must return changed False: %r" % again)
            same(reconcile(guarded, name, "stopped", spec)["changed"], False,
                 "changed of the vm task asked again for a stopped VM")

    def test_pause_and_suspend_work_or_are_not_supported(self, conformance_backend: Any,
                                                         tmp_path: Any) -> None:
        """Each of pause and suspend reaches its state (again: changed False) and ``on``
        resumes the VM, or it raises NotSupported and leaves the VM running."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            name = harness.name("pause")
            reconcile(guarded, name, "running", harness.spec(name))
            for action, state in (("pause", "paused"), ("suspend", "suspended")):
                try:
                    vm = guarded.power(name, action)
                except NotSupported:
                    expect(guarded.describe(name)["state"] == "running",
                           "%s raised NotSupported but the VM changed" % action)
                    continue
                expect(vm["state"] == state == guarded.describe(name)["state"], (action, vm))
                again = guarded.power(name, action)
                expect(again.get("changed") is False, "%s twice: %r" % (action, again))
                expect(guarded.power(name, "on")["state"] == "running", "on after %s" % action)

    # -- look before retry -------------------------------------------------------------------
    def test_a_lost_reply_is_not_done_again(self, conformance_backend: Any,
                                            tmp_path: Any) -> None:
        """create, power on and delete whose first attempt did the work and then failed as if
        its reply were lost: the retry finds the work done and does not do it again."""
        with Harness(conformance_backend, tmp_path) as harness:
            attempts = Attempts()
            guarded = harness.open(plugins=(LostReply("create"), LostReply("power"),
                                            LostReply("delete"), attempts))
            name = harness.name("lost")
            spec = harness.spec(name)
            check_vm(guarded.create(spec), guarded, name, spec)
            same(guarded.power(name, "on")["state"], "running", "the state after power on")
            expect(named(guarded, name) == 1, "the create was done twice")
            guarded.delete(name)
            expect(missing(guarded, name), "%r is still there after delete" % name)
            for operation in ("create", "power", "delete"):
                expect(attempts.outcomes(operation) == ["error", "ok"], attempts.ended)
                expect(attempts.started.count(operation) == 1,
                       "the retry of %s called the backend again" % operation)

    def test_an_abandoned_create_is_not_done_again(self, conformance_backend: Any,
                                                   tmp_path: Any) -> None:
        """A create whose first attempt is abandoned at its time limit and does the work
        afterwards (on the connection ``abandon()`` dropped): the retry waits for it and finds
        the VM."""
        with Harness(conformance_backend, tmp_path) as harness:
            attempts = Attempts()
            guarded = harness.open(plugins=(LateAttempt("create", LATE_LIMIT + 1.5), attempts),
                                   timeout_mutating=LATE_LIMIT, max_attempts=8)
            name = harness.name("late")
            spec = harness.spec(name)
            check_vm(guarded.create(spec), guarded, name, spec)
            outcomes = attempts.outcomes("create")
            expect(outcomes[0] == "timeout" and outcomes[-1] == "ok", attempts.ended)
            expect(attempts.started.count("create") == 1, "a retry created the VM again")
            expect(named(guarded, name) == 1, "the create was done twice")

    # -- error types -------------------------------------------------------------------------
    def test_a_missing_vm_is_not_found(self, conformance_backend: Any, tmp_path: Any) -> None:
        """describe, power and delete of a VM that does not exist: NotFound, tried once."""
        with Harness(conformance_backend, tmp_path) as harness:
            attempts = Attempts()
            guarded = harness.open(plugins=(attempts,))
            name = harness.name("missing")
            for call, args in ((guarded.describe, (name,)), (guarded.power, (name, "on")),
                               (guarded.delete, (name,))):
                err = raised(call, *args)
                expect(isinstance(err, NotFound), "%s of a missing VM: %r" % (call.__name__, err))
                expect(not err.retryable, "NotFound must not be retryable: %r" % err)
            expect([outcome for _op, outcome, _type in attempts.ended] == ["error"] * 3,
                   attempts.ended)

    def test_a_bad_spec_is_invalid_spec_naming_each_field(self, conformance_backend: Any,
                                                          tmp_path: Any) -> None:
        """A create with vcpus 0 and memory_mb -1: one InvalidSpec naming both fields (in its
        message and ``details.errors``), tried once, nothing created."""
        with Harness(conformance_backend, tmp_path) as harness:
            attempts = Attempts()
            guarded = harness.open(plugins=(attempts,))
            name = harness.name("badspec")
            err = raised(guarded.create, harness.spec(name, vcpus=0, memory_mb=-1))
            expect(isinstance(err, InvalidSpec), "a bad spec: %r" % err)
            paths = [error.get("path") for error in (err.details or {}).get("errors", [])]
            for field in ("vcpus", "memory_mb"):
                expect(field in paths, "details.errors names %s, not %s" % (paths, field))
                expect(field in err.message, "the message does not name %s: %s" % (
                    field, err.message))
            expect(attempts.outcomes("create") == ["error"], attempts.ended)
            expect(missing(guarded, name), "a refused spec left a VM behind")

    def test_an_unreachable_endpoint_is_unavailable(self, conformance_backend: Any,
                                                    tmp_path: Any) -> None:
        """A call to an endpoint that refuses connections: Unavailable, retryable, retried."""
        if conformance_backend.unreachable is None:
            skip("the test environment gives no unreachable endpoint (Backend.unreachable)")
        with Harness(conformance_backend, tmp_path) as harness:
            attempts = Attempts()
            guarded = harness.open(conformance_backend.unreachable, plugins=(attempts,))
            err = raised(_probe(guarded))
            expect(isinstance(err, Unavailable) and err.retryable, "unreachable: %r" % err)
            expect(len(attempts.ended) == RESILIENCE["max_attempts"], attempts.ended)

    def test_wrong_credentials_are_unauthorized(self, conformance_backend: Any,
                                                tmp_path: Any) -> None:
        """A call with credentials the endpoint refuses: Unauthorized, tried once."""
        if conformance_backend.wrong_credentials is None:
            skip("the test environment gives no wrong credentials (Backend.wrong_credentials)")
        with Harness(conformance_backend, tmp_path) as harness:
            attempts = Attempts()
            guarded = harness.open(conformance_backend.wrong_credentials, plugins=(attempts,))
            err = raised(_probe(guarded))
            expect(isinstance(err, Unauthorized) and not err.retryable, "refused login: %r" % err)
            expect(len(attempts.ended) == 1, attempts.ended)

    # -- timeouts ----------------------------------------------------------------------------
    def test_a_hung_endpoint_times_out_within_the_deadline(self, conformance_backend: Any,
                                                           tmp_path: Any) -> None:
        """A call to an endpoint that never answers, under a deadline: Timeout by the deadline
        (with room for a loaded machine), and ``close()`` returns without waiting for it."""
        if conformance_backend.hanging is None:
            skip("the test environment gives no endpoint that hangs (Backend.hanging)")
        with Harness(conformance_backend, tmp_path) as harness, \
                conformance_backend.hanging() as provider:
            guarded = harness.open(provider, deadline=DEADLINE, timeout_validate=DEADLINE - 1,
                                   timeout_describe=DEADLINE - 1)
            began = time.monotonic()
            err = raised(_probe(guarded))
            took = time.monotonic() - began
            expect(isinstance(err, Timeout), "a hung endpoint: %r" % err)
            expect(took < DEADLINE + ROOM, "Timeout came after %.1f s, the deadline was %g s" % (
                took, DEADLINE))
            began = time.monotonic()
            harness.close_provider(guarded)
            took = time.monotonic() - began
            expect(took < ROOM, "close() took %.1f s with a call hung in the endpoint" % took)

    # -- secrets -----------------------------------------------------------------------------
    def test_secrets_stay_hidden(self, conformance_backend: Any, tmp_path: Any) -> None:
        """The values of secret options never appear in results, errors, the provider's str and
        repr, its warnings, its stats or the state store."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            options = type(guarded.provider).options
            settings = [conformance_backend.provider, conformance_backend.wrong_credentials or {},
                        conformance_backend.unreachable or {}]
            secrets = sorted(set(str(value) for config in settings for key, value in config.items()
                                 if key in options and options[key].secret and value))
            if not secrets:
                skip("the provider settings hold no secret option (Option(secret=True))")
            texts: dict[str, Any] = {}
            name = harness.name("secrets")
            spec = harness.spec(name)
            if "validate" in guarded.capabilities:
                texts["validate()"] = json.dumps(guarded.validate())
            texts["create()"] = json.dumps(guarded.create(spec))
            texts["describe()"] = json.dumps(guarded.describe(name))
            texts["power()"] = json.dumps(guarded.power(name, "on"))
            if "list_vms" in guarded.capabilities:
                texts["list_vms()"] = json.dumps(guarded.list_vms({"name": name}))
            failing = [("describe() of a missing VM", lambda: guarded.describe(name + "-x")),
                       ("create() of a bad spec",
                        lambda: guarded.create(harness.spec(name + "-x", vcpus=0)))]
            for label, config in (("wrong credentials", conformance_backend.wrong_credentials),
                                  ("an unreachable endpoint", conformance_backend.unreachable)):
                if config is not None:
                    failing.append(("a call with " + label, _probe(harness.open(config))))
            for label, call in failing:
                err = raised(call)
                texts[label + ": message"] = str(err)
                texts[label + ": repr"] = repr(err)
                texts[label + ": result"] = json.dumps(err.to_dict())
            for index, opened in enumerate(harness.opened):
                texts["provider %d: str and repr" % index] = "%s %r %s %r" % (
                    opened, opened, opened.provider, opened.provider)
                texts["provider %d: settings shown" % index] = json.dumps(
                    opened.provider.safe_config())
                texts["provider %d: warnings" % index] = json.dumps(opened.warnings)
                texts["provider %d: stats" % index] = json.dumps(opened.stats.entry())
            harness.close_provider(guarded)
            for entry in sorted(os.listdir(harness.directory)):
                if entry.startswith(os.path.basename(harness.store_path)):
                    with open(os.path.join(harness.directory, entry), "rb") as handle:
                        texts["the state store (%s)" % entry] = handle.read()
            check_hidden(secrets, texts)
