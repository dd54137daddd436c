# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Failover reservations in the state store.

A creator's reservations are kept together in one record of namespace ``failover`` (key: the
creator), with the cycle counter that moves the ``max_vms_to_process`` window and the VM
definitions and hypervisor owners (provider of each hypervisor) seen at the last cycle, and the
target plan of the last cycle with the fingerprint of its inputs (stored_target: a cycle on an
unchanged fleet reuses it; one record replaced every cycle, as the reservations are): what an
evacuation recreates a VM from when its hypervisor, and so its provider, is gone; and what
providers hold natively for reservations, to release it later. One record per
creator makes a reconcile cycle a single atomic read-modify-write: two plays reconciling the
same creator at once are serialised by the store, and a play killed mid-way leaves the previous
cycle intact. Reservations of other creators are read only, to count the capacity they hold.
"""
from collections import namedtuple

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import Reservation
from ansible_collections.resilient.virt.plugins.module_utils.errors import VirtError

__all__ = ("NAMESPACE", "Stored", "ReservationBook", "capacity_request", "sync")


NAMESPACE = "failover"

Stored = namedtuple("Stored", "reservations cycle definitions owners held target", defaults=(None,))


def _reservations(record):
    return [Reservation.from_dict(item, "state_store reservation") for item in (record or {}).get("reservations", [])]


class ReservationBook:
    """The reservations of ``creator`` in ``store``."""

    def __init__(self, store, creator):
        self.store = store
        self.creator = creator

    def load(self):
        """What is stored: reservations, cycle counter, VM definitions by uuid, provider by hypervisor."""
        record = self.store.get(NAMESPACE, self.creator) or {}
        return Stored(
            _reservations(record), record.get("cycle", 0), record.get("definitions", {}),
            record.get("owners", {}), record.get("held", {}), record.get("target"),
        )

    def foreign(self):
        """Reservations held by every other creator (they occupy capacity too)."""
        found = []
        for creator, record in sorted(self.store.items(NAMESPACE).items()):
            if creator != self.creator:
                found.extend(_reservations(record))
        return found

    def reconcile(self, cycle_fn, definitions, owners, keeps_target=False):
        """Run ``cycle_fn(reservations, cycle, now) -> CycleResult`` and store its reservations;
        with ``keeps_target``, ``cycle_fn`` also gets the stored target (stored_target) as a
        fourth argument, and the result's ``target`` is stored in its place.

        Runs inside the store's atomic update, so it sees the latest stored reservations even
        when another process wrote since :meth:`load`. Returns (result, reservations before,
        what providers hold natively).
        """

        def apply(current, now):
            before = _reservations(current)
            cycle = (current or {}).get("cycle", 0)
            given = ((current or {}).get("target"),) if keeps_target else ()
            result = cycle_fn(before, cycle, now, *given)
            record = dict(
                reservations=[res.to_dict() for res in result.reservations],
                cycle=cycle + 1,
                definitions=definitions,
                owners=owners,
                held=(current or {}).get("held", {}),
            )
            if keeps_target and result.target is not None:
                record["target"] = result.target
            return record, (result, before, record["held"])

        return self.store.update(NAMESPACE, self.creator, apply)

    def save_held(self, held):
        """Record what providers hold natively, by reservation name (see native_capacity)."""

        def apply(current, now):
            return (dict(current, held=held) if current else None), None

        self.store.update(NAMESPACE, self.creator, apply)

    def remove(self):
        """Delete every reservation of the creator; returns (removed, held natively, owners)."""

        def apply(current, now):
            record = current or {}
            return None, (_reservations(record), record.get("held", {}), record.get("owners", {}))

        return self.store.update(NAMESPACE, self.creator, apply)


# -- Hold failover capacity natively where a backend can (the optional capacity hooks).
# The collection always tracks reservations in its state store. When a provider's backend also
# implements ``resilient_virt_hold_capacity``, a new reservation is held on the provider too, and
# released through ``resilient_virt_release_capacity`` when it is deleted. Backends without the hooks
# answer None and nothing more happens.

def capacity_request(reservation):
    """What the hooks receive for ``reservation`` (a model Reservation)."""
    return dict(
        name=reservation.name, hypervisor=reservation.host, az=reservation.az,
        vcpus=reservation.resources.get("cpu", 0), memory_mb=reservation.resources.get("memory_mb", 0),
    )


def sync(created, deleted, providers, owners, held):
    """Hold ``created`` and release ``deleted`` reservations through their hypervisor's provider.

    ``providers``: provider reference to opened provider; ``owners``: hypervisor to reference;
    ``held``: reservation name to what the hook returned, as stored. Returns the new ``held`` and
    a report with the names held and released and any errors (a failure leaves the reservation
    tracked by the collection only, and is reported rather than raised).
    """
    held = dict(held)
    report = dict(held=[], released=[], errors=[])
    for reservation, verb in [(res, "hold") for res in created] + [(res, "release") for res in deleted]:
        if verb == "release" and reservation.name not in held:
            continue
        provider = providers.get(owners.get(reservation.host, ""))
        if provider is None:
            continue
        request = capacity_request(reservation)
        try:
            if verb == "hold":
                answer = provider.hold_capacity(request)
                if answer is not None:
                    held[reservation.name] = answer
                    report["held"].append(reservation.name)
            elif provider.release_capacity(dict(request, held=held[reservation.name])) is not None:
                del held[reservation.name]
                report["released"].append(reservation.name)
        except VirtError as err:
            report["errors"].append(dict(reservation=reservation.name, action=verb, error=err.to_dict()))
    return held, report
