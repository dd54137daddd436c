"""Changing an existing Proxmox VE VM (``reconfigure``): vCPUs, memory, metadata, tags and
autostart, in one configuration change (``PUT .../config`` with the configuration's digest, so
that a change made meanwhile by someone else is refused rather than overwritten).

PVE applies what a running VM takes at once and keeps the rest pending until the next start:
the VM dict then shows ``restart_required`` (its values are those of the configuration, so a
second run with the same values changes nothing).
"""
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    merged_metadata)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.vm_dict import (
    join_tags, with_metadata)

__all__ = ("reconfigure",)


def reconfigure(provider, name, vcpus=None, memory_mb=None, metadata=None, tags=None,
                autostart=None):
    """Set the given fields; the VM dict afterwards."""
    session = provider.session()
    record = session.find_vm(name)
    node, vmid = record["node"], record["vmid"]
    config = session.get("nodes", node, "qemu", vmid, "config")
    params = {}
    if vcpus is not None:
        params.update(cores=vcpus, sockets=1)
    if memory_mb is not None:
        params["memory"] = memory_mb
    if tags:
        params["tags"] = join_tags(tags)
    elif tags is not None:
        params["delete"] = "tags"
    if autostart is not None:
        params["onboot"] = 1 if autostart else 0
    if metadata is not None:
        current = session.describe(record, name, guest=False)["metadata"]
        params["description"] = with_metadata(config.get("description"),
                                              merged_metadata(current, metadata))
    if params:
        session.put("nodes", node, "qemu", vmid, "config", digest=config.get("digest"), **params)
    return session.describe(session.find_vm(name), name)
