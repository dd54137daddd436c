# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A record as a task's result shows it: the record, booleans for ``when:`` and a Ready condition.

``ready`` is True for Completed; ``finished`` for any final phase; ``failed`` for Failed,
PartiallyFailed and FailedValidation. The Ready condition's status is true (Completed), false
(failed) or null (still running), its reason the record's reason or phase, its message the
phase in words (the record's ``errors`` say what failed). The handle and the owner stay in the
record: they are what a later run needs to adopt it.
"""
from ansible_collections.resilient.virt.plugins.module_utils._backup.phases import COMPLETED, FINAL
from ansible_collections.resilient.virt.plugins.module_utils._conditions import READY, make_condition
from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time

__all__ = ("show",)


def show(record):
    """``record`` with ``ready``, ``finished``, ``failed`` and ``conditions`` added."""
    if record is None:
        return None
    phase = record["phase"]
    out = dict(record)
    out["ready"] = phase == COMPLETED
    out["finished"] = phase in FINAL
    out["failed"] = phase in FINAL and phase != COMPLETED
    status = True if out["ready"] else (False if out["failed"] else None)
    message = "%s %s is %s" % (record["kind"], record["name"], phase)
    changed_at = record.get("completed_at") or record.get("started_at") or record.get("created_at")
    out["conditions"] = [make_condition(READY, status, record.get("reason") or phase, message,
                                        now=parse_time(changed_at) if changed_at else None)]
    return out
