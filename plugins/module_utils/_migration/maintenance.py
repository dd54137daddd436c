# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which hypervisors are in maintenance: the marks the ``hypervisor`` task keeps in the state
store, and what they mean to the tasks that place VMs or reservations.

A mark is one record of namespace ``maintenance``, keyed by the provider's key and the
hypervisor's name. ``whole_provider`` says that the provider is that one host (libvirt), so
anything created on the provider would land on it. A hypervisor dict of a marked hypervisor
reads ``state: maintenance`` (:func:`with_marks`), which the prechecks of a move already refuse.
"""
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, StoreUnavailable)

__all__ = ("NAMESPACE", "MAINTENANCE", "read_marks", "mark", "unmark", "is_marked",
           "with_marks", "placement_refusal", "refuse_placement")

NAMESPACE = "maintenance"
MAINTENANCE = "maintenance"  # the state of a hypervisor dict in maintenance


def _key(provider_key, hypervisor):
    return "%s/%s" % (provider_key, hypervisor)


def read_marks(store):
    """Every mark of the store, by key."""
    return store.items(NAMESPACE)


def mark(store, provider_key, hypervisor, whole_provider):
    """Mark ``hypervisor`` of ``provider_key`` in maintenance; True when it was not."""

    def change(current, now):
        if current is not None:
            return current, False
        return {"provider_key": provider_key, "hypervisor": hypervisor,
                "whole_provider": whole_provider, "since": format_time(now)}, True

    return store.update(NAMESPACE, _key(provider_key, hypervisor), change)


def unmark(store, provider_key, hypervisor):
    """End the maintenance of ``hypervisor`` of ``provider_key``; True when it was marked."""
    return store.update(NAMESPACE, _key(provider_key, hypervisor),
                        lambda current, now: (None, current is not None))


def is_marked(marks, provider_key, hypervisor):
    return _key(provider_key, hypervisor) in marks


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
                "hypervisor %s of %s is in maintenance (since %s): nothing is placed on it; "
                "choose another %s, or end the maintenance with resilient.virt.hypervisor "
                "state=active" % (record["hypervisor"], provider_key, record.get("since"),
                                  "provider" if record.get("whole_provider") else "host"),
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
