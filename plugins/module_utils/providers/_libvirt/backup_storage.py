"""The backup pool of the libvirt provider: its volumes, the markers (written and read through
libvirt streams) and the list of the backups it holds; the layout is described in ``backup.py``.
Also what ``backup_jobs.py`` and ``restore.py`` share: request fields and the status ``poll``
answers. Volumes and pools in general are ``volumes.py``'s.
"""
import json
import re
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import required_text
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    error_code, is_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import (
    directory_pool, download, drop_volume, find_volume, refresh_pool, upload)

__all__ = ("FORMAT", "record_name", "read_marker", "write_marker", "artifact_of",
           "drop_backup_volumes", "poll_status", "missing_status", "volumes_by_backup",
           "list_backups")

FORMAT = "resilient.virt/libvirt-backup/1"
RECORD_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_VOLUME_RE = re.compile(r"^([A-Za-z0-9_.-]+)\.([a-z]+)\.qcow2$")
_MARKER_RE = re.compile(r"^([A-Za-z0-9_.-]+)\.json$")
_MAX_MARKER = 1024 * 1024


# -- small readers ------------------------------------------------------------------------------
def record_name(mapping, key, path):
    """A record name (``[A-Za-z0-9_.-]+``) read from ``mapping[key]``."""
    name = required_text(mapping, key, path)
    if not RECORD_RE.match(name) or name in (".", "..") or len(name) > 200:
        raise field_error(path, "%r: a backup record name is 1 to 200 of A-Z a-z 0-9 _ . - "
                                "(not . or ..)" % name)
    return name


# -- the marker ---------------------------------------------------------------------------------
def read_marker(conn, pool, name):
    """(volume, marker dict) of backup ``name``: (None, None) when there is no marker volume,
    (volume, None) when it is not a whole marker of this backup (a write cut short)."""
    vol = find_volume(pool, name + ".json")
    if vol is None:
        return None, None
    try:
        data = download(conn, vol, _MAX_MARKER)
    except Exception as exc:
        if is_error(exc, "NO_STORAGE_VOL"):
            return None, None
        if is_error(exc, "OPERATION_INVALID"):  # still being created
            return vol, None
        raise
    try:
        marker = json.loads((data or b"").rstrip(b"\0").decode("utf-8"))
    except ValueError:
        return vol, None
    if not (isinstance(marker, dict) and marker.get("format") == FORMAT
            and marker.get("name") == name and marker.get("complete") is True
            and isinstance(marker.get("definition"), str)):
        return vol, None
    return vol, marker


def write_marker(conn, pool, handle, made, created_at, definition, checkpoint):
    """Write the marker of a backup whose volumes ``made`` ([(disk, volume)]) are whole."""
    volumes = []
    size = 0
    for disk, vol in made:
        _kind, capacity, allocation = vol.info()
        size += allocation
        volumes.append({"target": disk["target"], "name": disk["volume"], "path": vol.path(),
                        "capacity_bytes": capacity, "backing": disk.get("parent_volume")})
    marker = {"format": FORMAT, "name": handle["name"], "vm": handle["vm"],
              "vm_uuid": handle["uuid"], "mode": handle["mode"],
              "incremental": handle["incremental"], "parent": handle["parent"],
              "checkpoint": checkpoint,
              "location": {"pool": pool.name(), "marker": handle["marker"], "volumes": volumes},
              "size_bytes": size, "created_at": created_at, "complete": True,
              "definition": definition}
    upload(conn, pool, handle["marker"], json.dumps(marker, sort_keys=True).encode("utf-8"))
    return marker


def artifact_of(marker):
    """The artifact of a marker (the definition stays in the marker)."""
    return dict((k, v) for k, v in marker.items() if k != "definition")


def drop_backup_volumes(conn, pool, name, names):
    """Delete the marker first (the backup stops being complete), then the volumes; a marker
    written meanwhile by a concurrent poll goes too."""
    for vol_name in [name + ".json"] + list(names) + [name + ".json"]:
        vol = find_volume(pool, vol_name)
        if vol is not None:
            drop_volume(conn, vol, "volume %s" % vol_name)


# -- poll answers -------------------------------------------------------------------------------
def poll_status(state, progress=None, message=None, warnings=(), **extra):
    """A status as ``poll`` answers it: ``{state, progress, message, warnings}`` and ``extra``."""
    return dict({"state": state, "progress": progress, "message": message,
                 "warnings": list(warnings)}, **extra)


def missing_status(paths, marker_vol):
    """The status ``missing``, warning of the volumes (``paths`` and ``marker_vol``) an attempt
    that did not finish left behind."""
    left = len(paths) + (marker_vol is not None)
    warnings = ["%d volume(s) of an attempt that did not finish are left in the backup pool; "
                "cancel removes them" % left] if left else []
    return poll_status("missing", warnings=warnings)


# -- list ---------------------------------------------------------------------------------------
def volumes_by_backup(pool):
    """{record name: {"marker": volume or None, "disks": {target: volume}}} of the pool."""
    groups = {}
    for vol in pool.listAllVolumes(0):
        vol_name = vol.name()
        match = _VOLUME_RE.match(vol_name)
        if match:
            groups.setdefault(match.group(1), {"marker": None, "disks": {}})["disks"][
                match.group(2)] = vol
            continue
        match = _MARKER_RE.match(vol_name)
        if match:
            groups.setdefault(match.group(1), {"marker": None, "disks": {}})["marker"] = vol
    return groups


def list_backups(session, vm):
    """The artifacts of the backups in the backup pool (of VM ``vm`` unless None); leftovers
    without a valid marker are listed as incomplete. The pool is read again first: on shared
    storage, another hypervisor may have written backups there since."""
    provider, conn = session.provider, session.connection
    pool = directory_pool(provider, conn, "backup_pool")
    _read_again(pool)
    found, leftovers = [], []
    for name, group in sorted(volumes_by_backup(pool).items()):
        marker = read_marker(conn, pool, name)[1] if group["marker"] is not None else None
        if marker is not None:
            artifact = artifact_of(marker)
            names = set(v.name() for v in group["disks"].values())
            if any(v["name"] not in names for v in artifact["location"]["volumes"]):
                artifact["complete"] = False
            found.append(artifact)
        elif group["disks"] or group["marker"] is not None:
            leftovers.append(_leftover(pool, name, group))
    if leftovers:
        _attribute(conn, leftovers)
    return [a for a in found + leftovers if vm is None or a.get("vm") == vm]


def _read_again(pool):
    """Refresh ``pool``; one libvirt cannot refresh now (busy: a volume being built in it) is
    listed as libvirt last read it."""
    try:
        refresh_pool(pool)
    except Exception as exc:
        if error_code(exc) is None:
            raise


def _leftover(pool, name, group):
    """The artifact of a backup without a valid marker: what its volumes tell."""
    volumes, size, newest = [], 0, 0
    parent = None
    for target, vol in sorted(group["disks"].items()) + [(None, group["marker"])]:
        if vol is None:
            continue
        _kind, capacity, allocation = vol.info()
        size += allocation
        root = ET.fromstring(vol.XMLDesc(0))
        newest = max(newest, int(float(root.findtext("target/timestamps/mtime") or 0)))
        if target is None:
            continue
        backing = root.findtext("backingStore/path")
        match = _VOLUME_RE.match((backing or "").rsplit("/", 1)[-1])
        if match:
            parent = match.group(1)
        volumes.append({"target": target, "name": vol.name(), "path": vol.path(),
                        "capacity_bytes": capacity,
                        "backing": backing.rsplit("/", 1)[-1] if backing else None})
    return {"format": FORMAT, "name": name, "vm": None, "vm_uuid": None, "mode": None,
            "incremental": parent is not None, "parent": parent, "checkpoint": None,
            "location": {"pool": pool.name(), "volumes": volumes, "marker": None if group[
                "marker"] is None else group["marker"].name()},
            "size_bytes": size, "created_at": format_time(newest) if newest else None,
            "complete": False}


def _attribute(conn, leftovers):
    """Name the VM of leftovers whose checkpoint (a backup job's) is still on a domain."""
    wanted = dict((a["name"], a) for a in leftovers)
    for dom in conn.listAllDomains(0):
        try:
            names = [c.getName() for c in dom.listAllCheckpoints(0)]
        except Exception as exc:
            if is_error(exc, "NO_DOMAIN"):
                continue
            raise
        for checkpoint in names:
            if checkpoint in wanted and wanted[checkpoint]["vm"] is None:
                wanted[checkpoint].update(vm=dom.name(), vm_uuid=dom.UUIDString(),
                                          checkpoint=checkpoint, mode="push")
