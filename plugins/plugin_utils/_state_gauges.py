# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the state store says of fleets, backups and failover reservations, counted for gauges.

Each function reads one namespace's records (as ``StateStore.items`` gives them) and counts
them by labels that carry no record name: VMs of each fleet by provider and status, backup and
restore records by provider, kind and phase (with the creation time of the oldest one not
finished), and the reservations of each creator with the vCPUs and memory they hold. Records
that something else wrote in a shape these do not know count under ``other`` or not at all.
"""
from ansible_collections.resilient.virt.plugins.module_utils._backup.phases import FINAL, PHASES
from ansible_collections.resilient.virt.plugins.module_utils._backup.records import KINDS
from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec

__all__ = ("fleet_vms", "backup_records", "unfinished_backups", "reserved_capacity",
           "FLEET_STATUSES", "OTHER")

FLEET_STATUSES = ("done", "error")  # _fleet/status.py: reconciled, or failed and retried later
OTHER = "other"


def _text(value):
    return value if isinstance(value, str) and value else OTHER


def _count(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0


def fleet_vms(records):
    """{(fleet, provider key, status): VMs} from the ``vm_fleet`` records."""
    counts = {}
    for record in records.values():
        if not isinstance(record, dict):
            continue
        status = record.get("status") if record.get("status") in FLEET_STATUSES else OTHER
        labels = (_text(record.get("owner")), _text(record.get("provider")), status)
        counts[labels] = counts.get(labels, 0) + 1
    return counts


def backup_records(records):
    """{(provider key, kind, phase): records} from the ``backups`` records."""
    counts = {}
    for record in records.values():
        if not isinstance(record, dict):
            continue
        labels = (_text(record.get("provider")),
                  record.get("kind") if record.get("kind") in KINDS else OTHER,
                  record.get("phase") if record.get("phase") in PHASES else OTHER)
        counts[labels] = counts.get(labels, 0) + 1
    return counts


def unfinished_backups(records):
    """{(provider key, kind): epoch seconds} - when the oldest record not in a final phase was
    created, for each provider and kind that has one."""
    oldest = {}
    for record in records.values():
        if not isinstance(record, dict) or record.get("phase") in FINAL or \
                record.get("kind") not in KINDS:
            continue
        try:
            created = parse_time(record.get("created_at"), "created_at")
        except (InvalidSpec, ValueError, OverflowError):  # a damaged time: the record is not dated
            continue
        labels = (_text(record.get("provider")), record["kind"])
        oldest[labels] = min(created, oldest.get(labels, created))
    return oldest


def reserved_capacity(records):
    """{creator: (reservations, vCPUs, memory in MiB)} from the ``failover`` records."""
    held = {}
    for creator, record in records.items():
        reservations = record.get("reservations") if isinstance(record, dict) else None
        if not isinstance(reservations, list):
            continue
        resources = [r.get("resources") if isinstance(r, dict) and isinstance(r.get("resources"), dict)
                     else {} for r in reservations]
        held[creator] = (len(reservations), sum(_count(r.get("cpu")) for r in resources),
                         sum(_count(r.get("memory_mb")) for r in resources))
    return held
