# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backups and restores as records that follow a provider operation to its real outcome.

The order of every operation: the record is written (New), the provider plans the operation
(``backup_prepare``; a refusal ends the record FailedValidation), the handle is written with the
move to InProgress, and only then is the operation started and waited on. So a run killed at
any point leaves a record whose handle names everything it may have started. The wait polls the
provider, renews the lease and writes progress; it ends with the outcome the provider reports
(Completed, Failed) written as a critical write. A wait that times out leaves the record
InProgress with its handle and lease for a later run to adopt (:func:`adopt`), or, with
``cancel_on_timeout``, cancels the provider's operation first and records Failed (Cancelled).
A task that does not wait releases its lease at once: any later run may follow the operation.
A provider that stops answering leaves the record as it is: nothing is reported that was not
seen.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._backup import records
from ansible_collections.resilient.virt.plugins.module_utils._backup.phases import (
    COMPLETED, FAILED, FAILED_VALIDATION, FINAL, IN_PROGRESS)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import Deadline
from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotFound, NotSupported, Timeout, VirtError)

__all__ = ("Operations", "OWNER_LOST", "CANCELLED", "PROVIDER_FAILED", "children", "retention",
           "latest_backup", "poll_interval")

OWNER_LOST = "OwnerLost"
CANCELLED = "Cancelled"
PROVIDER_FAILED = "ProviderFailed"
POLL_MIN = 0.05
POLL_MAX = 5.0
POLL_FRACTION = 0.2
_REFUSALS = (InvalidSpec, NotFound, NotSupported, Conflict)


def poll_interval(elapsed):
    """Seconds to wait before the next poll of an operation followed for ``elapsed`` seconds:
    a fifth of that (from POLL_MIN up to POLL_MAX), so its end is seen at most about 20 % late,
    with few polls for a long operation."""
    return max(POLL_MIN, min(POLL_MAX, elapsed * POLL_FRACTION))


class Operations:
    """Backups and restores of one provider (a GuardedProvider) with the records of ``ledger``."""

    def __init__(self, provider, ledger, provider_name=None, sleep=time.sleep,
                 clock=time.monotonic):
        self.provider = provider
        self.ledger = ledger
        self.provider_name = provider_name
        self.sleep = sleep
        self.clock = clock

    # -- starting ---------------------------------------------------------------------------
    def record(self, kind, name, vm, **fields):
        """A new record in phase New (not written)."""
        now = self.ledger.now()
        name = records.check_name(name) if name else records.new_name(kind, vm, now)
        return records.new_record(name, kind, vm, self.provider.key, self.provider_name,
                                  self.ledger.owner, self.ledger.lease, now, **fields)

    def backup_request(self, record):
        parent = None
        if record["parent"]:
            parent = self.ledger.get(record["parent"])
            parent = parent and parent.get("artifact")
        return {"kind": "backup", "name": record["name"], "vm": record["vm"],
                "incremental": record["incremental"], "parent": parent}

    def restore_request(self, record, backup):
        return {"kind": "restore", "name": record["name"], "vm": backup["vm"],
                "backup": backup["artifact"], "target": record["target"]}

    def start(self, record, request, wait, timeout, cancel_on_timeout=False):
        """Write ``record``, plan, write the handle, start, and follow when ``wait``."""
        record = self.ledger.create(record)
        try:
            handle = self.provider.backup("backup_prepare", request=request)
        except _REFUSALS as err:
            self.ledger.move(record, FAILED_VALIDATION, reason=type(err).__name__,
                             errors=[err.message])
            raise
        except VirtError as err:  # nothing started: the record says why
            self.ledger.move(record, FAILED, reason=PROVIDER_FAILED, errors=[err.message])
            raise
        record = self.ledger.move(record, IN_PROGRESS, handle=handle)
        try:
            started = self.provider.backup("backup_start", handle=handle)
        except _REFUSALS as err:  # refused: nothing runs
            self.ledger.move(record, FAILED, reason=type(err).__name__, errors=[err.message])
            raise
        # any other failure leaves the record InProgress with its handle: whether the operation
        # started is unknown, so a later run adopts it and sees
        if not wait:  # nobody follows it from now on: anyone may adopt it at once
            return self.ledger.renew(record, lease=0.0, handle=started)
        if started != handle:
            record = self.ledger.renew(record, handle=started)
        return self.follow(record, timeout, cancel_on_timeout)

    # -- following ----------------------------------------------------------------------------
    def follow(self, record, timeout, cancel_on_timeout=False):
        """Poll the record's operation until it ends or ``timeout`` seconds pass, waiting
        :func:`poll_interval` between two polls."""
        deadline = Deadline.after(timeout, self.clock)
        begun = self.clock()
        while True:
            status = self.provider.backup("backup_poll", handle=record["handle"])
            state = status.get("state")
            if state != "running":
                return self.settle(record, status)
            if deadline.expired():
                return self.timed_out(record, timeout, cancel_on_timeout)
            if status.get("progress") != record.get("progress") or self._lease_half_gone(record):
                record = self.ledger.renew(record, progress=status.get("progress"))
            self.sleep(min(poll_interval(self.clock() - begun), deadline.remaining()))

    def _lease_half_gone(self, record):
        until = record.get("lease_until")
        return until is None or parse_time(until) - time.time() < self.ledger.lease / 2

    def settle(self, record, status, lost=False):
        """Write the outcome ``status`` reports (a poll that is not ``running``)."""
        state = status.get("state")
        warnings = list(record.get("warnings") or []) + [
            w for w in status.get("warnings") or [] if w not in (record.get("warnings") or [])]
        if state == "completed":
            fields = dict(progress=100, warnings=warnings)
            if record["kind"] == "backup":
                fields["artifact"] = status.get("artifact")
                fields["incremental"] = bool((status.get("artifact") or {}).get(
                    "incremental", record["incremental"]))
            return self.ledger.move(record, COMPLETED, **fields)
        if state == "missing":
            reason = OWNER_LOST if lost else PROVIDER_FAILED
            message = ("the provider has no trace of the operation: its owner %s was lost before "
                       "it started or its traces are gone" % record.get("owner") if lost else
                       "the provider lost the operation it had started")
            return self.ledger.move(record, FAILED, reason=reason, warnings=warnings,
                                    errors=list(record.get("errors") or []) + [message])
        reason = CANCELLED if state == "cancelled" else PROVIDER_FAILED
        message = status.get("message") or "the provider reports the operation %s" % state
        return self.ledger.move(record, FAILED, reason=reason, warnings=warnings,
                                errors=list(record.get("errors") or []) + [message])

    def timed_out(self, record, timeout, cancel_on_timeout):
        if cancel_on_timeout:
            self.provider.backup("backup_cancel", handle=record["handle"])
            record = self.ledger.move(record, FAILED, reason=CANCELLED, errors=list(
                record.get("errors") or []) + ["cancelled after the wait timed out (%gs)" % timeout])
            err = Timeout("%s %s did not finish within %gs: cancelled, record Failed"
                          % (record["kind"], record["name"], timeout))
        else:
            err = Timeout("%s %s did not finish within %gs; it goes on, its record stays %s with "
                          "its handle, and a later run follows it (resilient.virt.backup_status "
                          "with wait or reconcile)" % (record["kind"], record["name"], timeout,
                                                       record["phase"]))
        err.result = {"record": record}
        raise err

    # -- adopting -----------------------------------------------------------------------------
    def adopt(self, record, timeout):
        """Take over ``record`` whose owner is gone and follow its operation to its outcome;
        a record without a handle, or whose operation the provider does not know, is Failed
        with reason OwnerLost. An adoption that fails before the record's outcome is written
        (the provider's breaker open, the provider unreachable, the wait timed out) gives the
        record back - its owner and lease as they were, its phase and history untouched - so
        that the next run adopts it at once, then raises its error."""
        previous = record
        record = self.ledger.take(record)
        try:
            return self._adopted(record, timeout)
        except BaseException as err:
            back = self.ledger.give_back(record, previous)
            shown = (getattr(err, "result", None) or {}).get("record")
            if isinstance(shown, dict) and shown.get("name") == back["name"]:
                err.result["record"] = dict(shown, **dict(
                    (field, back.get(field)) for field in ("owner", "lease_until", "version",
                                                           "updated_at")))
            raise

    def _adopted(self, record, timeout):
        if not record.get("handle"):
            return self.ledger.move(record, FAILED, reason=OWNER_LOST, errors=list(
                record.get("errors") or []) + ["its owner %s was lost before the operation "
                                               "started" % record.get("owner")])
        status = self.provider.backup("backup_poll", handle=record["handle"])
        if status.get("state") == "running":
            return self.follow(record, timeout)
        return self.settle(record, status, lost=True)

    # -- ending -------------------------------------------------------------------------------
    def cancel(self, record):
        """Cancel the operation of a record that is not final; Failed (Cancelled)."""
        if record["phase"] in FINAL:
            return record
        if record.get("handle"):
            self.provider.backup("backup_cancel", handle=record["handle"])
        return self.ledger.move(record, FAILED, reason=CANCELLED, override=True,
                                errors=list(record.get("errors") or []) + ["cancelled"])

    def delete(self, record):
        """Delete what ``record`` stored on the provider, then the record."""
        if record.get("artifact"):
            self.provider.backup("backup_delete", artifact=record["artifact"])
        self.ledger.remove(record)


def children(record, all_records):
    """Backups that build on ``record`` (its incremental children)."""
    return [r for r in all_records if r.get("parent") == record["name"] and r["kind"] == "backup"]


def retention(completed, keep_last):
    """Which of ``completed`` (backups of one VM, Completed) to delete to keep the newest
    ``keep_last``: never one that a kept backup builds on."""
    newest = sorted(completed, key=lambda r: (r.get("completed_at") or "", r["name"]),
                    reverse=True)
    keep = set(r["name"] for r in newest[:keep_last])
    by_name = dict((r["name"], r) for r in completed)
    for name in list(keep):
        parent = by_name[name].get("parent")
        while parent in by_name and parent not in keep:
            keep.add(parent)
            parent = by_name[parent].get("parent")
    return [r for r in newest if r["name"] not in keep]


def latest_backup(all_records, vm, provider_key):
    """The newest Completed backup of ``vm`` on the provider, or None."""
    done = [r for r in all_records if records.matches(r, vm=vm, provider=provider_key,
                                                      kind="backup", phase=COMPLETED)]
    return max(done, key=lambda r: (r.get("completed_at") or "", r["name"])) if done else None
