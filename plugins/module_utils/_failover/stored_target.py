# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The target plan kept in the state store from one cycle to the next, with a fingerprint of
what it was built from: a cycle on a fleet that has not changed reuses it instead of building
it again (docs/failover.md, "The target kept between cycles").

The target is a function of the fleet (hypervisors, VMs, the VMs hypervisors report running),
the settings and, through where its plain greedy stops, of the figures it was told to stop at
(``stop``: the best packing's, raised to the plan's of the cycle that built it). A stored
target is reused only when the fingerprint matches and the greedy would stop where it stopped:
at the same figures, or, when it ran to the end, at figures nowhere below them (it then runs to
the end again).
"""
import hashlib
import json
from dataclasses import asdict

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import Reservation

__all__ = ("fingerprint", "record", "reuse", "stop_at")

KEYS = ("name", "host", "az", "resources", "allocations")
"""What the cycle reads of a target reservation: the rest is not stored."""


def fingerprint(hypervisors, vms, settings, running):
    """A SHA-256 hex digest of everything the target is built from."""
    fleet = dict(
        hypervisors=sorted((hv.to_dict() for hv in hypervisors), key=lambda hv: hv["name"]),
        vms=sorted((vm.to_dict() for vm in vms), key=lambda vm: vm["uuid"]),
        running=running or {}, settings=asdict(settings))
    text = json.dumps(fleet, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stop_at(packed, current):
    """Where the target's plain greedy stops: ``packed`` ({zone: figures} of the best packing)
    raised to ``current`` (the plan's) in every zone and figure."""
    stop = {zone: list(figures) for zone, figures in packed.items()}
    for zone, figures in (current or {}).items():
        stop[zone] = [max(pair) for pair in zip(stop.get(zone, (0, 0, 0)), figures)]
    return stop


def record(key, packed, stop, finished, target):
    """What the state store keeps of ``target`` (a reconcile.Target) built with ``key``
    (:func:`fingerprint`), ``packed`` and ``stop`` (:func:`stop_at`; None when the greedy did
    not run); ``finished``: whether it ran to the end."""
    return dict(fingerprint=key, packed=packed, stop=stop, finished=finished,
                reservations=[{k: res.to_dict()[k] for k in KEYS} for res in target.reservations],
                missing=target.missing, greedy=target.greedy)


def reuse(stored, key, current):
    """(reservations, missing, greedy) of the ``stored`` record when it holds the target of a
    fleet of fingerprint ``key`` whose plan now holds ``current`` ({zone: figures}); None when
    the target has to be built."""
    if not isinstance(stored, dict) or stored.get("fingerprint") != key:
        return None
    was = stored["stop"]  # None: the greedy did not run, nothing depends on ``current``
    stop = None if was is None else stop_at(stored["packed"], current)
    if stop != was and not (stored["finished"] and all(
            a >= b for zone, held in was.items() for a, b in zip(stop.get(zone, (0, 0, 0)), held))):
        return None
    reservations = [Reservation.from_dict(item, "state_store target") for item in
                    stored["reservations"]]
    return reservations, dict(stored["missing"]), {zone: list(figures) for zone, figures
                                                   in stored["greedy"].items()}
