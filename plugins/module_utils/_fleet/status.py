# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The status of each VM of a fleet across runs, and what a run does with it.

A status record (state store namespace :data:`NAMESPACE`, key ``owner|provider|name``) holds the
hash of the spec it was reconciled for, ``status`` (``done`` or ``error``), ``attempts`` (failed
attempts in a row for this spec), the last ``error`` (type, message), ``terminal`` (an error that
only a spec change can clear), ``updated_at`` and ``next_retry_at`` (epoch seconds), and the VM
as last seen (``observed``: state, vCPUs, memory, hypervisor, uuid).

:func:`decide` says what a run does with a VM; :func:`succeeded` and :func:`failed` give the
record that follows an attempt. Success resets the backoff; a failure waits
``backoff_min * 2**(attempts-1)``, at most ``backoff_max``; a terminal error, or the last of
``max_attempts``, waits for a spec change or ``retry_now``.
"""

__all__ = ("NAMESPACE", "TERMINAL_ERRORS", "Decision", "Backoff", "record_key", "owner_prefix", "decide",
           "succeeded", "failed")

NAMESPACE = "vm_fleet"
# errors that a retry with the same spec cannot pass
TERMINAL_ERRORS = ("InvalidSpec", "Unauthorized", "NotSupported", "QuotaExceeded", "Conflict")

RECONCILE = "reconcile"  # read the VM and bring it to the spec
VERIFY = "verify"        # read the VM; act only when it drifted (a full run)
UNCHANGED = "unchanged"  # nothing to do: same spec, last reconcile succeeded
DEFERRED = "deferred"    # failed before; waits for its retry time, a spec change or retry_now


def record_key(owner, provider, name):
    return "%s|%s|%s" % (owner, provider, name)


def owner_prefix(owner):
    """The start of every record key of ``owner`` (and of no other owner's)."""
    return owner + "|"


class Backoff:
    """Per-VM backoff across runs: ``minimum``, ``maximum`` (seconds), ``max_attempts``."""

    def __init__(self, minimum, maximum, max_attempts):
        self.minimum = float(minimum)
        self.maximum = float(maximum)
        self.max_attempts = int(max_attempts)

    def delay(self, attempts):
        """Seconds to wait after the ``attempts``-th failure in a row."""
        delay = self.minimum
        for _step in range(1, attempts):
            delay *= 2
            if delay >= self.maximum:
                break
        return min(delay, self.maximum)


class Decision:
    """What a run does with one VM: ``kind`` (RECONCILE, VERIFY, UNCHANGED, DEFERRED),
    ``attempt`` (the number of this attempt for this spec, when one is made) and ``reason``."""

    __slots__ = ("kind", "attempt", "reason")

    def __init__(self, kind, attempt=None, reason=""):
        self.kind = kind
        self.attempt = attempt
        self.reason = reason

    def __repr__(self):
        return "Decision(%s, %s, %r)" % (self.kind, self.attempt, self.reason)


def decide(record, spec_hash, now, full=False, retry_now=False, backoff=None):
    """The Decision for a VM whose status is ``record`` (or None) and whose spec hashes to
    ``spec_hash``, at epoch ``now``."""
    if record is None or record.get("spec_hash") != spec_hash:
        return Decision(RECONCILE, 1, "new" if record is None else "spec changed")
    attempts = int(record.get("attempts") or 0)
    if record.get("status") == "done":
        return Decision(VERIFY, 1, "full run") if full else Decision(UNCHANGED, None, "in sync")
    if retry_now:
        return Decision(RECONCILE, attempts + 1, "retry_now")
    if record.get("status") != "error":  # a record this version does not know: look again
        return Decision(RECONCILE, attempts + 1, "unknown status")
    error = (record.get("error") or {}).get("type")
    if record.get("terminal"):
        return Decision(DEFERRED, attempts, "%s cannot pass with this spec; change the spec or "
                        "set retry_now" % error)
    if backoff is not None and attempts >= backoff.max_attempts:
        return Decision(DEFERRED, attempts, "gave up after %d attempts (max_attempts); change "
                        "the spec or set retry_now" % attempts)
    retry_at = record.get("next_retry_at")
    if retry_at is not None and now < retry_at:
        return Decision(DEFERRED, attempts, "backing off after %s until next_retry_at" % error)
    return Decision(RECONCILE, attempts + 1, "retry after %s" % error)


def _record(owner, vm, now, **fields):
    record = {"owner": owner, "provider": vm.provider, "provider_ref": vm.provider_ref,
              "name": vm.name, "spec_hash": vm.spec_hash, "updated_at": now}
    record.update(fields)
    return record


def succeeded(owner, vm, observed, now):
    """The record after a successful reconcile: done, backoff reset."""
    return _record(owner, vm, now, status="done", attempts=0, error=None, terminal=False,
                   next_retry_at=None, observed=observed)


def failed(owner, vm, err, attempt, now, backoff, observed=None):
    """The record after attempt number ``attempt`` failed with the VirtError ``err``."""
    terminal = err.type in TERMINAL_ERRORS
    last = attempt >= backoff.max_attempts
    retry_at = None if terminal or last else now + backoff.delay(attempt)
    return _record(owner, vm, now, status="error", attempts=attempt, terminal=terminal,
                   error={"type": err.type, "message": err.message}, next_retry_at=retry_at,
                   observed=observed)
