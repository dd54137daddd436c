# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the ``backup`` and ``backup_status`` modules do: :func:`run_backup` and
:func:`run_backup_status` take the module's options (a dict) and a :class:`TaskContext`.

Both work on the records of ``records.py`` through a :class:`ledger.Ledger` owned by this task,
and on providers through :class:`operations.Operations`. Results show records with ``view.show``.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._backup import records, status_write, view
from ansible_collections.resilient.virt.plugins.module_utils._backup.ledger import Ledger
from ansible_collections.resilient.virt.plugins.module_utils._backup.operations import (
    Operations, children, latest_backup, retention)
from ansible_collections.resilient.virt.plugins.module_utils._backup.phases import (
    COMPLETED, FINAL, PARTIALLY_FAILED, PHASES, check_transition)
from ansible_collections.resilient.virt.plugins.module_utils._convert import parse_duration
from ansible_collections.resilient.virt.plugins.module_utils._input import (
    Problems, check_int, check_text, shown)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, Timeout, VirtError, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import provider_key

__all__ = ("run_backup", "run_backup_status", "ledger_of")


def ledger_of(params, ctx):
    """The Ledger of this task: the task's store, a new owner id, its lease and timeout."""
    timeout = params.get("resource_timeout")
    if timeout is None:
        timeout = ctx.environ.get(status_write.RESOURCE_TIMEOUT_ENV) or \
            status_write.DEFAULT_RESOURCE_TIMEOUT
        field = status_write.RESOURCE_TIMEOUT_ENV
    else:
        field = "resource_timeout"
    resource_timeout = parse_duration(timeout, field, minimum=1.0)
    lease = parse_duration(params["lease"], "lease", minimum=1.0)
    ctx.store  # noqa: B018 - opens the store once with the task's settings

    def reopen():
        return open_store(params.get("state_store"), environ=ctx.environ,
                          timeout=ctx.settings.store_timeout)

    return Ledger(reopen, records.owner_id(), lease, resource_timeout)


def _wait_timeout(params):
    return parse_duration(params["timeout"], "timeout", minimum=0.0)


def _attach(err, **result):
    err.result = dict(getattr(err, "result", None) or {}, **result)
    return err


# -- backup -------------------------------------------------------------------------------------
def _check_params(params, status):
    """Every option of a backup (``status`` False) or backup_status task that can be checked
    alone, before the store or a provider is reached; one InvalidSpec listing every problem."""
    problems = Problems()
    check = problems.check
    check("timeout", lambda: _wait_timeout(params))
    for field in ("vm",) + (() if status else ("target",)):
        if params.get(field) is not None:
            check(field, lambda field=field: check_text(params[field], field, what="a VM name"))
    for field in ("name",) + (() if status else ("backup",)):
        if params.get(field):
            check(field, lambda field=field: records.check_name(params[field], field))
    if status:
        for index, phase in enumerate(params.get("phase") or []):
            if phase not in PHASES:
                problems.append({"path": "phase[%d]" % index, "message": "%s is not a phase; "
                                 "use %s" % (shown(phase), ", ".join(PHASES))})
    elif params["keep_last"] is not None:
        check("keep_last", lambda: check_int(params["keep_last"], "keep_last"))
    problems.raise_any()


def run_backup(params, ctx):
    """The backup task's result."""
    _check_params(params, status=False)
    ledger = ledger_of(params, ctx)
    state = params["state"]
    try:
        return _absent(params, ctx, ledger) if state == "absent" else \
            _present_or_restored(params, ctx, ledger, state)
    finally:  # a failed task shows them too
        ctx.warnings.extend(ledger.warnings)


def _operations(ctx, ledger, reference=None):
    provider = ctx.open_provider(reference)
    name = ctx.provider_config(reference).get("name")
    return Operations(provider, ledger, provider_name=name)


def _adopt_expired(ops, ledger, vm, timeout):
    """Before a new backup of ``vm``: take over its records whose owner is gone."""
    adopted = []
    now = ledger.now()
    for record in ledger.all():
        if record["phase"] in FINAL or not records.matches(record, vm=vm, provider=ops.provider.key):
            continue
        if not records.lease_expired(record, now):
            raise Conflict("%s %s of VM %s is still running (phase %s, held by %s until %s); wait "
                           "for it with resilient.virt.backup_status (mode: wait)" % (
                               record["kind"], record["name"], vm, record["phase"],
                               record["owner"], record["lease_until"]))
        adopted.append(view.show(ops.adopt(record, timeout)))
    return adopted


def _present_or_restored(params, ctx, ledger, state):
    vm = params["vm"]
    if not vm:
        raise field_error("vm", "is required with state=%s: the VM to back up or whose backup "
                                "to restore" % state)
    ops = _operations(ctx, ledger)
    timeout = _wait_timeout(params)
    if params["name"]:
        existing = ledger.get(records.check_name(params["name"]))
        if existing is not None:
            return _existing(ops, ledger, existing, state, params, timeout)
    if state == "present":
        record = ops.record("backup", params["name"], vm, incremental=params["incremental"])
    else:
        backup = _backup_to_restore(ledger, params, vm, ops.provider.key)
        record = ops.record("restore", params["name"], vm, backup=backup["name"],
                            target=params["target"] or vm)
    result = {"changed": True}
    if ctx.diff_mode:
        result["diff"] = {"before": {}, "after": view.show(record)}
    if ctx.check_mode:
        result["record"] = view.show(record)
        return _finish(result)
    result["adopted"] = _adopt_expired(ops, ledger, vm, timeout)
    if state == "present":
        if params["incremental"]:
            parent = latest_backup(ledger.all(), vm, ops.provider.key)
            if parent is None:
                raise field_error("incremental", "VM %s has no completed backup on %s to build on; "
                                  "take a full backup first (incremental: false)"
                                  % (vm, ops.provider.key))
            record["parent"] = parent["name"]
        request = ops.backup_request(record)
    else:
        request = ops.restore_request(record, ledger.get(record["backup"]))
    try:
        record = ops.start(record, request, params["wait"], timeout, params["cancel_on_timeout"])
    except VirtError as err:
        raise _attach(err, record=view.show(ledger.get(record["name"]))) from None
    result["record"] = view.show(record)
    if state == "present" and record["phase"] == COMPLETED and params["keep_last"]:
        result["deleted"] = _retention(ops, ledger, vm, params["keep_last"])
    return _finish(result)


def _backup_to_restore(ledger, params, vm, provider_key):
    if params["backup"]:
        backup = ledger.get(records.check_name(params["backup"], "backup"))
        if backup is None or backup["kind"] != "backup":
            raise field_error("backup", "%r names no backup record; list them with "
                                        "resilient.virt.backup_status" % params["backup"])
        if backup["phase"] != COMPLETED:
            raise field_error("backup", "backup %s is %s, not Completed: only a completed backup "
                                        "can be restored" % (backup["name"], backup["phase"]))
        return backup
    backup = latest_backup(ledger.all(), vm, provider_key)
    if backup is None:
        raise field_error("backup", "VM %s has no completed backup on %s; name one with backup"
                          % (vm, provider_key))
    return backup


def _existing(ops, ledger, record, state, params, timeout):
    """A run that names a record that exists: report it, or follow it when it is running."""
    kind = "backup" if state == "present" else "restore"
    if record["kind"] != kind or record["vm"] != params["vm"]:
        raise field_error("name", "%s names the %s of VM %s; choose another name"
                          % (record["name"], record["kind"], record["vm"]))
    if record["phase"] not in FINAL and params["wait"] and \
            records.lease_expired(record, ledger.now()):
        record = ops.adopt(record, timeout)
    return _finish({"changed": False, "record": view.show(record)})


def _retention(ops, ledger, vm, keep_last):
    done = [r for r in ledger.all()
            if records.matches(r, vm=vm, provider=ops.provider.key, kind="backup",
                               phase=COMPLETED)]
    deleted = []
    for record in retention(done, keep_last):
        ops.delete(record)
        deleted.append(record["name"])
    return deleted


def _absent(params, ctx, ledger):
    if not params["name"]:
        raise field_error("name", "is required with state=absent: the backup record to delete")
    record = ledger.get(records.check_name(params["name"]))
    if record is None:
        return {"changed": False, "record": None}
    kids = children(record, ledger.all())
    if kids:
        raise Conflict("backup %s is the parent of %s; delete those first (an incremental backup "
                       "cannot be restored without its parent)" % (
                           record["name"], ", ".join(sorted(k["name"] for k in kids))))
    result = {"changed": True, "record": view.show(record)}
    if ctx.diff_mode:
        result["diff"] = {"before": view.show(record), "after": {}}
    if ctx.check_mode:
        return result
    ops = _operations(ctx, ledger, _provider_reference(params, ctx, record))
    record = ops.cancel(record)
    ops.delete(record)
    return result


def _provider_reference(params, ctx, record):
    """The ``provider`` option if it serves the record's provider, else the catalog entry of
    that name; InvalidSpec naming both when neither does."""
    candidates = []
    if params.get("provider") is not None:
        candidates.append(None)
    candidates.extend(sorted(str(n) for n in (params.get("providers") or {})))
    for reference in candidates:
        if provider_key(ctx.provider_config(reference), environ=ctx.environ) == record["provider"]:
            return reference
    raise field_error("provider", "record %s belongs to provider %s (%s), which neither provider "
                      "nor providers gives; add it" % (record["name"], record["provider"],
                                                       record.get("provider_name")))


def _finish(result):
    record = result.get("record")
    result["ready"] = bool(record and record["ready"])
    return result


# -- backup_status ------------------------------------------------------------------------------
def run_backup_status(params, ctx):
    """The backup_status task's result."""
    _check_params(params, status=True)
    ledger = ledger_of(params, ctx)
    mode = params["mode"]
    try:
        if mode == "show":
            return _show(ledger, params)
        if mode == "wait":
            return _wait(params, ctx, ledger)
        if mode == "set":
            return _set(params, ctx, ledger)
        return _reconcile(params, ctx, ledger)
    finally:  # a failed task shows them too
        ctx.warnings.extend(ledger.warnings)


def _selected(ledger, params):
    return [r for r in ledger.all()
            if (not params["name"] or r["name"] == params["name"]) and records.matches(
                r, vm=params["vm"] or None, kind=params["kind"], phase=params["phase"] or None)]


def _named(ledger, params, mode):
    if not params["name"]:
        raise field_error("name", "is required with mode=%s" % mode)
    record = ledger.get(records.check_name(params["name"]))
    if record is None:
        raise NotFound("no backup record named %s; list them with resilient.virt.backup_status"
                       % params["name"])
    return record


def _show(ledger, params):
    found = [view.show(r) for r in _selected(ledger, params)]
    result = {"changed": False, "records": found}
    if params["name"]:
        if not found:
            raise NotFound("no backup record named %s; list them without name" % params["name"])
        result["record"] = found[0]
    return result


def _wait(params, ctx, ledger):
    """Wait for the named record to reach a final phase; adopt it when its owner is gone and a
    provider for it is given."""
    record = _named(ledger, params, "wait")
    timeout = _wait_timeout(params)
    end = time.monotonic() + timeout
    interval = 0.2
    while record["phase"] not in FINAL:
        if records.lease_expired(record, ledger.now()) and _can_reach(params, ctx, record):
            ops = _operations(ctx, ledger, _provider_reference(params, ctx, record))
            record = ops.adopt(record, max(0.0, end - time.monotonic()))
            continue
        if time.monotonic() >= end:
            raise _attach(Timeout("backup record %s is still %s after %gs" % (
                record["name"], record["phase"], timeout)), record=view.show(record))
        time.sleep(min(interval, max(0.0, end - time.monotonic())))
        interval = min(2.0, interval * 1.5)
        record = ledger.get(record["name"]) or record
    shown = view.show(record)
    if shown["failed"] and params["fail_on_failure"] and not (
            record["phase"] == PARTIALLY_FAILED and params["accept_partial"]):
        raise _attach(Conflict("%s %s ended %s%s: %s" % (
            record["kind"], record["name"], record["phase"],
            " (%s)" % record["reason"] if record.get("reason") else "",
            "; ".join(record.get("errors") or []) or "no error recorded")), record=shown,
            records=[shown])
    return {"changed": False, "record": shown, "records": [shown]}


def _can_reach(params, ctx, record):
    try:
        _provider_reference(params, ctx, record)
    except VirtError:
        return False
    return True


def _set(params, ctx, ledger):
    """An operator's override of a record's phase: same transition and retry rules."""
    record = _named(ledger, params, "set")
    phase = params["set_phase"]
    if phase not in PHASES:
        raise field_error("set_phase", "is required with mode=set: one of %s" % ", ".join(PHASES))
    fields = {}
    if params["set_reason"]:
        fields["reason"] = params["set_reason"]
    if params["set_message"]:
        fields["errors"] = list(record.get("errors") or []) + [params["set_message"]]
    changed = check_transition(record["phase"], phase, "backup record %s" % record["name"])
    result = {"changed": changed}
    after = dict(record, phase=phase, **fields)
    if changed and ctx.diff_mode:
        result["diff"] = {"before": {"phase": record["phase"]}, "after": {"phase": phase}}
    if changed and not ctx.check_mode:
        after = ledger.move(record, phase, override=True, **fields)
    shown = view.show(after if changed else record)
    result.update(record=shown, records=[shown])
    return result


def _reconcile(params, ctx, ledger):
    """Adopt or fail every selected record whose lease has expired."""
    now = ledger.now()
    expired = [r for r in _selected(ledger, params)
               if r["phase"] not in FINAL and records.lease_expired(r, now)]
    result = {"changed": False, "adopted": [], "skipped": []}
    timeout = _wait_timeout(params)
    for record in expired:
        try:
            reference = _provider_reference(params, ctx, record)
        except VirtError as err:
            result["skipped"].append({"name": record["name"], "reason": err.message})
            ctx.warnings.append("record %s was not reconciled: %s"
                                % (record["name"], err.message))
            continue
        result["changed"] = True
        if ctx.check_mode:
            result["adopted"].append(view.show(record))
            continue
        ops = _operations(ctx, ledger, reference)
        result["adopted"].append(view.show(ops.adopt(record, timeout)))
    result["records"] = [view.show(r) for r in _selected(ledger, params)]
    return result
