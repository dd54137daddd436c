"""vm_reconcile: the pure plan and prediction, and reconcile() on a real libvirt provider.

reconcile() runs against libvirt's in-process ``test:///default`` driver opened through the
registry, so every call goes through the resilience policy on a SQLite store in tmp_path.
``test:///default`` starts with one running domain, "test"; its guests stop at once on a
graceful shutdown, so the shutdown-timeout path uses a libvirt provider whose guests ignore the
ACPI request (the real polling loop and Timeout of the libvirt backend, nothing else changed).
"""
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, Timeout
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
    LibvirtProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
    open_provider)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils._vm.converge import (
    plan, predict, reconcile)

SPEC = {"vcpus": 1, "memory_mb": 64}
STOPPED = {"name": "vm", "state": "stopped", "vcpus": 1, "memory_mb": 64}
RUNNING = dict(STOPPED, state="running")
PAUSED = dict(STOPPED, state="paused")


def _settings(**overrides):
    option = {"base_delay": "10ms", "max_delay": "50ms", "max_attempts": 2}
    option.update(overrides)
    return resolve_settings(option, environ={})


@pytest.fixture
def store(tmp_path):
    opened = open_store("sqlite:///%s" % (tmp_path / "state.db"), environ={})
    yield opened
    opened.close()


@pytest.fixture
def provider(store):
    guarded = open_provider({"type": "libvirt", "uri": "test:///default", "name": "t"},
                            _settings(), store, environ={})
    created = []
    yield guarded, created
    for name in created:
        try:
            guarded.delete(name)
        except Exception:  # noqa: BLE001 - cleanup only: the test may have deleted it already
            pass
    guarded.provider.close()


# -- plan -------------------------------------------------------------------------------------

@pytest.mark.parametrize("state, current, expected", [
    ("absent", None, []),
    ("absent", STOPPED, [("delete", {})]),
    ("absent", RUNNING, [("delete", {})]),
    ("present", None, [("create", {})]),
    ("present", STOPPED, []),
    ("present", RUNNING, []),
    ("stopped", None, [("create", {})]),
    ("stopped", STOPPED, []),
    ("stopped", RUNNING, [("shutdown", {})]),
    ("running", None, [("create", {}), ("start", {})]),
    ("running", STOPPED, [("start", {})]),
    ("running", RUNNING, []),
    ("running", PAUSED, [("start", {})]),
    ("restarted", None, [("create", {}), ("start", {})]),
    ("restarted", STOPPED, [("start", {})]),
    ("restarted", RUNNING, [("reboot", {})]),
])
def test_plan_for_every_state_and_current(state, current, expected):
    assert plan(current, state, dict(SPEC)) == expected


@pytest.mark.parametrize("spec, missing", [
    ({"memory_mb": 64}, ["vcpus"]),
    ({"vcpus": 1}, ["memory_mb"]),
    ({}, ["vcpus", "memory_mb"]),
    ({"vcpus": None, "memory_mb": None, "tags": ["web"]}, ["vcpus", "memory_mb"]),
])
def test_plan_to_create_without_size_names_the_missing_fields(spec, missing):
    with pytest.raises(InvalidSpec) as info:
        plan(None, "running", spec)
    assert [e["path"] for e in info.value.details["errors"]] == missing
    for field in missing:
        assert field in info.value.message
    assert info.value.message.startswith("no VM of that name exists"), info.value.message
    assert "to create one, set " in info.value.message


def test_plan_needs_no_size_for_an_existing_or_unwanted_vm():
    assert plan(STOPPED, "running", {}) == [("start", {})]
    assert plan(None, "absent", {}) == []


def test_plan_rejects_an_unknown_state_naming_the_choices():
    with pytest.raises(InvalidSpec, match="present, absent, running, stopped, restarted"):
        plan(STOPPED, "started", SPEC)


def test_plan_reconfigures_only_what_differs_and_before_the_power_action():
    assert plan(STOPPED, "present", {"vcpus": 2, "memory_mb": 64}) == [("reconfigure", {"vcpus": 2})]
    assert plan(STOPPED, "running", {"vcpus": 1, "memory_mb": 128}) == [
        ("reconfigure", {"memory_mb": 128}), ("start", {})]
    assert plan(RUNNING, "stopped", {"vcpus": 4, "memory_mb": 256}) == [
        ("reconfigure", {"vcpus": 4, "memory_mb": 256}), ("shutdown", {})]
    assert plan(RUNNING, "running", {"vcpus": 1, "memory_mb": 64}) == []
    assert plan(RUNNING, "running", {"vcpus": None, "memory_mb": None}) == []
    assert plan(RUNNING, "absent", {"vcpus": 8}) == [("delete", {})]


# -- predict ----------------------------------------------------------------------------------

def test_predict_follows_the_actions():
    spec = {"vcpus": 2, "memory_mb": 128}
    assert predict(None, [("create", {}), ("start", {})], spec) == {
        "state": "running", "vcpus": 2, "memory_mb": 128}
    assert predict(None, [("create", {})], spec) == {"state": "stopped", "vcpus": 2, "memory_mb": 128}
    assert predict(RUNNING, [("delete", {})], spec) == {"state": "absent"}
    assert predict(STOPPED, [("reconfigure", {"memory_mb": 96}), ("start", {})], spec) == {
        "state": "running", "vcpus": 1, "memory_mb": 96}
    assert predict(RUNNING, [("shutdown", {})], spec) == {"state": "stopped", "vcpus": 1, "memory_mb": 64}
    assert predict(RUNNING, [("reboot", {})], spec) == {"state": "running", "vcpus": 1, "memory_mb": 64}
    assert predict(PAUSED, [], spec) == {"state": "paused", "vcpus": 1, "memory_mb": 64}


def test_predict_does_not_change_the_current_vm():
    current = dict(RUNNING)
    predict(current, [("reconfigure", {"vcpus": 8}), ("shutdown", {})], {})
    assert current == RUNNING


# -- reconcile on test:///default ---------------------------------------------------------------

def _names(guarded):
    return [vm["name"] for vm in guarded.list_vms()]


def test_reconcile_lifecycle_on_libvirt(provider):
    guarded, created = provider
    created.append("rec-life")
    spec = dict(SPEC, tags=["web"], metadata={"owner": "tests"}, force=True, name="ignored")

    made = reconcile(guarded, "rec-life", "running", spec)
    assert made["changed"] is True and made["actions"] == ["create", "start"]
    assert made["before"] == {"state": "absent"}
    assert made["after"] == {"state": "running", "vcpus": 1, "memory_mb": 64, "tags": ["web"],
                             "metadata": {"owner": "tests"}}
    assert made["vm"]["name"] == "rec-life" and made["vm"]["state"] == "running"
    assert made["vm"]["tags"] == ["web"] and made["vm"]["metadata"] == {"owner": "tests"}
    assert guarded.describe("rec-life")["state"] == "running"

    again = reconcile(guarded, "rec-life", "running", spec)
    assert again["changed"] is False and again["actions"] == []
    assert again["before"] == again["after"] == made["after"]
    assert again["vm"] == guarded.describe("rec-life")

    stopped = reconcile(guarded, "rec-life", "stopped", dict(SPEC, memory_mb=96), shutdown_timeout=5)
    assert stopped["actions"] == ["reconfigure", "shutdown"]
    assert stopped["after"] == {"state": "stopped", "vcpus": 1, "memory_mb": 96}
    described = guarded.describe("rec-life")
    assert (described["state"], described["memory_mb"]) == ("stopped", 96)
    assert stopped["restart_required"] is False

    restarted = reconcile(guarded, "rec-life", "restarted", {})
    assert restarted["actions"] == ["start"] and restarted["vm"]["state"] == "running"
    rebooted = reconcile(guarded, "rec-life", "restarted", {})
    assert rebooted["changed"] is True and rebooted["actions"] == ["reboot"]
    assert rebooted["vm"]["state"] == "running"

    gone = reconcile(guarded, "rec-life", "absent", {})
    assert gone["changed"] is True and gone["actions"] == ["delete"]
    assert gone["vm"] is None and gone["after"] == {"state": "absent"}
    assert gone["before"] == {"state": "running", "vcpus": 1, "memory_mb": 96}
    assert "rec-life" not in _names(guarded)
    assert reconcile(guarded, "rec-life", "absent", {})["changed"] is False


def test_reconcile_of_an_absent_vm_left_absent_reports_it_absent(provider):
    guarded, dummy = provider
    result = reconcile(guarded, "rec-never", "absent", {})
    assert result["changed"] is False and result["vm"] is None
    assert result["before"] == result["after"] == {"state": "absent"}


def test_check_mode_plans_without_touching_the_provider(provider):
    guarded, created = provider
    created.extend(["rec-check", "rec-live"])
    live = reconcile(guarded, "rec-live", "running", dict(SPEC))["vm"]
    before = guarded.list_vms()

    planned = reconcile(guarded, "rec-check", "running", dict(SPEC), check_mode=True)
    assert planned["changed"] is True and planned["actions"] == ["create", "start"]
    assert planned["vm"] is None
    assert planned["after"] == {"state": "running", "vcpus": 1, "memory_mb": 64}
    assert guarded.list_vms() == before

    for state, spec, actions, after in (
            ("stopped", {"memory_mb": 128}, ["reconfigure", "shutdown"],
             {"state": "stopped", "vcpus": 1, "memory_mb": 128}),
            ("absent", {}, ["delete"], {"state": "absent"}),
            ("restarted", {"vcpus": 2}, ["reconfigure", "reboot"], {"state": "running", "vcpus": 2, "memory_mb": 64})):
        result = reconcile(guarded, "rec-live", state, spec, check_mode=True)
        assert result["changed"] is True and result["actions"] == actions
        assert result["before"] == {"state": "running", "vcpus": 1, "memory_mb": 64}
        assert result["after"] == after
        assert result["vm"] == live
    assert guarded.describe("rec-live") == live
    assert guarded.list_vms() == before


def test_an_invalid_spec_creates_nothing(provider):
    guarded, created = provider
    created.append("rec-bad")
    with pytest.raises(InvalidSpec) as info:
        reconcile(guarded, "rec-bad", "running", {"memory_mb": 64})
    assert [e["path"] for e in info.value.details["errors"]] == ["vcpus"]
    with pytest.raises(InvalidSpec) as info:
        reconcile(guarded, "rec-bad", "running", dict(SPEC, disks=[{"size_gb": -1}]))
    assert "disks[0].size_gb" in {e["path"] for e in info.value.details["errors"]}
    assert info.value.operation == "create"
    assert "rec-bad" not in _names(guarded)


class AcpiDeafLibvirt(LibvirtProvider):
    """The libvirt provider with a FAKE guest behaviour: its guests ignore the ACPI shutdown
    request (as a hung guest does), which test:///default's guests cannot; the backend's own wait
    and Timeout are unchanged."""

    type_name = "libvirt-acpi-deaf"

    def _lookup(self, conn, name):
        return _AcpiDeafDomain(super()._lookup(conn, name))


class _AcpiDeafDomain:
    def __init__(self, dom):
        self._dom = dom

    def shutdown(self):
        """The request is delivered and ignored."""

    def __getattr__(self, name):
        return getattr(self._dom, name)


class AcpiDeafPlugin:
    @hookimpl
    def resilient_virt_provider_types(self):
        return [AcpiDeafLibvirt]


def test_a_guest_ignoring_shutdown_needs_force(store):
    guarded = open_provider({"type": "libvirt-acpi-deaf", "uri": "test:///default", "name": "deaf"},
                            _settings(timeout_mutating="10s"), store, plugins=(AcpiDeafPlugin(),),
                            environ={})
    try:
        reconcile(guarded, "rec-deaf", "running", dict(SPEC))
        began = time.monotonic()
        with pytest.raises(Timeout) as info:
            reconcile(guarded, "rec-deaf", "stopped", {}, shutdown_timeout=0.5)
        assert time.monotonic() - began < 0.5 + 2, "the shutdown wait did not end"
        assert "force=true" in info.value.message and "rec-deaf" in info.value.message
        assert guarded.describe("rec-deaf")["state"] == "running"
        breaker = guarded.policy.breaker.snapshot()
        assert breaker["consecutive_failures"] == 0, "a stubborn guest counted against the provider"

        forced = reconcile(guarded, "rec-deaf", "stopped", {}, force=True, shutdown_timeout=0.5)
        assert forced["changed"] is True and forced["actions"] == ["shutdown"]
        assert forced["vm"]["state"] == "stopped" and forced["after"]["state"] == "stopped"
        assert guarded.describe("rec-deaf")["state"] == "stopped"
    finally:
        try:
            guarded.delete("rec-deaf")
        finally:
            guarded.provider.close()


# -- another task working on the same VM ------------------------------------------------------

class Interloper:
    """The provider as this task sees it, with another task acting on the same VM (through the
    same real provider) right before this task's first call of ``verb``."""

    def __init__(self, guarded, verb, other):
        self.guarded = guarded
        self.verb = verb
        self.other = other
        self.calls = []

    def __getattr__(self, name):
        method = getattr(self.guarded, name)
        if not callable(method):
            return method

        def call(*args, **kwargs):
            self.calls.append(name)
            if name == self.verb and self.other is not None:
                other, self.other = self.other, None
                other(self.guarded)
            return method(*args, **kwargs)

        return call


@pytest.mark.parametrize("state, before, other, verb", [
    ("present", None, lambda p: p.create(dict(SPEC, name="rc-vm")), "create"),
    ("running", "stopped", lambda p: p.power("rc-vm", "on"), "power"),
    ("stopped", "running", lambda p: p.power("rc-vm", "off"), "power"),
    ("absent", "stopped", lambda p: p.delete("rc-vm"), "delete"),
])
def test_work_done_meanwhile_by_another_task_is_success_without_change(provider, state, before,
                                                                       other, verb):
    guarded, created = provider
    created.append("rc-vm")
    if before is not None:
        guarded.create(dict(SPEC, name="rc-vm"))
        if before == "running":
            guarded.power("rc-vm", "on")
    seen = Interloper(guarded, verb, other)
    outcome = reconcile(seen, "rc-vm", state, dict(SPEC), force=True, shutdown_timeout=1.0)
    assert outcome["changed"] is False and outcome["actions"] == [], outcome
    assert outcome["after"]["state"] == {"present": "stopped"}.get(state, state)
    assert seen.calls.count(verb) == 1  # tried once, then read the VM again, and stopped


def test_create_meanwhile_then_this_task_starts_it(provider):
    guarded, created = provider
    created.append("rc-both")
    seen = Interloper(guarded, "create", lambda p: p.create(dict(SPEC, name="rc-both")))
    outcome = reconcile(seen, "rc-both", "running", dict(SPEC))
    assert outcome["changed"] is True and outcome["actions"] == ["start"], outcome
    assert guarded.describe("rc-both")["state"] == "running"


def test_a_real_conflict_still_fails(provider):
    """A refusal while the VM is as planned is not someone else's work: it fails."""
    from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict

    guarded, created = provider
    created.append("rc-real")
    guarded.create(dict(SPEC, name="rc-real"))

    class Refusing(Interloper):
        def __getattr__(self, name):
            if name == "power":
                def refuse(*args, **kwargs):
                    raise Conflict("the host refuses to start anything")
                return refuse
            return super().__getattr__(name)

    with pytest.raises(Conflict, match="refuses"):
        reconcile(Refusing(guarded, None, None), "rc-real", "running", dict(SPEC))


# -- day-2: power states and fields a provider cannot change ------------------------------------

@pytest.mark.parametrize("power, state, verbs", [
    ("running", "paused", ["pause"]),
    ("stopped", "paused", ["start", "pause"]),
    ("paused", "paused", []),
    ("running", "suspended", ["suspend"]),
    ("paused", "suspended", ["start", "suspend"]),
    ("suspended", "suspended", []),
    ("paused", "running", ["start"]),
    ("suspended", "running", ["start"]),
    ("paused", "stopped", ["start", "shutdown"]),
    ("suspended", "stopped", ["power_off"]),
    ("paused", "restarted", ["start", "reboot"]),
    ("suspended", "restarted", ["start"]),
])
def test_power_states(power, state, verbs):
    actions = plan(dict(STOPPED, state=power), state, {})
    assert [verb for verb, _arguments in actions] == verbs
    assert predict(dict(STOPPED, state=power), actions, {})["state"] == \
        {"restarted": "running"}.get(state, state)


def test_a_stopped_vm_cannot_be_suspended():
    with pytest.raises(InvalidSpec) as info:
        plan(STOPPED, "suspended", {})
    assert info.value.details["errors"][0]["path"] == "state"


def test_a_field_the_provider_cannot_change_is_refused_before_anything_changes():
    from ansible_collections.resilient.virt.plugins.module_utils.errors import NotSupported

    current = dict(STOPPED, tags=["a"], metadata={"k": "v"})
    with pytest.raises(NotSupported) as info:
        plan(current, "running", {"tags": ["b"], "vcpus": 2}, reconfigurable=("vcpus", "memory_mb"))
    assert info.value.details["fields"] == ["tags"]
    same = plan(current, "stopped", {"tags": ["a"], "vcpus": 2}, reconfigurable=("vcpus",))
    assert same == [("reconfigure", {"vcpus": 2})]


def test_predicted_day2_fields():
    current = dict(STOPPED, metadata={"a": "1", "b": "2"}, disks=[{"size_gb": 1, "target": "vda"}])
    spec = {"metadata": {"b": None, "c": True}, "disks": [{"size_gb": 1}, {"size_gb": 2}]}
    actions = plan(current, "present", spec)
    after = predict(current, actions, spec)
    assert after["metadata"] == {"a": "1", "c": "true"}
    assert after["disks"] == [{"size_gb": 1, "target": "vda"}, {"size_gb": 2}]


def test_a_clone_of_a_template_needs_no_vcpus_or_memory():
    assert plan(None, "present", {"template": "debian12"}) == [("create", {})]
    with pytest.raises(InvalidSpec) as info:
        plan(None, "present", {})
    assert sorted(e["path"] for e in info.value.details["errors"]) == ["memory_mb", "vcpus"]


# -- metadata written only by a create ------------------------------------------------------------

def test_create_metadata_is_written_by_a_create_only(provider):
    guarded, created = provider
    created.extend(["rec-mark-new", "rec-mark-old"])
    mark = {"marker": "mine"}
    made = reconcile(guarded, "rec-mark-new", "stopped", dict(SPEC), create_metadata=mark)
    assert made["actions"] == ["create"] and made["vm"]["metadata"] == mark
    assert made["after"]["metadata"] == mark
    planned = reconcile(guarded, "rec-mark-none", "stopped", dict(SPEC), create_metadata=mark,
                        check_mode=True)
    assert planned["after"]["metadata"] == mark  # check mode predicts it too

    guarded.create(dict(SPEC, name="rec-mark-old"))  # made elsewhere, without the mark
    changed = reconcile(guarded, "rec-mark-old", "stopped", dict(SPEC, memory_mb=96,
                                                                 metadata={"team": "a"}),
                        create_metadata=mark)
    assert changed["actions"] == ["reconfigure"]
    assert guarded.describe("rec-mark-old")["metadata"] == {"team": "a"}
    assert "metadata" not in changed["after"] or changed["after"]["metadata"] == {"team": "a"}


def test_a_vm_created_meanwhile_by_another_task_does_not_get_the_create_metadata(provider):
    guarded, created = provider
    created.append("rec-mark-race")
    seen = Interloper(guarded, "create", lambda p: p.create(dict(SPEC, name="rec-mark-race")))
    outcome = reconcile(seen, "rec-mark-race", "stopped", dict(SPEC, memory_mb=96),
                        create_metadata={"marker": "mine"})
    assert outcome["actions"] == ["reconfigure"], outcome  # planned afresh for the VM found
    described = guarded.describe("rec-mark-race")
    assert described["memory_mb"] == 96 and described["metadata"] == {}
