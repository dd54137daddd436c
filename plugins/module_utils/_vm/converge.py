# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bring one VM to a wanted state through a provider: plan first, then act (or only plan).

Other tasks may work on the same VM at the same time (forks of a play, other controllers). An
action refused because the VM changed under us (Conflict: it exists, is already running...;
NotFound: it is gone) is not a failure when the VM now differs from what the plan was made
for: the VM is read again and the rest is planned afresh, so an idempotent request that finds
its work done by someone else succeeds without a change. A refusal with the VM unchanged is a
real conflict and fails the task.
"""


from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, Timeout, VirtError, field_error, field_errors)
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    FIELDS as RECONFIGURABLE, differences, merged_metadata)

STATES = ("present", "absent", "running", "stopped", "restarted", "paused", "suspended")
SPEC_FIELDS = ("vcpus", "memory_mb", "disks", "interfaces", "boot", "metadata", "tags", "autostart",
               "placement", "template", "clone", "guest_id", "customization", "libvirt", "cloud_init")
DIFF_FIELDS = ("state", "vcpus", "memory_mb")
MAX_REPLANS = 3
UNREAD = object()  # ``current`` not given: reconcile reads the VM itself


def diff_view(vm, spec=None):
    """The part of a VM that the diff shows: state, vCPUs, memory and the fields ``spec`` sets."""
    if vm is None:
        return {"state": "absent"}
    shown = DIFF_FIELDS + tuple(field for field in RECONFIGURABLE
                                if field not in DIFF_FIELDS and (spec or {}).get(field) is not None)
    return dict((field, vm.get(field)) for field in shown)


def plan(current, state, spec, reconfigurable=RECONFIGURABLE, where=None):
    """Actions that take ``current`` (a VM dict or None) to ``state`` with ``spec``.

    Each action is ``(verb, arguments)``; verbs are create, delete, reconfigure, start, shutdown,
    power_off, reboot, pause, suspend. The plan is pure, so check mode can return it without
    touching the provider. ``reconfigurable`` names the fields the provider can change on an
    existing VM: another field that differs is refused (NotSupported) before anything changes.
    ``where`` (``'db1' on libvirt:hv1``) names the VM in the error when it does not exist.
    """
    if state not in STATES:
        raise field_error("state", "must be one of %s, not %r" % (", ".join(STATES), state))
    if state == "absent":
        return [("delete", {})] if current is not None else []
    actions = []
    if current is None:
        missing = [field for field in ("vcpus", "memory_mb")
                   if spec.get(field) is None and not spec.get("template")]  # a clone inherits
        if missing:
            raise field_errors(
                [{"path": field, "message": "required to create the VM"} for field in missing],
                "no VM %s exists (check the name and the provider); to create one, set %s%s"
                % (where or "of that name", " and ".join(missing),
                   "" if state == "present" else " (a new VM is created, then made %s)" % state),
            )
        actions.append(("create", {}))
        power = "stopped"
    else:
        changes = differences(current, dict((field, spec.get(field)) for field in RECONFIGURABLE))
        cannot = sorted(set(changes) - set(reconfigurable))
        if cannot:
            raise NotSupported(
                "this provider cannot change %s of an existing VM (it differs from the spec); "
                "give the VM's current value or remove %s from the task"
                % (", ".join(cannot), " and ".join(cannot)), details={"fields": cannot})
        if changes:
            actions.append(("reconfigure", changes))
        power = current.get("state")
    return actions + _power_actions(power, state)


def _power_actions(power, state):
    """Power actions from the VM's state ``power`` to the wanted ``state``."""
    if state == "running":
        return [] if power == "running" else [("start", {})]
    if state == "stopped":
        return {"running": [("shutdown", {})], "paused": [("start", {}), ("shutdown", {})],
                "suspended": [("power_off", {})]}.get(power, [])
    if state == "paused":
        return {"running": [("pause", {})], "paused": []}.get(power, [("start", {}), ("pause", {})])
    if state == "suspended":
        if power == "stopped":
            raise field_error("state", "the VM is stopped, so it has no running state to "
                                       "suspend; use state=running first, or state=stopped")
        return {"running": [("suspend", {})], "suspended": []}.get(power, [("start", {}), ("suspend", {})])
    if state == "restarted":
        return [("start", {}), ("reboot", {})] if power == "paused" else \
            [("reboot", {})] if power == "running" else [("start", {})]
    return []


_POWER_AFTER = {"start": "running", "reboot": "running", "shutdown": "stopped",
                "power_off": "stopped", "pause": "paused", "suspend": "suspended"}


def predict(current, actions, spec):
    """The VM view after ``actions``, for check mode and diff."""
    after = dict(diff_view(current, spec))
    for verb, arguments in actions:
        if verb == "delete":
            return {"state": "absent"}
        if verb == "create":
            after = dict((field, spec.get(field)) for field in diff_view({}, spec))
            after["state"] = "stopped"
        elif verb == "reconfigure":
            for field, value in arguments.items():
                after[field] = _predicted(field, after.get(field), value)
        else:
            after["state"] = _POWER_AFTER[verb]
    return after


def _predicted(field, have, value):
    if field == "metadata":
        return merged_metadata(have, value)
    if field == "placement":
        return dict(have or {}, **dict((k, v) for k, v in value.items() if v is not None))
    if field in ("disks", "interfaces"):
        have = have or []
        return [dict(have[index], **item) if index < len(have) else item
                for index, item in enumerate(value)]
    return value


def find_by_uuid(provider, uuid, name, state):
    """(the name calls know the VM by, the VM or None) for the VM whose UUID is ``uuid``.

    ``name``, when given, must be the VM's name. Only ``state=absent`` accepts a UUID that names
    no VM (there is nothing to delete); a VM is never created by UUID."""
    try:
        reference = provider.find(uuid)
    except NotFound:
        if state == "absent" and name is not None:
            return name, None
        if state == "absent":
            return uuid, None
        raise field_error("uuid", "no VM has the UUID %s on this provider; a new VM's UUID is "
                                  "chosen when it is created, so leave uuid out to create one"
                                  % uuid) from None
    vm = provider.describe(reference)
    if name is not None and vm["name"] != name:
        raise field_error("name", "the VM with UUID %s is named %r, not %r; give name: %r or "
                                  "leave name out (a VM is not renamed)"
                          % (uuid, vm["name"], name, vm["name"]))
    return reference, vm


def describe_or_none(provider, name):
    try:
        return provider.describe(name)
    except NotFound:
        return None


def with_metadata(spec, metadata):
    """``spec`` with ``metadata`` merged into its own (``spec`` itself when there is none)."""
    if not metadata:
        return spec
    return dict(spec, metadata=dict(spec.get("metadata") or {}, **metadata))


def _where(provider, name):
    key = getattr(provider, "key", None)
    return "named %r%s" % (name, " on %s" % key if isinstance(key, str) else "")


def reconcile(provider, name, state, spec, check_mode=False, force=False, shutdown_timeout=None,
              current=UNREAD, create_metadata=None, before_create=None):
    """Plan and (unless ``check_mode``) apply; returns changed, actions, vm, before, after.

    ``current`` is the VM as just read (None: absent) when the caller has it already.
    ``create_metadata`` is metadata that only a create of this call writes (merged into the
    spec's): a VM that exists, or that another task creates meanwhile, never gets it.
    ``before_create(spec)`` runs when the plan creates the VM, in check mode too, and raises
    to refuse it (a hypervisor in maintenance)."""
    spec = dict((field, spec.get(field)) for field in SPEC_FIELDS if spec.get(field) is not None)
    if current is UNREAD:
        current = describe_or_none(provider, name)
    reconfigurable = getattr(provider, "reconfigurable", RECONFIGURABLE)
    actions = plan(current, state, spec, reconfigurable, _where(provider, name))
    if before_create is not None and actions and actions[0][0] == "create":
        before_create(spec)
    creating = with_metadata(spec, create_metadata)
    result = dict(changed=bool(actions), actions=[verb for verb, changes in actions],
                  before=diff_view(current, spec))
    if check_mode or not actions:
        result["after"] = predict(current, actions, creating if current is None else spec)
        result["vm"] = current
        result["restart_required"] = bool(current and current.get("restart_required"))
        return result
    vm, done = _converge(provider, name, state, spec, current, actions, force, shutdown_timeout,
                         reconfigurable, creating)
    if vm is not None and state != "absent":
        vm = provider.describe(name)
    result["changed"] = bool(done)
    result["actions"] = done
    result["vm"] = vm
    result["after"] = diff_view(vm, creating if "create" in done else spec)
    result["restart_required"] = bool(vm and vm.get("restart_required"))
    return result


def _converge(provider, name, state, spec, current, actions, force, shutdown_timeout,
              reconfigurable, creating):
    """Apply ``actions``, planning afresh when another task changed the VM meanwhile; a create
    sends ``creating`` (the spec with the metadata only a create writes).

    Returns the VM after the last action and the verbs this task carried out.
    """
    vm, done = current, []
    verb, before = None, None
    for _round in range(MAX_REPLANS):
        try:
            for verb, arguments in actions:
                before = diff_view(vm)
                vm = _apply(provider, name, verb, arguments,
                            creating if verb == "create" else spec, force, shutdown_timeout)
                found_done = vm is not None and vm.pop("changed", True) is False
                # False: found done by someone else. A create that returns made the VM (one
                # that existed is a Conflict), whatever its last step (a clone's reconfigure
                # with nothing left to change) says of itself.
                if verb == "create" or not found_done:
                    done.append(verb)
            return vm, done
        except (Conflict, NotFound) as err:
            err.operation = verb
            vm = describe_or_none(provider, name)
            if diff_view(vm) == before:  # nobody else moved it: a real conflict
                raise
            actions = plan(vm, state, spec, reconfigurable, _where(provider, name))
        except VirtError as err:
            err.operation = verb
            raise
    if actions:
        raise Conflict("%s kept changing under this task (%d rounds); run it again" % (name, MAX_REPLANS))
    return vm, done


def _apply(provider, name, verb, arguments, spec, force, shutdown_timeout):
    if verb == "create":
        return provider.create(dict(spec, name=name))
    if verb == "delete":
        provider.delete(name)
        return None
    if verb == "reconfigure":
        return provider.reconfigure(name, **arguments)
    if verb == "start":
        return provider.power(name, "on")
    if verb in ("reboot", "pause", "suspend"):
        return provider.power(name, verb)
    if verb == "power_off":
        return provider.power(name, "off")
    try:
        return provider.power(name, "shutdown", timeout=shutdown_timeout)
    except Timeout as err:
        if not force:
            raise Timeout(
                "%s did not shut down within the shutdown timeout; set force=true to power it off "
                "or raise shutdown_timeout" % name,
                cause=err,
            ) from err
        return provider.power(name, "off")
