# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which storage pools two libvirt hosts share (NFS, a cluster filesystem): proved by a marker
volume made through one host and found, at the same path, through the other; never assumed from
a pool's name or type. A disk in such a pool moves with its VM without being copied, and is not
deleted from the host the VM left."""
import uuid

from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import is_error
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import (
    find_volume, refresh_pool, volume_xml)

__all__ = ("shared_pools", "MARKER_PREFIX")

MARKER_PREFIX = ".resilient-virt-shared-"


def shared_pools(source_conn, dest_conn, names):
    """The names, among the pool names ``names``, of the pools that are one storage seen by
    both connections' hosts."""
    shared = set()
    for name in sorted(set(names)):
        try:
            dest_pool = dest_conn.storagePoolLookupByName(name)
        except Exception as exc:
            if is_error(exc, "NO_STORAGE_POOL"):
                continue
            raise
        marker = source_conn.storagePoolLookupByName(name).createXML(
            volume_xml(MARKER_PREFIX + uuid.uuid4().hex, 0, "raw"), 0)
        try:
            refresh_pool(dest_pool)
            seen = find_volume(dest_pool, marker.name())
            if seen is not None and seen.path() == marker.path():
                shared.add(name)
        finally:
            marker.delete(0)
            if name in shared:
                refresh_pool(dest_pool)  # so that the target does not list the marker any more
    return shared
