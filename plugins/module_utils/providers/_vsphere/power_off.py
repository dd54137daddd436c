# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who asked for a vSphere VM's power-off, judged from vCenter's events and tasks about it.

vCenter posts a ``VmPoweredOffEvent`` for every power-off. One that somebody asked for has a
task or a user to it: it is in a task's chain (its ``chainId`` is a ``TaskEvent``'s key), a
``ShutdownGuest`` or ``StandbyGuest`` asked through vCenter came before it
(``VmGuestShutdownEvent``, ``VmGuestStandbyEvent``), a task on the VM or its host ran when it
was posted (vCenter's clock stamps both), or it was posted for a user (``userName``); vSphere
HA's isolation response posts its own kinds. A power-off with none of these is the guest's own
or a crash: unasked.

:func:`judge_power_off` takes them as plain dicts (``events.py`` reads them through the API):
an event ``{"key", "chain", "kind" (its class name), "user", "time"}``, a task ``{"key",
"entity" (moid), "description" (its ``descriptionId``), "queued", "completed" (None while it
runs)}``.
"""
__all__ = ("judge_power_off",)

_ON = ("VmStartingEvent", "VmPoweredOnEvent")
_OFF = ("VmPoweredOffEvent", "VmPowerOffOnIsolationEvent", "VmShutdownOnIsolationEvent")
_HA_OFF = ("VmPowerOffOnIsolationEvent", "VmShutdownOnIsolationEvent")
_GUEST_ASKED = ("VmGuestShutdownEvent", "VmGuestStandbyEvent")


def judge_power_off(events, tasks, entities):
    """``(unasked, why)`` for the VM's last power-off in ``events`` (the VM's), with ``tasks``
    and ``entities`` (the moids of the VM and its host, whose tasks count); None when vCenter
    has posted no power-off since the VM last powered on."""
    ordered = sorted(events, key=lambda item: item["key"])
    since_on = []
    for item in ordered:
        if item["kind"] in _ON:
            since_on = []
        else:
            since_on.append(item)
    offs = [item for item in since_on if item["kind"] in _OFF]
    if not offs:
        return None
    off = offs[-1]
    name = "%s %s" % (off["kind"], off["key"])
    if off["kind"] in _HA_OFF:
        return False, "%s: vSphere HA's isolation response" % name
    chained = [item for item in ordered if item["chain"] == off["chain"] and item["kind"] == "TaskEvent"]
    if off["chain"] != off["key"] or chained:
        return False, "%s belongs to the task chain %s" % (name, off["chain"])
    for item in since_on:
        if item["kind"] in _GUEST_ASKED and item["key"] < off["key"]:
            return False, "%s follows %s %s, asked by %s" % (name, item["kind"], item["key"],
                                                             item["user"] or "vCenter")
    for task in tasks:
        if task["entity"] in entities and task["queued"] <= off["time"] and (
                task["completed"] is None or task["completed"] >= off["time"]):
            return False, "%s happened during the task %s (%s)" % (name, task["key"],
                                                                   task["description"])
    if off["user"]:
        return False, "%s was posted for the user %s" % (name, off["user"])
    return True, "%s of no task and no user" % name
