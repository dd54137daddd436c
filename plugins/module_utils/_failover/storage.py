# -*- coding: utf-8 -*-
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Failover reservations in the state store.

A creator's reservations are kept together in one record of namespace ``failover`` (key: the
creator), with the cycle counter that moves the ``max_vms_to_process`` window and the VM
definitions and hypervisor owners (provider of each hypervisor) seen at the last cycle: what an
evacuation recreates a VM from when its hypervisor, and so its provider, is gone; and what
providers hold natively for reservations, to release it later. One record per
creator makes a reconcile cycle a single atomic read-modify-write: two plays reconciling the
same creator at once are serialised by the store, and a play killed mid-way leaves the previous
cycle intact. Reservations of other creators are read only, to count the capacity they hold.
"""
from collections import namedtuple

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import Reservation

NAMESPACE = "failover"

Stored = namedtuple("Stored", "reservations cycle definitions owners held")


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
            _reservations(record), record.get("cycle", 0), record.get("definitions", {}), record.get("owners", {}), record.get("held", {})
        )

    def foreign(self):
        """Reservations held by every other creator (they occupy capacity too)."""
        found = []
        for creator, record in sorted(self.store.items(NAMESPACE).items()):
            if creator != self.creator:
                found.extend(_reservations(record))
        return found

    def reconcile(self, cycle_fn, definitions, owners):
        """Run ``cycle_fn(reservations, cycle, now) -> CycleResult`` and store its reservations.

        Runs inside the store's atomic update, so it sees the latest stored reservations even
        when another process wrote since :meth:`load`. Returns (result, reservations before,
        what providers hold natively).
        """

        def apply(current, now):
            before = _reservations(current)
            cycle = (current or {}).get("cycle", 0)
            result = cycle_fn(before, cycle, now)
            record = dict(
                reservations=[res.to_dict() for res in result.reservations],
                cycle=cycle + 1,
                definitions=definitions,
                owners=owners,
                held=(current or {}).get("held", {}),
            )
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
