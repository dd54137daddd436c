# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backup and restore records in the state store (namespace :data:`NAMESPACE`, key: the name).

A record holds ``name``, ``kind`` (``backup`` or ``restore``), ``vm`` and ``provider`` (its key)
with ``provider_name`` (the name it was given by), ``phase`` (see ``phases.py``), ``reason`` (why
it failed, e.g. ``OwnerLost``), ``incremental`` and ``parent`` (the backup it builds on), for a
restore ``backup`` and ``target``, ``created_at``, ``started_at``, ``completed_at`` and
``updated_at`` (RFC 3339 UTC), ``progress`` (0-100 or None), ``errors`` and ``warnings``,
``artifact`` (the stored backup as the provider describes it - where it lives, its size; see
``hookspecs.py``), ``handle`` (the provider operation, written before anything waits on it),
``owner`` and ``lease_until`` (who works on it and until when), and ``version``, raised by
every write.

Every change goes through :func:`change`, an update function for ``StateStore.update``: it
refuses a write by anyone but the owner while the lease runs, an illegal phase move (Conflict
naming both phases), and a stale ``version``; re-applying the phase a record is already in is a
no-op.
"""
import os
import re
import socket
import uuid

from ansible_collections.resilient.virt.plugins.module_utils._backup.phases import (
    FINAL, IN_PROGRESS, NEW, check_transition)
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time, parse_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, field_error)

__all__ = ("NAMESPACE", "KINDS", "owner_id", "check_name", "new_name", "new_record", "change",
           "give_back", "lease_expired", "matches")

NAMESPACE = "backups"
KINDS = ("backup", "restore")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def owner_id():
    """Who runs this task: host, process and a random part (a new one per task)."""
    return "%s/%d/%s" % (socket.gethostname(), os.getpid(), uuid.uuid4().hex[:8])


def check_name(name, field="name"):
    if not isinstance(name, str) or not _NAME.match(name):
        raise field_error(field, "%r: a record name is 1 to 128 letters, digits, '_', '.' or '-', "
                                 "starting with a letter or digit" % (name,))
    return name


def new_name(kind, vm, now):
    """``<vm>-<kind>-<UTC time>-<8 hex>``, with characters a name cannot hold replaced (8 random
    hex digits: two names of one VM and second collide about once in 4 billion pairs)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", vm).lstrip("._-")[:80] or "vm"
    return "%s-%s-%s-%s" % (stem, kind, format_time(now).replace("-", "").replace(":", "")
                            .rstrip("Z").lower(), uuid.uuid4().hex[:8])


def new_record(name, kind, vm, provider_key, provider_name, owner, lease, now, **fields):
    """A record in phase New, owned by ``owner`` for ``lease`` seconds from epoch ``now``."""
    record = {
        "name": name, "kind": kind, "vm": vm, "provider": provider_key,
        "provider_name": provider_name, "phase": NEW, "reason": None, "incremental": False,
        "parent": None, "backup": None, "target": None, "created_at": format_time(now),
        "started_at": None, "completed_at": None, "updated_at": format_time(now),
        "progress": None, "errors": [], "warnings": [], "artifact": None, "handle": None,
        "owner": owner, "lease_until": format_time(now + lease), "version": 1,
    }
    record.update(fields)
    return record


def lease_expired(record, now):
    """True when nobody holds ``record``: its lease ran out before epoch ``now``."""
    until = record.get("lease_until")
    return until is None or parse_time(until, "lease_until") <= now


def change(name, owner, phase=None, lease=None, version=None, override=False, create=None,
           **fields):
    """An update function (``StateStore.update``) that applies ``phase`` and ``fields``.

    ``owner`` must hold the record's lease, or the lease has expired (a takeover; ``override``:
    an operator's change, allowed whoever holds it); ``lease`` (seconds) renews it
    (None releases it at a final phase, keeps it otherwise); ``version``, when given, must be
    the record's; ``create`` is the record to write when there is none (otherwise NotFound).
    Returns ``(record, changed)``.
    """
    what = "backup record %s" % name

    def update(current, now):
        if current is None:
            if create is None:
                raise NotFound("%s does not exist in the state store" % what)
            return create, (create, True)
        held = current.get("owner") and current.get("owner") != owner and \
            not lease_expired(current, now)
        same_phase = phase is None or current["phase"] == phase
        if current.get("owner") == owner and same_phase and all(
                current.get(k) == v for k, v in fields.items()) and lease is None:
            return current, (current, False)  # this very write happened already
        if held and not override:
            raise Conflict("%s is held by %s until %s; wait for it (resilient.virt.backup_status "
                           "with wait), or for its lease to expire" % (
                               what, current["owner"], current["lease_until"]))
        if version is not None and current.get("version") != version:
            raise Conflict("%s changed meanwhile (version %s, expected %s): another owner wrote it"
                           % (what, current.get("version"), version))
        moved = phase is not None and check_transition(current["phase"], phase, what)
        if phase is not None and not moved and not fields and lease is None:
            return current, (current, False)
        new = dict(current)
        new.update(fields)
        new["owner"] = owner
        if moved:
            new["phase"] = phase
            if phase == IN_PROGRESS and not new.get("started_at"):
                new["started_at"] = format_time(now)
            if phase in FINAL:
                new["completed_at"] = new.get("completed_at") or format_time(now)
        if new["phase"] in FINAL:
            new["lease_until"] = None
        elif lease is not None:
            new["lease_until"] = format_time(now + lease)
        new["updated_at"] = format_time(now)
        new["version"] = int(current.get("version") or 0) + 1
        return new, (new, True)

    return update


def give_back(name, owner, previous):
    """An update function (``StateStore.update``) by which ``owner``, who took ``name`` over
    from ``previous`` (the record as it was read before the takeover), gives it back: the owner
    and ``lease_until`` it had (a lease that has run out, so that the next run may take it over
    at once), the phase, handle, progress, errors and the rest as they are now. A record that
    ``owner`` no longer holds, or that reached a final phase, is left as it is. Returns
    ``(record, changed)``."""
    what = "backup record %s" % name

    def update(current, now):
        if current is None:
            raise NotFound("%s does not exist in the state store" % what)
        if current.get("owner") != owner or current["phase"] in FINAL:
            return current, (current, False)
        new = dict(current, owner=previous.get("owner"), lease_until=previous.get("lease_until"))
        if not lease_expired(new, now):
            new["lease_until"] = format_time(now)
        new["updated_at"] = format_time(now)
        new["version"] = int(current.get("version") or 0) + 1
        return new, (new, True)

    return update


def matches(record, vm=None, provider=None, kind=None, phase=None):
    """True when ``record`` passes the filters given (None: any)."""
    return all(want is None or record.get(field) == want or (
        isinstance(want, (list, tuple)) and record.get(field) in want)
        for field, want in (("vm", vm), ("provider", provider), ("kind", kind), ("phase", phase)))
