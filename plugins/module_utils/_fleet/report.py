# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The result of a fleet run for playbooks: a summary, one entry per VM, a diff, the failure."""
from ansible_collections.resilient.virt.plugins.module_utils import _conditions as conditions
from ansible_collections.resilient.virt.plugins.module_utils._fleet.status import record_key
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, Internal, InvalidSpec, NotFound, NotSupported, QuotaExceeded, RateLimit, Timeout,
    Unauthorized, Unavailable)

__all__ = ("OUTCOMES", "summarize", "vm_results", "diff", "failure")

OUTCOMES = ("created", "updated", "started", "stopped", "deleted", "pruned", "unchanged",
            "failed", "deferred")
_ERRORS = dict((klass.type, klass) for klass in (
    Conflict, Internal, InvalidSpec, NotFound, NotSupported, QuotaExceeded, RateLimit, Timeout,
    Unauthorized, Unavailable))


def summarize(outcomes):
    """Counts of each outcome, ``out_of_sync`` (drift found by a full run) and ``total``."""
    summary = dict((name, 0) for name in OUTCOMES)
    for outcome in outcomes:
        summary[outcome.outcome] += 1
    summary["out_of_sync"] = sum(1 for outcome in outcomes if outcome.out_of_sync)
    summary["total"] = len(outcomes)
    return summary


def _time(epoch):
    return None if epoch is None else format_time(epoch)


def _status(outcome, old, check_mode):
    if outcome.record is not None:
        return outcome.record
    if check_mode and outcome.outcome not in ("unchanged", "deferred"):
        return {"status": "pending", "attempts": 0}
    return old or {"status": "pending", "attempts": 0}


def _conditions(outcome, status, now):
    name = outcome.vm.name
    if outcome.outcome == "failed":
        make = conditions.vm_validation_error if outcome.error.type == "InvalidSpec" else \
            conditions.vm_provider_error
        return [make(now)]  # the VM's error says what failed
    if outcome.outcome == "deferred":
        reason = outcome.error.message if outcome.error is not None else outcome.decision.reason
        return [conditions.make_condition(conditions.READY, False, "Deferred", reason, now)]
    if status.get("status") == "pending":
        return [conditions.make_condition(conditions.READY, False, "Pending",
                                          "check mode: %s would be %s" % (name, outcome.outcome), now)]
    state = "absent" if outcome.vm.state == "absent" else (outcome.observed or {}).get("state")
    return [conditions.vm_ready("%s is %s" % (name, state), now)]


def vm_results(outcomes, records, owner, max_attempts, check_mode, now):
    """One result per VM (see the vm_fleet module's RETURN); ``records`` are the statuses read
    at the start, keyed by :func:`status.record_key`."""
    results = []
    for outcome in outcomes:
        vm = outcome.vm
        old = records.get(record_key(owner, vm.provider, vm.name))
        status = _status(outcome, old, check_mode)
        attempt = outcome.decision.attempt if outcome.outcome != "deferred" else \
            int(status.get("attempts") or 0) or None
        error = outcome.error if outcome.error is not None else None
        stored_error = status.get("error") if outcome.outcome == "deferred" else None
        results.append({
            "name": vm.name,
            "provider": vm.provider,
            "state": vm.state,
            "outcome": outcome.outcome,
            "actions": outcome.actions,
            "reason": outcome.decision.reason,
            "out_of_sync": outcome.out_of_sync,
            "status": status.get("status"),
            "attempt": attempt,
            "last_attempt": bool(status.get("status") == "error" and attempt is not None
                                 and attempt >= max_attempts),
            "error": error.to_dict() if error is not None else stored_error,
            "next_retry_at": _time(status.get("next_retry_at")),
            "updated_at": _time(status.get("updated_at")),
            "restart_required": outcome.restart_required,
            "vm": outcome.observed,
            "conditions": _conditions(outcome, status, now),
        })
    return results


def diff(outcomes):
    """Before and after of every VM that changed (or would), keyed by ``provider/name``."""
    before, after = {}, {}
    for outcome in outcomes:
        if outcome.actions and outcome.error is None:
            before[outcome.vm.id] = outcome.before
            after[outcome.vm.id] = outcome.after
    return {"before": before, "after": after}


def failure(outcomes):
    """The error that fails the task when VMs failed (None when none did): the type of the first
    failure, a message naming how many failed and the first few."""
    failed = [outcome for outcome in outcomes if outcome.outcome == "failed"]
    if not failed:
        return None
    first = failed[0].error
    shown = "; ".join("%s: %s: %s" % (o.vm.id, o.error.type, o.error.message) for o in failed[:3])
    more = " (and %d more; see vms)" % (len(failed) - 3) if len(failed) > 3 else ""
    message = "%d of %d VMs failed: %s%s" % (len(failed), len(outcomes), shown, more)
    return _ERRORS.get(first.type, Internal)(message, details={"failed": [o.vm.id for o in failed]})
