# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a libvirt host sees the disk files of a VM that ran on another host (``locate_disks``):
each path looked up as a volume of one of its storage pools, the pools read again first (a file
another host made since), and the sharing of each such pool proved, when a witness (a third
host) answers, by a marker volume made through this host and found through the witness
(``shared_storage.py``). The evacuation of a fenced hypervisor uses it to start a VM elsewhere on
its own disks, never a copy."""
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    error_code, is_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.shared_storage import (
    shared_pools)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import refresh_pool, volume_at

__all__ = ("locate_disks",)


def locate_disks(provider, paths, witnesses=()):
    """``{path: None (no volume at that path here) or {"pool", "shared", "witness",
    "witness_error"}}``. ``shared`` is True when a marker made here in the pool was found, at
    the same path, through ``witness`` (a libvirt provider); False when the witness has a pool
    of that name that does not show it (a pool of this host alone); None when no witness could
    tell (none given, none answered, or none has a pool of that name)."""
    conn = provider.session().connection
    for pool in conn.listAllStoragePools(0):
        if pool.isActive():
            refresh_pool(pool)
    found = {}
    for path in paths:
        vol = volume_at(conn, path)
        found[path] = None if vol is None else {
            "pool": vol.storagePoolLookupByVolume().name(), "shared": None, "witness": None,
            "witness_error": None}
    pools = set(entry["pool"] for entry in found.values() if entry)
    errors = []
    for witness in witnesses if pools else ():
        try:
            other = witness.session().connection
            held = set(name for name in pools if _has_pool(other, name))
            shared = shared_pools(conn, other, held)
        except Exception as exc:
            if error_code(exc) is None:
                raise
            errors.append("%s did not answer (%s)" % (witness.key, witness.scrub(exc.get_error_message() or str(exc))))
            continue
        for entry in found.values():
            if entry and entry["pool"] in held:
                entry.update(shared=entry["pool"] in shared, witness=witness.key)
        break
    for entry in found.values():
        if entry and entry["witness"] is None and errors:
            entry["witness_error"] = "; ".join(errors)
    return found


def _has_pool(conn, name):
    try:
        conn.storagePoolLookupByName(name)
    except Exception as exc:
        if is_error(exc, "NO_STORAGE_POOL"):
            return False
        raise
    return True
