"""GuardedProvider: policy per operation class, hooks, classification, look-before-retry.

Backends here are real Provider subclasses: the libvirt provider on test:///default (with
replies "lost" after the work was done), and small scripted backends written for the tests.
"""
import threading
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, Internal, InvalidSpec, NotSupported, RateLimit, Timeout, Unavailable)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import Provider
from ansible_collections.resilient.virt.plugins.module_utils.providers._guarded import (
    OPERATION_CLASS, GuardedProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
    LibvirtProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
    plugin_manager)

from provider_testing import quick_settings


class Recorder:
    """Observer plugin: records every before/after call."""

    def __init__(self):
        self.before = []
        self.after = []

    @hookimpl
    def resilient_virt_before_call(self, operation, arguments):
        self.before.append((operation, dict(arguments)))

    @hookimpl
    def resilient_virt_after_call(self, provider, operation, outcome, error, duration):
        assert duration >= 0 and isinstance(provider, Provider)
        self.after.append((operation, outcome, None if error is None else error.type))


class FaultInjector:
    """Fault-injection plugin: the first ``count`` attempts of ``operation`` fail."""

    def __init__(self, operation, count,
                 exc_factory=lambda: ConnectionRefusedError(111, "refused")):
        self.operation, self.count, self.exc_factory = operation, count, exc_factory

    @hookimpl
    def resilient_virt_before_call(self, operation):
        if operation == self.operation and self.count > 0:
            self.count -= 1
            raise self.exc_factory()


class LostReplyLibvirt(LibvirtProvider):
    """libvirt provider whose listed operations do the work, then lose the reply once."""

    lose = ()

    def _lost(self, operation, result):
        if operation in self.lose:
            self.lose = tuple(op for op in self.lose if op != operation)
            raise ConnectionResetError(104, "connection reset by peer")
        return result

    def create(self, spec):
        return self._lost("create", super().create(spec))

    def delete(self, name):
        return self._lost("delete", super().delete(name))

    def power(self, name, action, timeout=None):
        return self._lost("power", super().power(name, action, timeout))

    def reconfigure(self, name, vcpus=None, memory_mb=None):
        return self._lost("reconfigure", super().reconfigure(name, vcpus, memory_mb))


class BackendBusy(Exception):
    """What the scripted backend's library raises when it is overloaded."""


class PluginGlitch(Exception):
    """An exception only a classify plugin knows about."""


class ScriptedProvider(Provider):
    """Answers describe() from a script: exceptions are raised, anything else returned."""

    type_name = "scripted"
    capabilities = frozenset(("describe", "create"))

    def __init__(self, config, script=(), hang=None):
        super().__init__(config)
        self.script = list(script)
        self.calls = 0
        self.abandoned = 0
        self.hang = hang

    def describe(self, name):
        self.calls += 1
        if self.hang is not None:
            self.hang.wait(30)
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    def create(self, spec):
        self.calls += 1
        self.hang.wait(30)
        return spec

    def classify_error(self, exc):
        if isinstance(exc, BackendBusy):
            return RateLimit("backend busy", retry_after=0.01)
        return None

    def abandon(self):
        self.abandoned += 1


class GlitchClassifier:
    @hookimpl
    def resilient_virt_classify_error(self, exc):
        return Unavailable("glitch") if isinstance(exc, PluginGlitch) else None


@pytest.fixture
def lost(libvirt_config):
    prov = LostReplyLibvirt(libvirt_config)
    yield prov
    prov.close()


def guard(provider, store, plugins=(), **settings):
    return GuardedProvider(provider, store, quick_settings(**settings),
                           plugin_manager(plugins, environ={}).hook)


def test_operation_classes_cover_every_capability():
    from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
        CAPABILITIES)
    # list_vm_summaries is list_vms made lighter, list_hypervisors_and_vms both lists at once
    assert set(OPERATION_CLASS) == set(CAPABILITIES) | {"list_vm_summaries",
                                                        "list_hypervisors_and_vms"}
    assert {OPERATION_CLASS[op] for op in ("create", "delete", "power", "reconfigure",
                                           "migrate")} == {"mutating"}
    assert OPERATION_CLASS["list_vms"] == OPERATION_CLASS["describe"] == "describe"
    assert OPERATION_CLASS["list_vm_summaries"] == "describe"
    assert OPERATION_CLASS["list_hypervisors_and_vms"] == "describe"


def test_a_create_whose_reply_was_lost_is_not_done_twice(lost, store):
    recorder = Recorder()
    guarded = guard(lost, store, [recorder])
    lost.lose = ("create",)
    vm = guarded.create({"name": "once", "vcpus": 1, "memory_mb": 64})
    assert vm["name"] == "once" and vm["state"] == "stopped"
    assert [v["name"] for v in guarded.list_vms()].count("once") == 1
    assert recorder.before[0] == ("create", {"spec": {"name": "once", "vcpus": 1,
                                                      "memory_mb": 64}})
    assert recorder.after[:2] == [("create", "error", "Unavailable"), ("create", "ok", None)]
    assert [b[0] for b in recorder.before].count("create") == 1  # the look answered attempt 2


def test_lost_replies_of_power_reconfigure_and_delete_are_recognised(lost, store):
    guarded = guard(lost, store)
    guarded.create({"name": "lossy", "vcpus": 1, "memory_mb": 64})
    lost.lose = ("power", "reconfigure", "delete")
    assert guarded.power("lossy", "on")["state"] == "running"
    assert guarded.reconfigure("lossy", memory_mb=32)["memory_mb"] == 32
    assert guarded.delete("lossy") is None
    assert "lossy" not in [v["name"] for v in guarded.list_vms()]
    assert guarded.policy.breaker.snapshot()["consecutive_failures"] == 0


def test_a_before_call_hook_injects_faults_that_are_retried(libvirt_config, store):
    recorder = Recorder()
    provider = LibvirtProvider(libvirt_config)
    guarded = guard(provider, store, [FaultInjector("describe", 2), recorder])
    assert guarded.describe("test")["name"] == "test"
    assert recorder.after == [("describe", "error", "Unavailable")] * 2 + [("describe", "ok", None)]
    guarded = guard(provider, store, [FaultInjector("describe", 5)], max_attempts=2)
    with pytest.raises(Unavailable) as info:
        guarded.describe("test")
    assert info.value.details["attempts"] == 2
    assert guarded.policy.breaker.snapshot()["consecutive_failures"] == 2
    provider.close()


def test_the_breaker_opens_and_then_no_attempt_is_made(libvirt_config, store):
    recorder = Recorder()
    provider = LibvirtProvider(libvirt_config)
    guarded = guard(provider, store, [FaultInjector("validate", 10), recorder],
                    max_attempts=1, failure_threshold=2)
    for _attempt in range(2):
        with pytest.raises(Unavailable):
            guarded.validate()
    with pytest.raises(BreakerOpen):
        guarded.validate()
    assert len(recorder.before) == 2 and guarded.policy.breaker.snapshot()["state"] == "open"
    assert guarded.key == guarded.policy.breaker.snapshot()["name"] == "libvirt:unit"
    provider.close()


def test_errors_are_classified_by_backend_then_plugin_then_standard(store):
    provider = ScriptedProvider({"type": "scripted"}, [BackendBusy(), PluginGlitch(), {"ok": 1}])
    guarded = guard(provider, store, [GlitchClassifier()], max_attempts=3)
    assert guarded.describe("x") == {"ok": 1} and provider.calls == 3
    provider = ScriptedProvider({"type": "scripted"}, [ValueError("bug"), {"never": 1}])
    with pytest.raises(Internal) as info:
        guard(provider, store, [GlitchClassifier()]).describe("x")
    assert provider.calls == 1 and isinstance(info.value.cause, ValueError)
    provider = ScriptedProvider({"type": "scripted"}, [PluginGlitch(), {"ok": 2}])
    with pytest.raises(Internal):  # without the plugin nobody knows PluginGlitch
        guard(provider, store).describe("x")


def test_a_hung_call_times_out_by_operation_class_and_is_abandoned(store):
    release = threading.Event()
    recorder = Recorder()
    provider = ScriptedProvider({"type": "scripted"}, [{"late": 1}], hang=release)
    guarded = guard(provider, store, [recorder], max_attempts=1, timeout_describe=0.3,
                    timeout_mutating=10)
    started = time.monotonic()
    with pytest.raises(Timeout):
        guarded.describe("x")
    assert time.monotonic() - started < 0.3 + 2
    assert provider.abandoned == 1
    assert recorder.after == [("describe", "timeout", "Timeout")]
    guarded = guard(provider, store, max_attempts=1, timeout_describe=10, timeout_mutating=0.3)
    started = time.monotonic()
    with pytest.raises(Timeout):
        guarded.create({"name": "slow"})
    assert time.monotonic() - started < 0.3 + 2 and provider.abandoned == 2
    release.set()


def test_a_missing_capability_fails_before_any_attempt(libvirt_config, store):
    recorder = Recorder()
    provider = LibvirtProvider(libvirt_config)
    guarded = guard(provider, store, [recorder])
    assert guarded.capabilities == provider.capabilities and guarded.type_name == "libvirt"
    with pytest.raises(NotSupported, match="does not support task_status"):
        guarded.task_status("t")
    with pytest.raises(NotSupported):
        guarded.migrate("test", "elsewhere")
    assert recorder.before == [] and guarded.policy.breaker.snapshot()["successes_total"] == 0
    guarded.close()


def test_an_after_call_hook_that_fails_changes_nothing(libvirt_config, store):
    class Broken:
        @hookimpl
        def resilient_virt_after_call(self):
            raise RuntimeError("observer bug")

    provider = LibvirtProvider(libvirt_config)
    assert guard(provider, store, [Broken()]).describe("test")["state"] == "running"
    provider.close()


def test_capacity_is_held_natively_only_when_a_plugin_can(store):
    class NativeHold:
        held = []

        @hookimpl
        def resilient_virt_hold_capacity(self, provider, reservation):
            if provider.type_name != "scripted":
                return None
            self.held.append(reservation["name"])
            return {"slot": reservation["name"]}

        @hookimpl
        def resilient_virt_release_capacity(self, reservation):
            self.held.remove(reservation["held"]["slot"])
            return True

    recorder = Recorder()
    native = NativeHold()
    provider = ScriptedProvider({"type": "scripted"})
    guarded = guard(provider, store, [native, recorder, FaultInjector("hold_capacity", 1)])
    held = guarded.hold_capacity({"name": "r1", "vcpus": 2})
    assert held == {"slot": "r1"} and native.held == ["r1"]
    assert [a[:2] for a in recorder.after] == [("hold_capacity", "error"), ("hold_capacity", "ok")]
    assert guarded.release_capacity({"name": "r1", "held": held}) is True and native.held == []
    assert guard(provider, store).hold_capacity({"name": "r2"}) is None
    assert GuardedProvider(provider, store, quick_settings()).hold_capacity({"name": "r3"}) is None


class StubbornGuest(Provider):
    """A backend whose guest never finishes a graceful shutdown."""

    type_name = "stubborn"
    capabilities = frozenset(("power", "describe"))
    calls = 0

    def power(self, name, action, timeout=None):
        self.calls += 1
        raise Timeout("VM %r did not shut down within %gs" % (name, timeout))

    def describe(self, name):
        return {"name": name, "state": "running"}


def test_a_guest_that_does_not_shut_down_is_not_retried_nor_counted(store):
    recorder = Recorder()
    provider = StubbornGuest({"type": "stubborn"})
    guarded = guard(provider, store, [recorder], max_attempts=5, failure_threshold=1,
                    timeout_mutating=10)
    with pytest.raises(Timeout, match="did not shut down within 2s"):
        guarded.power("vm", "shutdown", timeout=2)
    assert provider.calls == 1 and recorder.after == [("power", "error", "Timeout")]
    snapshot = guarded.policy.breaker.snapshot()
    assert (snapshot["state"], snapshot["consecutive_failures"]) == ("closed", 0)
    with pytest.raises(InvalidSpec, match="timeout_mutating"):
        guarded.power("vm", "shutdown", timeout=10)
    assert provider.calls == 1
