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
    Conflict, NotFound, Timeout, VirtError, field_error, field_errors)

STATES = ("present", "absent", "running", "stopped", "restarted")
SPEC_FIELDS = ("vcpus", "memory_mb", "disks", "interfaces", "boot", "metadata", "tags", "libvirt")
RECONFIGURABLE = ("vcpus", "memory_mb")
DIFF_FIELDS = ("state", "vcpus", "memory_mb")
MAX_REPLANS = 3
UNREAD = object()  # ``current`` not given: reconcile reads the VM itself


def diff_view(vm):
    """The part of a VM that the diff shows."""
    if vm is None:
        return {"state": "absent"}
    return dict((field, vm.get(field)) for field in DIFF_FIELDS)


def plan(current, state, spec):
    """Actions that take ``current`` (a VM dict or None) to ``state`` with ``spec``.

    Each action is ``(verb, arguments)``; verbs are create, delete, reconfigure, start, shutdown,
    reboot. The plan is pure, so check mode can return it without touching the provider.
    """
    if state not in STATES:
        raise field_error("state", "must be one of %s, not %r" % (", ".join(STATES), state))
    if state == "absent":
        return [("delete", {})] if current is not None else []
    actions = []
    if current is None:
        missing = [field for field in ("vcpus", "memory_mb") if spec.get(field) is None]
        if missing:
            raise field_errors(
                [{"path": field, "message": "required to create the VM"} for field in missing],
                "the VM does not exist; set %s or use state=absent" % " and ".join(missing),
            )
        actions.append(("create", {}))
        power = "stopped"
    else:
        changes = dict(
            (field, spec[field]) for field in RECONFIGURABLE
            if spec.get(field) is not None and spec[field] != current.get(field)
        )
        if changes:
            actions.append(("reconfigure", changes))
        power = current.get("state")
    running = power == "running"
    if state == "running" and not running:
        actions.append(("start", {}))
    elif state == "stopped" and running:
        actions.append(("shutdown", {}))
    elif state == "restarted":
        actions.append(("reboot", {}) if running else ("start", {}))
    return actions


def predict(current, actions, spec):
    """The VM view after ``actions``, for check mode and diff."""
    after = dict(diff_view(current))
    for verb, arguments in actions:
        if verb == "delete":
            return {"state": "absent"}
        if verb == "create":
            after = dict(state="stopped", vcpus=spec.get("vcpus"), memory_mb=spec.get("memory_mb"))
        elif verb == "reconfigure":
            after.update(arguments)
        elif verb in ("start", "reboot"):
            after["state"] = "running"
        elif verb == "shutdown":
            after["state"] = "stopped"
    return after


def describe_or_none(provider, name):
    try:
        return provider.describe(name)
    except NotFound:
        return None


def reconcile(provider, name, state, spec, check_mode=False, force=False, shutdown_timeout=None,
              current=UNREAD):
    """Plan and (unless ``check_mode``) apply; returns changed, actions, vm, before, after.

    ``current`` is the VM as just read (None: absent) when the caller has it already."""
    spec = dict((field, spec.get(field)) for field in SPEC_FIELDS if spec.get(field) is not None)
    if current is UNREAD:
        current = describe_or_none(provider, name)
    actions = plan(current, state, spec)
    result = dict(changed=bool(actions), actions=[verb for verb, changes in actions], before=diff_view(current))
    if check_mode or not actions:
        result["after"] = predict(current, actions, spec)
        result["vm"] = current
        return result
    vm, done = _converge(provider, name, state, spec, current, actions, force, shutdown_timeout)
    if vm is not None and state != "absent":
        vm = provider.describe(name)
    result["changed"] = bool(done)
    result["actions"] = done
    result["vm"] = vm
    result["after"] = diff_view(vm)
    if vm is not None and any(vm.get(field) != spec[field] for field in RECONFIGURABLE if field in spec):
        result["restart_required"] = True
    return result


def _converge(provider, name, state, spec, current, actions, force, shutdown_timeout):
    """Apply ``actions``, planning afresh when another task changed the VM meanwhile.

    Returns the VM after the last action and the verbs this task carried out.
    """
    vm, done = current, []
    verb, before = None, None
    for _round in range(MAX_REPLANS):
        try:
            for verb, arguments in actions:
                before = diff_view(vm)
                vm = _apply(provider, name, verb, arguments, spec, force, shutdown_timeout)
                if vm is None or vm.pop("changed", True):  # False: found done by someone else
                    done.append(verb)
            return vm, done
        except (Conflict, NotFound) as err:
            err.operation = verb
            vm = describe_or_none(provider, name)
            if diff_view(vm) == before:  # nobody else moved it: a real conflict
                raise
            actions = plan(vm, state, spec)
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
    if verb == "reboot":
        return provider.power(name, "reboot")
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
