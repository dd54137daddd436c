# -*- coding: utf-8 -*-
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hold failover capacity natively where a backend can (the optional capacity hooks).

The collection always tracks reservations in its state store. When a provider's backend also
implements ``resilient_virt_hold_capacity``, a new reservation is held on the provider too, and
released through ``resilient_virt_release_capacity`` when it is deleted. Backends without the hooks
answer None and nothing more happens.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import VirtError


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
