# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the ``vm_snapshot`` module does: :func:`run_vm_snapshot` takes the module's options (a
dict) and a :class:`TaskContext`.

The VM and its snapshots are read first; every decision is then made from them
(:func:`kind`, :func:`plan`) before anything changes, so that check mode reports exactly what
a real run does. Snapshots are idempotent by name: ``present`` takes one only when the VM has
none of that name, ``absent`` deletes one only when it has. A revert is an action: it is made
every time it is asked for (reverting twice ends the same).
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._convert import parse_duration, to_bool
from ansible_collections.resilient.virt.plugins.module_utils._input import Problems, check_int, check_text, shown
from ansible_collections.resilient.virt.plugins.module_utils._snapshot import marks
from ansible_collections.resilient.virt.plugins.module_utils._snapshot.retention import to_prune
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    SNAPSHOT_CAPABILITIES, new_snapshot)

__all__ = ("run_vm_snapshot", "check_params", "quiesce_mode", "kind", "plan", "shown_snapshot",
           "list_shown")

BEST_EFFORT = "best_effort"
MAX_AGE = 366 * 86400.0  # a longer max_age is a typing mistake
_ACTIVE = ("running", "paused")  # states in which a VM has a running state to keep


def quiesce_mode(value):
    """True, False or ``best_effort`` from the option's value; InvalidSpec naming ``quiesce``."""
    if value == BEST_EFFORT:
        return BEST_EFFORT
    try:
        return to_bool(value)
    except ValueError:
        raise field_error("quiesce", "%s: use true, false or best_effort" % shown(value)) from None


def check_params(params):
    """Every option that can be checked alone, before the provider is reached: the options as
    the task uses them (``quiesce`` a mode, ``max_age`` seconds); one InvalidSpec listing every
    problem."""
    problems, checked = Problems(), dict(params)
    check = problems.check
    check("vm", lambda: check_text(params.get("vm"), "vm", what="a VM name"))
    check("name", lambda: check_text(params.get("name"), "name", what="a snapshot name"))
    checked["quiesce"] = check("quiesce", lambda: quiesce_mode(params.get("quiesce", False)))
    if checked["quiesce"] is True and params.get("memory"):
        problems.append({"path": "quiesce", "message": "quiesce: true with memory: true: a "
                         "snapshot with memory keeps the guest's running state whole, caches "
                         "included, so it is not quiesced; give memory: false for a quiesced "
                         "disk-only snapshot, or quiesce: false"})
    retention = [key for key in ("keep_last", "max_age") if params.get(key) is not None]
    if retention and params["state"] != "present":
        problems.extend({"path": key, "message": "%s applies to state: present only; remove it"
                         % key} for key in retention)
    if params.get("keep_last") is not None:
        checked["keep_last"] = check("keep_last", lambda: check_int(params["keep_last"], "keep_last"))
    if params.get("max_age") is not None:
        checked["max_age"] = check("max_age", lambda: parse_duration(params["max_age"], "max_age",
                                                                     minimum=1.0,
                                                                     maximum=MAX_AGE))
    problems.raise_any()
    return checked


def shown_snapshot(snapshot):
    """A backend's snapshot dict as results show it: the description without the mark, and
    ``managed`` (made by this collection) and ``pinned`` read from it."""
    description, managed, pinned = marks.read(snapshot["description"])
    out = dict((key, value) for key, value in snapshot.items() if key != "not_quiesced")
    out.update(description=description, managed=managed, pinned=pinned)
    return out


def list_shown(provider, vm):
    """The snapshots of VM ``vm``, shown; NotSupported naming the provider that has none."""
    missing = [op for op in SNAPSHOT_CAPABILITIES if op not in provider.capabilities]
    if missing:
        raise NotSupported("the %s provider %s cannot take snapshots (its backend does not "
                           "implement %s)" % (provider.type_name, provider.key, ", ".join(missing)))
    return [shown_snapshot(s) for s in provider.list_snapshots(vm)]


def kind(vm_state, memory, quiesce):
    """(memory, quiesce, why not quiesced or None, warning or None) of a snapshot of a VM in
    ``vm_state`` asked with ``memory`` and ``quiesce`` (True, False, ``best_effort``): a VM
    that is not running or paused has no memory to keep, and its disks are at rest; a snapshot
    with memory is whole without a quiesce."""
    warning = not_quiesced = None
    active = vm_state in _ACTIVE
    if memory and not active:
        warning = ("the VM is %s, so the snapshot holds its disks only (there is no running "
                   "state to keep)" % vm_state)
        memory = False
    if quiesce and not active:
        not_quiesced = "the VM is %s: its disks are at rest, there is nothing to quiesce" % vm_state
        quiesce = False
    elif quiesce and memory:
        not_quiesced = ("a snapshot with memory is not quiesced: its memory keeps the guest's "
                        "filesystems as they were")
        quiesce = False
    return memory, quiesce, not_quiesced, warning


def plan(state, name, snapshots, keep_last=None, max_age=None, now=None):
    """What the task does, from the VM's snapshots (shown): ``{"create": bool, "delete": bool,
    "revert": bool, "prune": [names]}``; Conflict when two snapshots share ``name``, NotFound
    when a revert names none."""
    same = [s for s in snapshots if s["name"] == name]
    if len(same) > 1:
        raise Conflict("the VM has %d snapshots named %r; this task will not pick one - rename "
                       "or delete the others on the platform" % (len(same), name))
    if state == "reverted" and not same:
        raise NotFound("the VM has no snapshot %r; its snapshots: %s" % (
            name, ", ".join(s["name"] for s in snapshots) or "none"))
    create = state == "present" and not same
    prune = []
    if state == "present" and (keep_last is not None or max_age is not None):
        after = list(snapshots) + ([dict(new_snapshot(name, created=format_time(now)),
                                         managed=True, pinned=False)] if create else [])
        prune = [s["name"] for s in to_prune(after, keep_last, max_age, now, keep=name)]
    return {"create": create, "delete": state == "absent" and bool(same),
            "revert": state == "reverted", "prune": prune}


def _summary(snapshots):
    current = [s["name"] for s in snapshots if s["current"]]
    return {"snapshots": [s["name"] for s in snapshots], "current": current[0] if current else None}


def run_vm_snapshot(params, ctx):
    """The vm_snapshot task's result."""
    params = check_params(params)
    vm_name, name, state = params["vm"], params["name"], params["state"]
    provider = ctx.open_provider()
    vm = provider.describe(vm_name)
    before = list_shown(provider, vm_name)
    now = time.time()
    todo = plan(state, name, before, params.get("keep_last"), params.get("max_age"), now)
    result = {"changed": any(todo.values()), "snapshot": None, "not_quiesced": None,
              "pruned": todo["prune"]}
    existing = [s for s in before if s["name"] == name]
    after = [s for s in before if s["name"] not in todo["prune"]]
    if todo["create"]:
        memory, quiesce, result["not_quiesced"], warning = kind(
            vm["state"], params["memory"], params["quiesce"])
        if warning:
            ctx.warnings.append("VM %r: %s" % (vm_name, warning))
        description = marks.marked(params.get("description") or "", params["pinned"])
        if ctx.check_mode:
            made = shown_snapshot(new_snapshot(
                name, description=description, created=format_time(now), memory=memory,
                parent=_summary(before)["current"], current=True,
                vm_state=vm["state"] if memory else "stopped"))
        else:
            taken = provider.create_snapshot(vm_name, name, description, memory, quiesce)
            result["not_quiesced"] = taken.get("not_quiesced") or result["not_quiesced"]
            made = shown_snapshot(taken)
        after = [dict(s, current=False) for s in after] + [made]
        result["snapshot"] = made
    elif existing:
        result["snapshot"] = existing[0]
        _differences(ctx, vm_name, existing[0], params)
    if todo["delete"]:
        after = [s for s in after if s["name"] != name]
        result["snapshot"] = None
        if not ctx.check_mode:
            provider.delete_snapshot(vm_name, name)
    for pruned in todo["prune"]:
        if not ctx.check_mode:
            provider.delete_snapshot(vm_name, pruned)
    if todo["revert"]:
        after = [dict(s, current=s["name"] == name) for s in after]
        result["vm"] = dict(vm, state=existing[0]["vm_state"]) if ctx.check_mode else \
            provider.revert_snapshot(vm_name, name)
    if not ctx.check_mode and result["changed"]:
        after = list_shown(provider, vm_name)
        result["snapshot"] = next((s for s in after if s["name"] == name), None)
    result["snapshots"] = after
    if ctx.diff_mode and result["changed"]:
        result["diff"] = {"before": _summary(before), "after": _summary(after)}
    return result


def _differences(ctx, vm_name, snapshot, params):
    """Warn when an existing snapshot's description or pin differs from the task's: a snapshot
    is taken once, and neither is changed afterwards."""
    asked = params.get("description")
    if (asked is not None and asked != snapshot["description"]) or \
            bool(params["pinned"]) != snapshot["pinned"]:
        ctx.warnings.append(
            "snapshot %r of VM %r exists with another description or pin; it was left as it is "
            "(a snapshot's description and pin are set when it is taken: delete it and take it "
            "again to change them)" % (snapshot["name"], vm_name))
