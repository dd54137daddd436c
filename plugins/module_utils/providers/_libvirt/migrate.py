"""Moving a domain to another libvirt host (``migrate_to``): a running or paused one by a
client-driven managed migration (this process talks to both daemons, which need not know each
other; the QEMUs copy memory and, through NBD, the writable disks between them), a stopped one
cold (its volumes copied through libvirt streams, its definition defined there, then removed
here).

The volumes of the disks are made on the target first, in the pool of the same name, with the
same name, size and format; a disk whose file is in no storage pool cannot be made there and is
refused before anything moves. Read-only disks (a cloud-init seed) are not mirrored by QEMU:
their bytes are copied before the migration starts. What this call made on the target is
removed again when the migration fails, unless the target then has the domain; once the VM
has moved, its volumes here are deleted (they would be a stale copy of its data).

A disk in a pool both hosts share (``shared_storage.py`` proves it) is neither made, copied nor
deleted: the VM moves and keeps using it. libvirt allows that live only on a filesystem it knows
as shared; the collection has proved the sharing itself, so it lets libvirt go on
(VIR_MIGRATE_UNSAFE) when each shared disk bypasses the host's page cache (cache ``none`` or
``directsync``), which keeps the two hosts' views of the disk the same during the handover, and
refuses the live move otherwise.
"""
import threading
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotSupported, Timeout)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    SHUTOFF, is_error, load as _libvirt)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.shared_storage import shared_pools
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import (
    find_volume, forget_volumes, refresh_pool, volume_at, volume_xml)

__all__ = ("migrate_to",)

_CHUNK = 1024 * 1024
_CPU_INCOMPATIBLE = 0  # virCPUCompareResult
_COHERENT_CACHES = ("none", "directsync")  # host page cache bypassed


def migrate_to(provider, name, target, live=True, timeout=None, bandwidth_mib=None):
    """Move domain ``name`` of ``provider`` to the provider ``target``: see the file's
    docstring and ``contract.Provider.migrate_to``."""
    lv = _libvirt()
    source, dest = provider.session(), target.session()
    dom = source.lookup(name)
    _check_absent(dest, name, target.key)
    state = dom.state()[0]
    if state == SHUTOFF and dom.hasManagedSaveImage(0):
        raise Conflict("VM %r is suspended (its memory is saved on %s, which a move cannot take "
                       "along); start it and move it live, or stop it (state: stopped discards "
                       "the saved memory) and move it cold" % (name, provider.key))
    _check_cpu(lv, dom, dest, name, target.key)
    disks = _disks(lv, source, dom, name)
    shared = shared_pools(source.connection, dest.connection, [disk["pool"] for disk in disks])
    for disk in disks:
        disk["shared"] = disk["pool"] in shared
    if state != SHUTOFF:
        _check_shared_caches(disks, name)
    made = []
    try:
        paths = _make_volumes(lv, source, dest, disks, made, target.key)
        if state == SHUTOFF:
            return _cold(lv, source, dest, dom, disks, paths)
        return _live(lv, source, dest, dom, disks, paths, live, timeout, bandwidth_mib)
    except BaseException:
        if not _has_domain(dest, name):
            forget_volumes(made)
        raise


def _check_absent(dest, name, key):
    if _has_domain(dest, name):
        raise Conflict("%s already has a VM named %r; a VM is never moved onto another one (a "
                       "leftover of an earlier move is removed with virsh undefine there)"
                       % (key, name))


def _has_domain(session, name):
    try:
        session.connection.lookupByName(name)
    except Exception as exc:
        if is_error(exc, "NO_DOMAIN"):
            return False
        raise
    return True


def _check_cpu(lv, dom, dest, name, key):
    """Conflict when the target's hypervisor says it cannot give the domain its CPU model (a
    domain without a CPU model, or with the host's CPU passed through, is not compared)."""
    root = ET.fromstring(dom.XMLDesc(0))
    cpu = root.find("cpu")
    if cpu is None or cpu.find("model") is None or cpu.get("mode") == "host-passthrough":
        return
    os_type = root.find("os/type")
    answer = dest.connection.compareHypervisorCPU(
        None, os_type.get("arch"), os_type.get("machine"), root.get("type"),
        ET.tostring(cpu, encoding="unicode"), 0)
    if answer == _CPU_INCOMPATIBLE:
        raise Conflict("the CPU of VM %r (model %s) is not one %s can give it; choose a target "
                       "whose CPU has that model's features, or give the VM a CPU model both "
                       "hosts have" % (name, cpu.findtext("model"), key))


def _check_shared_caches(disks, name):
    """Conflict when a writable disk on shared storage keeps the host's page cache: during a
    live handover the two hosts could see different bytes of it."""
    for disk in disks:
        if disk["shared"] and not disk["readonly"] and disk["cache"] not in _COHERENT_CACHES:
            raise Conflict("disk %s of VM %r is on storage both hosts share (pool %r) with cache "
                           "mode %r: moved live, the hosts could see different data during the "
                           "handover; set its cache to none or directsync (virsh edit: <driver "
                           "cache='none'/>, then restart the VM), or stop the VM and move it "
                           "cold" % (disk["target"], name, disk["pool"],
                                     disk["cache"] or "default"))


def _disks(lv, source, dom, name):
    """The disks of the domain that have a file: dicts target, path, readonly, volume (in a
    pool of the source), pool (its name) and cache (the driver's cache mode or None);
    NotSupported for a file in no pool."""
    found = []
    for disk in ET.fromstring(dom.XMLDesc(0)).iter("disk"):
        source_el = disk.find("source")
        path = source_el.get("file") if source_el is not None else None
        if not path:
            continue
        vol = volume_at(source.connection, path)
        if vol is None:
            raise NotSupported("disk %s of VM %r (%s) is in no storage pool of %s, so it cannot "
                               "be made on the target; move the file into a storage pool (virsh "
                               "pool-refresh) or detach the disk" % (
                                   disk.find("target").get("dev"), name, path,
                                   source.provider.key))
        readonly = disk.find("readonly") is not None or disk.get("device") == "cdrom"
        driver = disk.find("driver")
        found.append({"target": disk.find("target").get("dev"), "path": path,
                      "readonly": readonly, "volume": vol,
                      "pool": vol.storagePoolLookupByVolume().name(),
                      "cache": driver.get("cache") if driver is not None else None})
    return found


def _make_volumes(lv, source, dest, disks, made, key):
    """Make each disk's volume on the target (appended to ``made``), with the bytes of the
    read-only ones; {source path: target path}. A shared disk keeps its path."""
    paths = {}
    for disk in disks:
        vol, pool_name = disk["volume"], disk["pool"]
        if disk["shared"]:
            paths[disk["path"]] = disk["path"]
            continue
        try:
            pool = dest.connection.storagePoolLookupByName(pool_name)
        except Exception as exc:
            if not is_error(exc, "NO_STORAGE_POOL"):
                raise
            raise Conflict("%s has no storage pool %r for disk %s (%s); define it there (virsh "
                           "pool-define-as %s dir --target DIR, pool-build, pool-start)"
                           % (key, pool_name, disk["target"], disk["path"], pool_name),
                           cause=exc) from exc
        refresh_pool(pool)  # a file made there since libvirt last looked: the Conflict below
        if find_volume(pool, vol.name()) is not None:
            raise Conflict("%s already has a volume %r in pool %r; a move never writes over a "
                           "volume it did not make: delete it there (virsh vol-delete) or move "
                           "the VM elsewhere" % (key, vol.name(), pool_name))
        fmt = ET.fromstring(vol.XMLDesc(0)).find("target/format")
        new = pool.createXML(volume_xml(vol.name(), vol.info()[1], fmt.get("type") if fmt
                                        is not None else "raw"), 0)
        made.append(new)
        paths[disk["path"]] = new.path()
        if disk["readonly"]:
            _copy(source.connection, vol, dest.connection, new)
    return paths


def _copy(src_conn, src_vol, dst_conn, dst_vol):
    """Copy the bytes of ``src_vol`` into ``dst_vol`` through two libvirt streams."""
    down, up = src_conn.newStream(0), dst_conn.newStream(0)
    src_vol.download(down, 0, 0, 0)
    dst_vol.upload(up, 0, 0, 0)
    try:
        while True:
            chunk = down.recv(_CHUNK)
            if isinstance(chunk, int) or not chunk:
                break
            offset = 0
            while offset < len(chunk):
                offset += up.send(chunk[offset:])
        down.finish()
        up.finish()
    except BaseException:
        for stream in (down, up):
            try:
                stream.abort()
            except Exception:  # noqa: BLE001 - the copy's error is the one to report
                pass
        raise


def _with_paths(xml, paths):
    """Domain XML ``xml`` with each disk file of ``paths`` replaced by its target path."""
    root = ET.fromstring(xml)
    for source in root.iter("source"):
        if source.get("file") in paths:
            source.set("file", paths[source.get("file")])
    return ET.tostring(root, encoding="unicode")


def _live(lv, source, dest, dom, disks, paths, live, timeout, bandwidth_mib):
    """Migrate the running domain; cancelled (abortJob) when ``timeout`` s pass first."""
    flags = lv.VIR_MIGRATE_PERSIST_DEST | lv.VIR_MIGRATE_UNDEFINE_SOURCE
    if live:
        flags |= lv.VIR_MIGRATE_LIVE
    params = {}
    writable = [d["target"] for d in disks if not d["readonly"] and not d["shared"]]
    if writable:
        flags |= lv.VIR_MIGRATE_NON_SHARED_DISK
        params[lv.VIR_MIGRATE_PARAM_MIGRATE_DISKS] = writable
    if any(d["shared"] for d in disks):  # proved shared, caches checked: _check_shared_caches
        flags |= lv.VIR_MIGRATE_UNSAFE
    if any(old != new for old, new in paths.items()):
        params[lv.VIR_MIGRATE_PARAM_DEST_XML] = _with_paths(
            dom.XMLDesc(lv.VIR_DOMAIN_XML_MIGRATABLE), paths)
        params[lv.VIR_MIGRATE_PARAM_PERSIST_XML] = _with_paths(
            dom.XMLDesc(lv.VIR_DOMAIN_XML_MIGRATABLE | lv.VIR_DOMAIN_XML_INACTIVE), paths)
    if bandwidth_mib:
        params[lv.VIR_MIGRATE_PARAM_BANDWIDTH] = int(bandwidth_mib)
    cancelled = threading.Event()

    def cancel():
        cancelled.set()
        try:
            dom.abortJob()
        except Exception:  # noqa: BLE001 - no job yet, or it just ended: the migration says
            pass

    watchdog = threading.Timer(timeout, cancel) if timeout else None
    if watchdog:
        watchdog.daemon = True
        watchdog.start()
    try:
        moved = dom.migrate3(dest.connection, params, flags)
    except Exception as exc:
        if cancelled.is_set():
            raise Timeout("the migration of VM %r to %s did not end within %gs and was "
                          "cancelled; the VM runs on %s as before (raise timeout, or limit "
                          "what it copies)" % (dom.name(), dest.provider.key, timeout,
                                               source.provider.key), cause=exc) from exc
        raise
    finally:
        if watchdog:
            watchdog.cancel()
    stats = moved.jobStats(lv.VIR_DOMAIN_JOB_STATS_COMPLETED)
    downtime = stats.get("downtime")
    _drop_sources(source, disks)
    return dict(_disk_lists(disks, paths), vm=dest.describe(moved),
                mode="live" if live else "paused",
                downtime_ms=int(downtime) if downtime is not None else None)


def _drop_sources(source, disks):
    """Delete the volumes the disks had here, now copied to the target (a stale copy of the
    VM's data otherwise); one that cannot be deleted is named in a warning. A shared disk is
    the VM's own, kept."""
    for disk in disks:
        if disk["shared"]:
            continue
        try:
            disk["volume"].delete(0)
        except Exception as exc:  # noqa: BLE001 - the VM has moved: a warning, not a failure
            source.provider.warnings.append(
                "the volume %s of the moved VM could not be deleted from %s (%s); delete it "
                "there (virsh vol-delete)" % (disk["path"], source.provider.key, exc))


def _cold(lv, source, dest, dom, disks, paths):
    """Copy the stopped domain's volumes, define it on the target, then remove it and its
    volumes here."""
    for disk in disks:
        if not disk["readonly"] and not disk["shared"]:
            _copy(source.connection, disk["volume"], dest.connection,
                  dest.connection.storageVolLookupByPath(paths[disk["path"]]))
    xml = _with_paths(dom.XMLDesc(lv.VIR_DOMAIN_XML_INACTIVE | lv.VIR_DOMAIN_XML_MIGRATABLE), paths)
    moved = dest.connection.defineXML(xml)
    if dom.autostart():
        moved.setAutostart(1)
    dom.undefine()
    _drop_sources(source, disks)
    return dict(_disk_lists(disks, paths), vm=dest.describe(moved), mode="cold",
                downtime_ms=None)


def _disk_lists(disks, paths):
    """``copied_disks`` (their paths on the target) and ``shared_disks`` (kept where they are)."""
    return {"copied_disks": sorted(paths[d["path"]] for d in disks if not d["shared"]),
            "shared_disks": sorted(d["path"] for d in disks if d["shared"])}
