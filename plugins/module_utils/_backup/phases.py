# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The phases of a backup or restore record, as Velero names them, and the legal moves.

A record starts ``New``; ``FailedValidation`` ends a request the provider refused before
anything started; ``InProgress`` means the provider operation may be running (its handle is in
the record). ``WaitingForPluginOperations*`` and ``Finalizing*`` are the phases of a backend
that finishes in steps; the final phases are ``Completed``, ``PartiallyFailed``, ``Failed`` and
``FailedValidation``. Any phase that is not final may move to ``Failed`` (the owner was lost,
the operation was cancelled).
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict

__all__ = ("NEW", "FAILED_VALIDATION", "IN_PROGRESS", "WAITING", "WAITING_PARTIALLY_FAILED",
           "FINALIZING", "FINALIZING_PARTIALLY_FAILED", "COMPLETED", "PARTIALLY_FAILED",
           "FAILED", "PHASES", "FINAL", "TRANSITIONS", "check_transition", "is_critical")

NEW = "New"
FAILED_VALIDATION = "FailedValidation"
IN_PROGRESS = "InProgress"
WAITING = "WaitingForPluginOperations"
WAITING_PARTIALLY_FAILED = "WaitingForPluginOperationsPartiallyFailed"
FINALIZING = "Finalizing"
FINALIZING_PARTIALLY_FAILED = "FinalizingPartiallyFailed"
COMPLETED = "Completed"
PARTIALLY_FAILED = "PartiallyFailed"
FAILED = "Failed"

PHASES = (NEW, FAILED_VALIDATION, IN_PROGRESS, WAITING, WAITING_PARTIALLY_FAILED, FINALIZING,
          FINALIZING_PARTIALLY_FAILED, COMPLETED, PARTIALLY_FAILED, FAILED)
FINAL = frozenset((FAILED_VALIDATION, COMPLETED, PARTIALLY_FAILED, FAILED))

# phase -> the phases it may move to
TRANSITIONS = {
    NEW: (FAILED_VALIDATION, IN_PROGRESS, FAILED),
    IN_PROGRESS: (WAITING, WAITING_PARTIALLY_FAILED, FINALIZING, FINALIZING_PARTIALLY_FAILED,
                  COMPLETED, PARTIALLY_FAILED, FAILED),
    WAITING: (WAITING_PARTIALLY_FAILED, FINALIZING, FINALIZING_PARTIALLY_FAILED, FAILED),
    WAITING_PARTIALLY_FAILED: (FINALIZING_PARTIALLY_FAILED, FAILED),
    FINALIZING: (COMPLETED, PARTIALLY_FAILED, FAILED),
    FINALIZING_PARTIALLY_FAILED: (PARTIALLY_FAILED, FAILED),
    FAILED_VALIDATION: (),
    COMPLETED: (),
    PARTIALLY_FAILED: (),
    FAILED: (),
}


def check_transition(current, wanted, name="record"):
    """True when ``current`` may move to ``wanted``; False when it already is there (a no-op);
    Conflict naming both phases when the move is illegal."""
    if wanted not in TRANSITIONS:
        raise Conflict("%s: %r is not a phase; phases are %s" % (name, wanted, ", ".join(PHASES)))
    if current == wanted:
        return False
    if wanted not in TRANSITIONS.get(current, ()):
        allowed = ", ".join(TRANSITIONS.get(current, ())) or "none: %s is final" % current
        raise Conflict("%s cannot move from phase %s to %s (from %s: %s)"
                       % (name, current, wanted, current, allowed),
                       details={"from": current, "to": wanted})
    return True


def is_critical(current, wanted):
    """A write that leaves InProgress or reaches a final phase: it must not be lost."""
    return current == IN_PROGRESS or wanted in FINAL
