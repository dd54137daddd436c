"""Storage volumes and directory pools of a libvirt host, reached through libvirt only (so a
remote host works like a local one): volume XML, lookups that answer None for a missing volume,
deleting volumes that may still be copied into, and reading or writing a volume's bytes through
a libvirt stream. Backups, restores and new VMs' seeds share these.
"""
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, Internal, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    is_error)

__all__ = ("volume_xml", "backing_path", "directory_pool", "refresh_pool", "find_volume",
           "volume_at", "being_copied", "drop_volume", "forget_volumes", "download", "upload")

_CHUNK = 256 * 1024
_POOL_TYPES = ("dir", "fs", "netfs")
_POOL_HELP = {"backup_pool": "/var/lib/libvirt/backups", "storage_pool": "/var/lib/libvirt/images"}
REFRESH_WAIT = 60.0  # seconds a pool refresh waits for the volume builds of other calls to end


def volume_xml(name, capacity, fmt="qcow2", backing=None, backing_format="qcow2", unit="bytes",
               allocation=0):
    """The XML of a new volume ``name`` of ``capacity`` (in ``unit``: bytes, GiB) in format
    ``fmt``, on the image ``backing`` (in ``backing_format``) when given. qcow2 is made v3
    (compat 1.1, libvirt makes v2 otherwise), which running backups with checkpoints need.
    ``allocation`` is in bytes; None leaves it out, and libvirt then allocates the whole
    capacity."""
    root = ET.Element("volume")
    ET.SubElement(root, "name").text = name
    ET.SubElement(root, "capacity", unit=unit).text = str(int(capacity))
    if allocation is not None:
        ET.SubElement(root, "allocation", unit="bytes").text = str(int(allocation))
    target = ET.SubElement(root, "target")
    ET.SubElement(target, "format", type=fmt)
    if fmt == "qcow2":
        ET.SubElement(target, "compat").text = "1.1"  # v3: bitmaps, zero clusters
    if backing:
        store = ET.SubElement(root, "backingStore")
        ET.SubElement(store, "path").text = backing
        ET.SubElement(store, "format", type=backing_format)
    return ET.tostring(root, encoding="unicode")


def backing_path(vol):
    """Path of the backing image of volume ``vol``, or None."""
    path = ET.fromstring(vol.XMLDesc(0)).findtext("backingStore/path")
    return path or None


def directory_pool(provider, conn, option, name=None):
    """The active directory pool of ``provider.<option>`` (or ``name``), with the fix when not."""
    name = name or provider.config[option]
    field = "provider." + option
    create = ("virsh pool-define-as %s dir --target %s && virsh pool-build %s && virsh "
              "pool-start %s && virsh pool-autostart %s"
              % (name, _POOL_HELP[option], name, name, name))
    try:
        pool = conn.storagePoolLookupByName(name)
    except Exception as exc:
        if not is_error(exc, "NO_STORAGE_POOL"):
            raise
        raise field_error(field, "storage pool %r does not exist on %s; create it (%s) or set %s "
                                 "to an existing directory pool" % (name, provider.key, create,
                                                                    field), cause=exc) from exc
    if not pool.isActive():
        raise Conflict("storage pool %r (%s) on %s is not active; start it (virsh pool-start %s "
                       "&& virsh pool-autostart %s)" % (name, field, provider.key, name, name))
    kind = ET.fromstring(pool.XMLDesc(0)).get("type")
    if kind not in _POOL_TYPES:
        raise field_error(field, "storage pool %r on %s is a %s pool; backups need a directory "
                                 "pool (%s)" % (name, provider.key, kind, create))
    return pool


def _pool_busy(exc):
    """True for libvirt's refusal to refresh a pool while a volume of it is being built."""
    return is_error(exc, "INTERNAL_ERROR") and "asynchronous jobs running" in str(exc)


def refresh_pool(pool):
    """Have libvirt read ``pool``'s directory again, so that it lists files made there since. A
    pool in which another call builds a volume refuses to refresh (parallel moves to one host
    do that): the refresh is tried again until the builds end, for up to :data:`REFRESH_WAIT`."""
    import tenacity  # imported when a refresh runs, as the core's retries do

    retrying = tenacity.Retrying(retry=tenacity.retry_if_exception(_pool_busy),
                                 stop=tenacity.stop_after_delay(REFRESH_WAIT),
                                 wait=tenacity.wait_fixed(0.2), reraise=True)
    retrying(pool.refresh, 0)


def _volume_or_none(lookup, argument):
    try:
        return lookup(argument)
    except Exception as exc:
        if is_error(exc, "NO_STORAGE_VOL"):
            return None
        raise


def find_volume(pool, name):
    """The volume ``name`` of ``pool``, or None."""
    return _volume_or_none(pool.storageVolLookupByName, name)


def volume_at(conn, path):
    """The volume at ``path`` in any storage pool, or None."""
    return _volume_or_none(conn.storageVolLookupByPath, path)


def being_copied(conn, vol):
    """True while libvirt still writes ``vol`` (a copy in progress): it refuses to read it."""
    stream = conn.newStream(0)
    try:
        vol.download(stream, 0, 1, 0)
    except Exception as exc:
        if is_error(exc, "OPERATION_INVALID"):
            return True
        raise
    try:
        stream.abort()
    except Exception:  # noqa: BLE001 - the probe's stream is dropped either way
        pass
    return False


def drop_volume(conn, vol, what):
    """Delete ``vol`` (gone already is fine); Conflict while libvirt still copies into it."""
    try:
        vol.delete(0)
    except Exception as exc:
        if is_error(exc, "NO_STORAGE_VOL"):
            return
        if is_error(exc, "OPERATION_INVALID") and being_copied(conn, vol):
            raise Conflict("%s is still being copied by libvirt, which cannot stop a copy; try "
                           "again once it ends" % what, cause=exc) from exc
        raise


def forget_volumes(volumes):
    """Delete volumes an operation made before it failed (best effort: its error is reported)."""
    for vol in volumes:
        try:
            vol.delete(0)
        except Exception:  # noqa: BLE001 - the operation's own error is the one to report
            pass


def download(conn, vol, limit):
    """The bytes of volume ``vol``, read through a libvirt stream; None when it holds more than
    ``limit``."""
    size = vol.info()[1]
    if size > limit:
        return None
    stream = conn.newStream(0)
    vol.download(stream, 0, size, 0)
    chunks = []
    try:
        while True:
            chunk = stream.recv(_CHUNK)
            if isinstance(chunk, int):
                raise Internal("libvirt stream of %s answered %d" % (vol.name(), chunk))
            if not chunk:
                break
            chunks.append(chunk)
        stream.finish()
    except Exception:
        _abort_quietly(stream)
        raise
    return b"".join(chunks)


def upload(conn, pool, name, data):
    """A new raw volume ``name`` holding ``data``; removed again when the upload fails."""
    vol = pool.createXML(volume_xml(name, len(data), "raw"), 0)
    try:
        stream = conn.newStream(0)
        vol.upload(stream, 0, len(data), 0)
        try:
            offset = 0
            while offset < len(data):
                sent = stream.send(data[offset:offset + _CHUNK])
                if sent < 0:
                    raise Internal("libvirt stream of %s answered %d" % (name, sent))
                offset += sent
            stream.finish()
        except Exception:
            _abort_quietly(stream)
            raise
    except Exception:
        try:
            vol.delete(0)
        except Exception:  # noqa: BLE001 - the upload's error is the one to report
            pass
        raise
    return vol


def _abort_quietly(stream):
    """Abort ``stream`` after a failure, which stays the error to report."""
    try:
        stream.abort()
    except Exception:  # noqa: BLE001 - the first error is the one to report
        pass
