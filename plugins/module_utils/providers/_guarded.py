"""GuardedProvider: a Provider whose every call goes through the resilience Policy and the hooks.

Operation classes (they pick the time limit of each attempt): validate -> ``validate``;
list_hypervisors, list_vms, list_vm_summaries, list_hypervisors_and_vms, describe, find,
list_snapshots -> ``describe``; create, delete, power, reconfigure, migrate, migrate_to, recover,
create_snapshot, delete_snapshot, revert_snapshot -> ``mutating``; task_status -> ``task_status``. Backup hooks
(``hookspecs.py``): backup_prepare, backup_list -> ``describe``; backup_start, backup_cancel,
backup_delete -> ``mutating``; backup_poll -> ``task_status``.

Each attempt calls the ``resilient_virt_before_call`` hooks, then the backend; failures are
classified by the backend's ``classify_error``, then the ``resilient_virt_classify_error`` hook,
then the standard classifier; ``resilient_virt_after_call`` hooks observe every attempt. An
attempt abandoned after its time limit makes the backend drop its connection (``abandon()``).

Before retrying a mutating call, a look at the provider decides whether an earlier attempt
already did the work: create -> a VM of that name exists; delete -> the VM is gone; power ->
the VM is in the wanted state (on: running; off, shutdown: stopped; pause: paused; suspend:
suspended; reboot is always redone); reconfigure -> the VM has every wanted value
(``_reconfigure.differences``); migrate -> the VM is on the target host; recover -> the VM runs
on the target host; migrate_to -> the
target provider has the VM and this one has not; create_snapshot -> the VM
has a snapshot of that name; delete_snapshot -> it has none (revert_snapshot is always redone:
reverting twice ends the same);
backup_start -> polling the handle finds the operation (running or finished). Before that look,
the retry waits for the work of the earlier attempts to end (``_resilience/inflight.py``): an
abandoned attempt goes on in its thread, and an operation a backend recorded with
``Provider.started`` is followed through ``task_status``; a retry never starts the work again
while the first may still be doing it.

A graceful shutdown that the guest does not finish within its timeout, and a migration that the
backend cancelled at its ``timeout``, raise Timeout at once: the provider answered, so it is
neither retried nor counted by the circuit breaker.

Every operation that takes a VM name checks it first (``Provider.check_name``), so a name the
platform would refuse or mishandle never reaches it. Error messages are scrubbed of the
provider's secrets before the breaker records them and the caller sees them.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    NotFound, NotSupported, Timeout, VirtError, field_error)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy

__all__ = ("GuardedProvider", "OPERATION_CLASS", "BACKUP_OPERATION_CLASS")

OPERATION_CLASS = {
    "validate": "validate", "list_hypervisors": "describe", "list_vms": "describe",
    "list_vm_summaries": "describe", "list_hypervisors_and_vms": "describe",
    "describe": "describe", "find": "describe", "create": "mutating", "delete": "mutating",
    "power": "mutating", "reconfigure": "mutating", "migrate": "mutating", "migrate_to": "mutating",
    "maintenance": "mutating", "recover": "mutating", "locate_disks": "describe",
    "task_status": "task_status",
    "list_snapshots": "describe", "create_snapshot": "mutating", "delete_snapshot": "mutating",
    "revert_snapshot": "mutating",
}
BACKUP_OPERATION_CLASS = {
    "backup_prepare": "describe", "backup_list": "describe", "backup_start": "mutating",
    "backup_cancel": "mutating", "backup_delete": "mutating", "backup_poll": "task_status",
}
_POWER_STATE = {"on": "running", "off": "stopped", "shutdown": "stopped", "pause": "paused",
                "suspend": "suspended"}


class _AnsweredTimeout(VirtError):
    """A time limit the backend kept itself (a guest that did not stop, a migration it
    cancelled): an answer, not an outage (not retried, not counted)."""

    type = "Timeout"

    def __init__(self, timeout):
        super().__init__(timeout.message, cause=timeout, details=timeout.details)
        self.timeout = timeout


class _AttemptHooks:
    """What the Policy calls back during a call: classification and per-attempt reports."""

    def __init__(self, provider, hook):
        self.provider = provider
        self.hook = hook
        self.current = (None, {})  # (operation, arguments) of the call in progress

    def classify(self, exc):
        err = self.provider.classify_error(exc)
        if err is None and self.hook is not None:
            err = self.hook.resilient_virt_classify_error(provider=self.provider, exc=exc)
        return err

    def scrub(self, text):
        return self.provider.scrub(text)

    def status(self, handle):
        """The state of an operation an attempt started (``Provider.started``): running,
        success or error; None when the provider cannot tell."""
        if "task_status" not in self.provider.capabilities:
            return None
        return self.provider.task_status(handle).get("state")

    def after_attempt(self, attempt, outcome, error, duration):
        if outcome == "timeout":
            self.provider.abandon()
        if self.hook is None:
            return
        operation, arguments = self.current
        try:
            self.hook.resilient_virt_after_call(
                provider=self.provider, operation=operation, arguments=arguments,
                outcome=outcome, error=error, duration=duration)
        except Exception:  # noqa: BLE001 - observers must not change the outcome
            pass


class GuardedProvider:
    """Same operations as the wrapped Provider, each run by ``policy.call``.

    ``store`` and ``settings`` (a ResilienceSettings) build the Policy of ``provider.key``;
    ``hook`` is the plugin manager's hook relay (``PluginManager.hook``) or None; ``spans``, a
    ``_resilience.spans.SpanLog`` or None, records each call for traces.
    """

    def __init__(self, provider, store, settings, hook=None, spans=None):
        self.provider = provider
        self.hook = hook
        self._hooks = _AttemptHooks(provider, hook)
        self.policy = Policy(store, provider.key, settings, hooks=self._hooks, spans=spans)

    @property
    def key(self):
        return self.provider.key

    @property
    def type_name(self):
        return self.provider.type_name

    @property
    def capabilities(self):
        return self.provider.capabilities

    @property
    def reconfigurable(self):
        return self.provider.reconfigurable

    @property
    def stats(self):
        """What the policy did so far (a ``stats.CallStats``): the task's ``resilience`` result."""
        return self.policy.stats

    @property
    def warnings(self):
        """What the user should know: the backend's warnings, then the policy's."""
        return list(self.provider.warnings) + [w for w in self.policy.warnings
                                               if w not in self.provider.warnings]

    def _call(self, operation, arguments, look=None):
        self.provider.require(operation)
        method = getattr(self.provider, operation)
        return self._guard(operation, OPERATION_CLASS[operation], lambda: method(**arguments),
                           arguments, look)

    def _guard(self, operation, op_class, work, arguments, look=None):
        def attempt():
            if self.hook is not None:
                self.hook.resilient_virt_before_call(
                    provider=self.provider, operation=operation, arguments=arguments)
            return work()

        self._hooks.current = (operation, arguments)
        try:
            return self.policy.call(attempt, op_class, name="%s %s" % (self.key, operation),
                                    look=look, operation=operation)
        finally:
            self._hooks.current = (None, {})

    def _look(self, name, done):
        """Look-before-retry: (True, vm or None) when ``done(vm)`` says the work is done."""

        def look():
            try:
                vm = self.provider.describe(name)
            except NotFound:
                return done(None), None
            return done(vm), vm

        return look

    def validate(self):
        return self._call("validate", {})

    def list_hypervisors(self):
        return self._call("list_hypervisors", {})

    def list_vms(self, filters=None):
        return self._call("list_vms", {"filters": filters})

    def list_vm_summaries(self, filters=None):
        self.provider.require("list_vms")
        return self._guard("list_vm_summaries", OPERATION_CLASS["list_vm_summaries"],
                           lambda: self.provider.list_vm_summaries(filters), {"filters": filters})

    def list_hypervisors_and_vms(self, filters=None):
        self.provider.require("list_hypervisors")
        self.provider.require("list_vms")
        return self._guard("list_hypervisors_and_vms", OPERATION_CLASS["list_hypervisors_and_vms"],
                           lambda: self.provider.list_hypervisors_and_vms(filters),
                           {"filters": filters})

    def describe(self, name):
        self.provider.check_name(name)
        return self._call("describe", {"name": name})

    def find(self, uuid):
        if not isinstance(uuid, str) or not uuid.strip():
            raise field_error("uuid", "must be a non-empty string, got %r" % (uuid,))
        return self._call("find", {"uuid": uuid})

    def create(self, spec):
        name = spec.get("name") if isinstance(spec, dict) else None
        if name is not None:
            self.provider.check_name(name, creating=True)
        look = self._look(name, lambda vm: vm is not None) if name else None
        return self._call("create", {"spec": spec}, look)

    def delete(self, name):
        self.provider.check_name(name)
        return self._call("delete", {"name": name}, self._look(name, lambda vm: vm is None))

    def power(self, name, action, timeout=None):
        self.provider.check_name(name)
        wanted = _POWER_STATE.get(action)
        look = None if wanted is None else self._look(
            name, lambda vm: vm is not None and vm.get("state") == wanted)
        arguments = {"name": name, "action": action, "timeout": timeout}
        if action != "shutdown":
            return self._call("power", arguments, look)
        self._check_own_timeout(timeout, "shutdown_timeout")
        self.provider.require("power")

        def shutdown():
            try:
                return self.provider.power(**arguments)
            except Timeout as exc:  # raised by the backend itself: the guest is still running
                raise _AnsweredTimeout(exc) from exc

        try:
            return self._guard("power", "mutating", shutdown, arguments, look)
        except _AnsweredTimeout as err:
            raise err.timeout from None

    def reconfigure(self, name, **changes):
        """Change the given fields (``_reconfigure`` rules); a field the backend cannot change
        raises NotSupported naming it, before any call."""
        self.provider.check_name(name)
        changes = dict((field, value) for field, value in changes.items() if value is not None)
        cannot = sorted(set(changes) - set(self.provider.reconfigurable))
        if cannot:
            raise NotSupported("the %s provider cannot change %s of an existing VM; set %s to "
                               "the VM's current value or remove it" % (
                                   self.type_name, ", ".join(cannot), " and ".join(cannot)))
        # imported here: only a change needs it (0.9 ms, python3 -X importtime;
        # tests/unit/modules/test_describe_imports.py)
        from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
            differences)

        return self._call("reconfigure", dict(changes, name=name), self._look(
            name, lambda vm: vm is not None and not differences(vm, changes)))

    def _check_own_timeout(self, timeout, field):
        """InvalidSpec naming ``field`` unless a time limit the backend keeps itself ends
        before the attempt's own (a Timeout of the attempt would be retried)."""
        limit = self.policy.settings.timeout_for("mutating")
        if timeout is not None and timeout >= limit:
            raise field_error(field, "%gs must be shorter than the time limit of a "
                              "changing call, resilience.timeout_mutating (%gs); lower the first "
                              "or raise the second" % (timeout, limit))

    def migrate(self, name, hypervisor, **placement):
        """Move the VM to host ``hypervisor`` of this provider; ``placement`` (resource_pool,
        datastore) is passed only with the keys given."""
        self.provider.check_name(name)
        arguments = dict(((key, value) for key, value in placement.items() if value is not None),
                         name=name, hypervisor=hypervisor)
        datastore = placement.get("datastore")
        return self._call("migrate", arguments, self._look(
            name, lambda vm: vm is not None and vm.get("hypervisor") == hypervisor and (
                datastore is None or (vm.get("placement") or {}).get("datastore") == datastore)))

    def locate_disks(self, paths, witnesses=()):
        """Where this provider's host sees ``paths``; ``witnesses`` are GuardedProviders of the
        same type (the backend talks to them directly, as a migration to its target)."""
        return self._call("locate_disks", {"paths": list(paths),
                                           "witnesses": [w.provider for w in witnesses]})

    def migrate_to(self, name, target, live=True, timeout=None, bandwidth_mib=None):
        """Move the VM to the provider ``target`` (a GuardedProvider of the same type); a retry
        looks first whether the target has it and this provider has not."""
        self.provider.check_name(name)
        self._check_own_timeout(timeout, "timeout")
        if target.type_name != self.type_name:
            raise field_error("target", "%s is a %s provider; a %s VM moves to another %s "
                              "provider" % (target.key, target.type_name, self.type_name,
                                            self.type_name))
        self.provider.require("migrate_to")
        arguments = {"name": name, "target": target.provider, "live": live, "timeout": timeout,
                     "bandwidth_mib": bandwidth_mib}

        def look():
            try:
                vm = target.provider.describe(name)
            except NotFound:
                return False, None
            try:
                self.provider.describe(name)
            except NotFound:
                return True, {"vm": vm, "mode": None, "downtime_ms": None, "copied_disks": [],
                              "shared_disks": []}
            return False, None

        def work():
            try:
                return self.provider.migrate_to(**arguments)
            except Timeout as exc:  # raised by the backend itself: the migration was cancelled
                raise _AnsweredTimeout(exc) from exc

        try:
            return self._guard("migrate_to", "mutating", work, arguments, look)
        except _AnsweredTimeout as err:
            raise err.timeout from None

    def recover(self, name, hypervisor):
        """Start the VM of a failed, fenced host on host ``hypervisor`` of this provider; a retry
        looks first whether it runs there."""
        self.provider.check_name(name)
        self.provider.require("recover")
        return self._call("recover", {"name": name, "hypervisor": hypervisor}, self._look(
            name, lambda vm: vm is not None and vm.get("hypervisor") == hypervisor
            and vm.get("state") == "running"))

    def set_maintenance(self, hypervisor, enabled):
        """The host ``hypervisor`` in (``enabled``) or out of the platform's maintenance mode;
        a retry looks first whether it is there already."""
        self.provider.require("maintenance")

        def look():
            found = [h for h in self.provider.list_hypervisors() if h["name"] == hypervisor]
            done = bool(found) and (found[0]["state"] == "maintenance") == enabled
            return done, False

        return self._guard("maintenance", "mutating", lambda: self.provider.set_maintenance(
            hypervisor, enabled), {"hypervisor": hypervisor, "enabled": enabled}, look)

    def task_status(self, task_id):
        return self._call("task_status", {"task_id": task_id})

    def list_snapshots(self, name):
        self.provider.check_name(name)
        return self._call("list_snapshots", {"name": name})

    def _snapshot_look(self, name, snapshot, done):
        """Look-before-retry of a snapshot call: ``done(the snapshot of that name or None)``."""

        def look():
            found = [s for s in self.provider.list_snapshots(name) if s["name"] == snapshot]
            return done(found[0] if found else None), found[0] if found else None

        return look

    def create_snapshot(self, name, snapshot, description="", memory=False, quiesce=False):
        self.provider.check_name(name)
        return self._call("create_snapshot", {
            "name": name, "snapshot": snapshot, "description": description, "memory": memory,
            "quiesce": quiesce}, self._snapshot_look(name, snapshot, lambda s: s is not None))

    def delete_snapshot(self, name, snapshot):
        self.provider.check_name(name)
        return self._call("delete_snapshot", {"name": name, "snapshot": snapshot},
                          self._snapshot_look(name, snapshot, lambda s: s is None))

    def revert_snapshot(self, name, snapshot):
        self.provider.check_name(name)
        return self._call("revert_snapshot", {"name": name, "snapshot": snapshot})

    def hold_capacity(self, reservation):
        """Hold failover capacity natively (``resilient_virt_hold_capacity`` hook), as a
        mutating call; None when no plugin can do it for this provider."""
        return self._capacity("hold_capacity", reservation)

    def release_capacity(self, reservation):
        """Release what ``hold_capacity`` held; None when no plugin can do it."""
        return self._capacity("release_capacity", reservation)

    def _capacity(self, operation, reservation):
        if self.hook is None:
            return None
        hook = getattr(self.hook, "resilient_virt_" + operation)
        return self._guard(operation, "mutating", lambda: hook(
            provider=self.provider, reservation=reservation), {"reservation": reservation})

    def backup(self, operation, **arguments):
        """Call the backup hook ``resilient_virt_<operation>`` (see ``hookspecs.py``) with
        ``arguments``; NotSupported when no plugin serves this provider."""
        op_class = BACKUP_OPERATION_CLASS[operation]
        hook = None if self.hook is None else getattr(self.hook, "resilient_virt_" + operation)

        def work():
            answer = None if hook is None else hook(provider=self.provider, **arguments)
            if answer is None:
                raise NotSupported("the %s provider %s cannot %s: no plugin implements backups "
                                   "for it" % (self.type_name, self.key,
                                               operation.replace("_", " ")))
            return answer

        look = None
        if operation == "backup_start":
            def look():
                status = self.hook.resilient_virt_backup_poll(provider=self.provider,
                                                              handle=arguments["handle"])
                return bool(status) and status.get("state") != "missing", arguments["handle"]
        return self._guard(operation, op_class, work, arguments, look)

    def close(self):
        self.provider.close()
