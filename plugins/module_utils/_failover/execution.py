# -*- coding: utf-8 -*-
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Carry out an evacuation plan through the providers.

A move within one provider that can migrate (vSphere) relocates the VM to the reservation's host.
A move to another provider (libvirt: one provider per hypervisor) defines the VM on the target
from the definition recorded at the last reconcile cycle and starts it; that needs every disk to
be shared storage (a path the target reaches) or no disk at all. A move that is already done (the
VM runs on the target) is left alone, so running the evacuation again changes nothing.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound, NotSupported, VirtError

SPEC_KEYS = ("vcpus", "memory_mb", "interfaces", "boot", "metadata", "tags")
DISK_KEYS = ("path", "bus", "format", "device")


def recreate_spec(definition):
    """The spec that defines ``definition`` (a VM dict) again elsewhere; NotSupported for local disks."""
    local = [disk.get("path") for disk in definition.get("disks") or () if disk.get("size_gb") or not disk.get("path")]
    if local:
        raise NotSupported(
            "%s has disks on its failed hypervisor's local storage (%s); only VMs on shared storage "
            "or without disks can be started elsewhere" % (definition["name"], ", ".join(str(path) for path in local))
        )
    spec = dict((key, definition[key]) for key in SPEC_KEYS if definition.get(key) not in (None, [], {}))
    spec["name"] = definition["name"]
    disks = [dict((key, disk[key]) for key in DISK_KEYS if disk.get(key)) for disk in definition.get("disks") or ()]
    if disks:
        spec["disks"] = disks
    return spec


def _running_on(provider, name, host):
    try:
        vm = provider.describe(name)
    except NotFound:
        return None
    return vm if vm.get("hypervisor") == host and vm.get("state") == "running" else False


def execute_move(move, definition, source, target, check_mode):
    """Carry out one move; returns its outcome dict (action and, on failure, error)."""
    name, host = definition["name"], move["to_host"]
    outcome = dict(move, name=name)
    try:
        same_provider = source is not None and source.key == target.key
        if same_provider and "migrate" in target.capabilities:
            done = _running_on(target, name, host)
            outcome["action"] = "none" if done else "migrate"
            if not done and not check_mode:
                target.migrate(name, host)
                if target.describe(name).get("state") != "running":
                    target.power(name, "on")
            return outcome
        spec = recreate_spec(definition)
        done = _running_on(target, name, host)
        outcome["action"] = "none" if done else "recreate"
        if done is None and not check_mode:
            target.create(spec)
        if not done and not check_mode:
            target.power(name, "on")
    except VirtError as err:
        outcome.update(action="failed", error=err.to_dict())
    return outcome
