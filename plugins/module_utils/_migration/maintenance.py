# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which hypervisors are out of service: the marks the ``hypervisor`` task keeps in the state
store, and what they mean to the tasks that place VMs or reservations.

A mark is one record of its kind's namespace - ``maintenance`` (drained) or ``fenced`` (proven
off) - keyed by the provider's key and the hypervisor's name. ``whole_provider`` says that the
provider is that one host (libvirt), so anything created on the provider would land on it. Both
kinds mean the same to the tasks that place: :func:`read_marks` gives them together, and a
hypervisor dict of a marked hypervisor reads ``state: maintenance`` (:func:`with_marks`), which
the prechecks of a move already refuse.
"""
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, StoreUnavailable)

__all__ = ("NAMESPACE", "FENCED", "MAINTENANCE", "read_marks", "mark", "unmark", "is_marked",
           "fenced_mark", "with_marks", "placement_refusal", "refuse_placement")

NAMESPACE = "maintenance"  # the namespace of maintenance marks
FENCED = "fenced"  # the namespace of fenced marks
KINDS = (NAMESPACE, FENCED)
MAINTENANCE = "maintenance"  # the state of a hypervisor dict in maintenance


def _key(provider_key, hypervisor):
    return "%s/%s" % (provider_key, hypervisor)


def read_marks(store):
    """Every mark of the store, of both kinds, by ``<kind>/<key>``; each record says its
    ``kind``."""
    return dict(("%s/%s" % (kind, key), dict(record, kind=kind))
                for kind in KINDS for key, record in store.items(kind).items())


def mark(store, provider_key, hypervisor, whole_provider, kind=NAMESPACE, details=None):
    """Mark ``hypervisor`` of ``provider_key`` in maintenance (or ``kind``), with ``details``
    added to the record; True when it was not."""

    def change(current, now):
        if current is not None:
            return current, False
        return dict(details or {}, provider_key=provider_key, hypervisor=hypervisor,
                    whole_provider=whole_provider, since=format_time(now)), True

    return store.update(kind, _key(provider_key, hypervisor), change)


def unmark(store, provider_key, hypervisor):
    """End the maintenance and the fenced mark of ``hypervisor`` of ``provider_key``; True when
    it had either."""
    ended = [store.update(kind, _key(provider_key, hypervisor),
                          lambda current, now: (None, current is not None)) for kind in KINDS]
    return any(ended)


def is_marked(marks, provider_key, hypervisor):
    return any("%s/%s" % (kind, _key(provider_key, hypervisor)) in marks for kind in KINDS)


def fenced_mark(marks, provider_key, hypervisor):
    """The fenced mark of ``hypervisor`` of ``provider_key`` in ``marks``, or None."""
    return marks.get("%s/%s" % (FENCED, _key(provider_key, hypervisor)))


def with_marks(hypervisors, provider_key, marks):
    """The hypervisor dicts of ``provider_key``, those marked with ``state: maintenance``."""
    return [dict(hv, state=MAINTENANCE) if is_marked(marks, provider_key, hv["name"]) else hv
            for hv in hypervisors]


def placement_refusal(marks, provider_key, host=None):
    """The Conflict of placing a VM on ``provider_key`` (on its host ``host`` when the provider
    has several) while that hypervisor is in maintenance, or None."""
    for record in marks.values():
        if record.get("provider_key") != provider_key:
            continue
        if record.get("whole_provider") or record.get("hypervisor") == host:
            return Conflict(
                "hypervisor %s of %s is %s (since %s): nothing is placed on it; "
                "choose another %s, or end the %s with resilient.virt.hypervisor "
                "state=active" % (record["hypervisor"], provider_key,
                                  "fenced" if record.get("kind") == FENCED else "in maintenance",
                                  record.get("since"),
                                  "provider" if record.get("whole_provider") else "host",
                                  "fenced mark (after repair)" if record.get("kind") == FENCED
                                  else "maintenance"),
                details={"hypervisor": record["hypervisor"], "provider": provider_key})
    return None


def refuse_placement(open_store, provider_key, spec, warnings):
    """Raise the Conflict of creating a VM of ``spec`` on ``provider_key`` (on its
    ``placement.host`` when given) while that hypervisor is in maintenance. A state store that
    cannot be read is named in ``warnings``, and the create goes on."""
    host = (spec.get("placement") or {}).get("host")
    try:
        marks = read_marks(open_store())
    except StoreUnavailable as err:
        warnings.append("the hypervisors in maintenance are not known (%s): %s is not checked "
                        "for one" % (err.message, provider_key))
        return
    refusal = placement_refusal(marks, provider_key, host)
    if refusal is not None:
        raise refusal
