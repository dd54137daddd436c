"""What a new VM or a change of one refers to on the libvirt host, checked before anything is
written: the storage pool of each disk that gets a volume and its base image, the image a disk's
``path`` names in a storage pool's directory, the network (it exists and is active) or bridge of
each interface. A create or a change that would fail half way (defined but unable to start, or
defined and refused by the running domain) fails here instead, with InvalidSpec naming every
field and its fix.

Imported with ``create.py`` (by a create, a reconfigure or a delete of volumes).
"""
import posixpath
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, field_error, field_errors)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import images
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    error_code as _code, is_error as _is, load as _libvirt)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import refresh_pool

__all__ = ("check_host", "storage_pool")

SHOWN = 20  # names listed in a message at most


def storage_pool(provider, conn, need, name=None):
    """The active storage pool where ``need`` (``disks[0]``, ``cloud_init``) gets a volume:
    ``name``, the disk's ``pool`` (InvalidSpec naming ``<need>.pool`` when it is unknown or
    inactive), else provider.storage_pool."""
    field = need + ".pool" if name else "provider.storage_pool"
    name = name or provider.config["storage_pool"]
    try:
        pool = conn.storagePoolLookupByName(name)
    except Exception as exc:
        if not _is(exc, "NO_STORAGE_POOL"):
            raise
        fix = ("create the pool or set provider.storage_pool to an existing one"
               if field == "provider.storage_pool" else
               "give an existing pool (virsh pool-list --all), or leave pool out to use "
               "provider.storage_pool")
        message = ("storage pool %r does not exist on %s, and %s needs one to create a "
                   "volume; %s" % (name, provider.key, need, fix))
        raise field_error(field, message, cause=exc) from exc
    if pool.isActive():
        return pool
    if field == "provider.storage_pool":
        raise Conflict("storage pool %r on %s is not active; start it (virsh pool-start %s)"
                       % (name, provider.key, name))
    raise field_error(field, "storage pool %r on %s is not active; start it (virsh pool-start "
                             "%s) or give an active pool" % (name, provider.key, name))


def check_host(provider, conn, disks, interfaces, what):
    """Check what the validated ``disks`` and ``interfaces`` ({index: item}, the items a create
    or a change writes) refer to on the host, before anything is written. Returns {index: (pool,
    base image or None)} for the disks that get a volume (``create.create_volumes``); raises
    InvalidSpec listing every problem by its field, under the headline ``what``."""
    found, errors = {}, []
    pools = []  # the host's active pools, read once when a disk's path needs them
    for index, disk in sorted(disks.items()):
        where = "disks[%d]" % index
        try:
            if "size_gb" in disk or "base_image" in disk:
                pool, base = storage_pool(provider, conn, where, disk.get("pool")), None
                if "base_image" in disk:
                    base = images.base_image(conn, pool, disk["base_image"], where, provider.key)
                    images.check_size(disk, base[2], where)
                found[index] = (pool, base)
            elif disk.get("path"):
                _check_path(provider, conn, disk["path"], where, pools)
        except InvalidSpec as err:
            errors.extend(e for e in err.details["errors"] if e not in errors)
    names, problems = {}, {}  # the host's lists, and the problem of each name, read once
    for index, nic in sorted(interfaces.items()):
        kind = "network" if nic.get("network") else "bridge"
        if (kind, nic[kind]) not in problems:
            problems[kind, nic[kind]] = (_network_problem if kind == "network" else
                                         _bridge_problem)(provider, conn, nic[kind], names)
        if problems[kind, nic[kind]]:
            errors.append({"path": "interfaces[%d].%s" % (index, kind),
                           "message": problems[kind, nic[kind]]})
    if errors:
        raise field_errors(errors, what)
    return found


def _listed(names):
    names = sorted(names)
    shown = ", ".join(names[:SHOWN]) + (", ..." if len(names) > SHOWN else "")
    return shown or "none"


def _network_problem(provider, conn, name, names):
    """What is wrong with the libvirt network ``name`` for an interface, or None: it must exist
    and be active (a running domain cannot plug into an inactive network, nor start with one)."""
    try:
        network = conn.networkLookupByName(name)
        if network.isActive():
            return None
        missing = False
    except Exception as exc:
        if not _is(exc, "NO_NETWORK"):
            raise
        missing = True
    if "networks" not in names:
        names["networks"] = sorted((n.name(), bool(n.isActive())) for n in conn.listAllNetworks(0))
    if missing:
        return ("network %r does not exist on %s; give one of the networks it has: %s (virsh "
                "net-list --all), or define the network first" % (name, provider.key, _listed(
                    n + ("" if active else " (inactive)") for n, active in names["networks"])))
    return ("network %r on %s is not active; start it (virsh net-start %s, and virsh "
            "net-autostart %s to start it with the host) or give an active network (%s)"
            % (name, provider.key, name, name,
               _listed(n for n, active in names["networks"] if active)))


def _bridge_problem(provider, conn, name, names):
    """What is wrong with the host bridge ``name`` for an interface, or None. It is missing
    when libvirt's interface driver has no interface of that name and neither do the host's
    network devices (node devices: the kernel's, where the interface driver reads only the
    host's network configuration). A daemon without an interface driver leaves it unchecked."""
    try:
        conn.interfaceLookupByName(name)
        return None
    except Exception as exc:
        if _code(exc) is None:
            raise
        if not _is(exc, "NO_INTERFACE"):
            return None  # the daemon cannot tell (no interface driver)
    if "devices" not in names:
        lv = _libvirt()
        try:
            names["devices"] = set(
                ET.fromstring(device.XMLDesc(0)).findtext("capability/interface")
                for device in conn.listAllDevices(lv.VIR_CONNECT_LIST_NODE_DEVICES_CAP_NET))
        except Exception as exc:  # noqa: BLE001 - no node devices: the interface driver decides
            if _code(exc) is None:
                raise
            names["devices"] = set()
    if name in names["devices"]:
        return None
    if "bridges" not in names:
        try:
            names["bridges"] = _listed(
                i.name() for i in conn.listAllInterfaces(0)
                if ET.fromstring(i.XMLDesc(0)).get("type") == "bridge")
        except Exception as exc:  # noqa: BLE001 - the list is a courtesy
            if _code(exc) is None:
                raise
            names["bridges"] = "unknown"
    return ("bridge %r is not an interface of %s; give an existing bridge (bridges there: %s), "
            "or connect the interface to a libvirt network with network: instead of bridge:"
            % (name, provider.key, names["bridges"]))


def _check_path(provider, conn, path, where, pools):
    """InvalidSpec naming ``<where>.path`` when ``path`` lies in the directory of an active
    storage pool and that pool has no such volume, also after a refresh (a file copied there
    since the pool was last read). A path outside every pool's directory cannot be checked
    through libvirt and is left to it."""
    try:
        conn.storageVolLookupByPath(path)
        return
    except Exception as exc:
        if not _is(exc, "NO_STORAGE_VOL", "NO_STORAGE_POOL"):
            raise
    if not pools:
        for pool in conn.listAllStoragePools(0):
            if pool.isActive():
                target = ET.fromstring(pool.XMLDesc(0)).findtext("target/path")
                pools.append((pool, target and posixpath.normpath(target)))
    directory = posixpath.dirname(posixpath.normpath(path))
    for pool, target in pools:
        if target != directory:
            continue
        try:
            refresh_pool(pool)
            conn.storageVolLookupByPath(path)
            return
        except Exception as exc:
            if not _is(exc, "NO_STORAGE_VOL"):
                if _code(exc) is None:
                    raise
                return  # the pool could not be read again (busy): left to libvirt
        raise field_error(where + ".path", (
            "%r is not an image on %s: the directory of storage pool %s has no such file; give "
            "the path of an existing image (virsh vol-list --details %s), or size_gb or "
            "base_image to make a new volume" % (path, provider.key, pool.name(), pool.name())))
