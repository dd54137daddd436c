# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The events the ``hypervisor_events`` source puts on its queue, one dict each.

Every event has ``type``, ``provider`` (the name of its entry of ``providers``), ``provider_key``
(``<type>:<name>``), ``hypervisor`` (a libvirt provider is one hypervisor: its name; a vSphere
provider's hypervisors are its hosts: the host's name in vCenter) and
``source`` (the instance that announced it). By type:

* ``hypervisor_unreachable``: ``since`` (RFC 3339 UTC: when it was first seen failing),
  ``observed`` (how: the connection closed and why, then what a new connection answered; for a
  vSphere host, the connection and power state vCenter reports) and
  ``repeated`` (true when a new lease holder announces again an outage announced before);
* ``hypervisor_reachable``: ``since`` (when it answered again), ``unreachable_since`` and
  ``outage_seconds`` (None when the outage began before anything was announced);
* ``vm_crashed`` (QEMU died, or the guest crashed) and ``vm_stopped`` (the guest shut itself
  down; a vSphere VM powered off with no task and no user, ``reason`` ``powered off``), for a
  VM that stopped without being asked: ``vm``, ``uuid``, ``reason`` (libvirt's), ``at`` and
  ``observed`` (``lifecycle event``, or ``state on connect`` when the stop happened while
  nobody watched; for vSphere, how vCenter's records were judged).
"""
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time

__all__ = ("unreachable", "reachable", "vm_stopped")


def _base(kind, provider, source):
    return {"type": kind, "provider": provider["name"], "provider_key": provider["key"],
            "hypervisor": provider.get("hypervisor", provider["name"]), "source": source}


def unreachable(provider, source, since, observed, repeated=False):
    event = _base("hypervisor_unreachable", provider, source)
    event.update(since=format_time(since), observed=observed, repeated=repeated)
    return event


def reachable(provider, source, since, unreachable_since):
    event = _base("hypervisor_reachable", provider, source)
    outage = None if unreachable_since is None else round(max(0.0, since - unreachable_since), 3)
    event.update(since=format_time(since), outage_seconds=outage,
                 unreachable_since=None if unreachable_since is None
                 else format_time(unreachable_since))
    return event


def vm_stopped(provider, source, vm):
    """``vm``: the VM observation (``uuid``, ``name``, ``reason``, ``at``, ``observed``)."""
    crashed = vm["reason"] in ("crashed", "failed", "daemon")
    event = _base("vm_crashed" if crashed else "vm_stopped", provider, source)
    event.update(vm=vm["name"], uuid=vm["uuid"], reason=vm["reason"], at=format_time(vm["at"]),
                 observed=vm["observed"])
    return event
