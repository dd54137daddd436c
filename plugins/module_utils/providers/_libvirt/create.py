"""Creating a libvirt VM: the platform its domain asks for, what it refers to on the host
checked (``checks.py``), its volumes (given by size or cloned from a base image, each in its
storage pool), its cloud-init seed, then its definition.

Imported by the provider's first create, reconfigure, or delete of a VM with volumes: tasks that
only read VMs never load it.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, field_error, redact)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.checks import (
    check_host, storage_pool)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.images import (
    clone_volume, seed_files, seed_iso)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    is_error as _is, load as _libvirt)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import SEED_ROLE
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.platform import choose_cpu_mode
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import (
    build_domain_xml, validate_spec)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import (
    upload, volume_xml)

__all__ = ("create", "create_volumes", "delete_volumes")


def _whole_gib(size):
    """``size`` bytes in GiB, rounded up (at least 1): the size_gb a volume is recorded with."""
    return max(1, -(-size // 1024 ** 3))


def create(provider, spec):
    """Create the VM ``spec`` describes on ``provider``'s host: its VM dict."""
    spec = validate_spec(spec)
    session = provider.session()
    conn = session.connection
    try:
        session.lookup(spec["name"])
    except NotFound:
        pass
    else:
        raise Conflict("VM %r already exists on %s" % (spec["name"], provider.key))
    import uuid as uuidlib

    uuid = str(uuidlib.uuid4())
    domain_type, cpu_mode = _platform(session, spec)
    disks = dict(enumerate(spec["disks"]))
    found = check_host(provider, conn, disks, dict(enumerate(spec["interfaces"])),
                       "the VM was not created")
    seed = _seed_image(provider, conn, spec, uuid)
    volumes = create_volumes(conn, spec["name"], uuid[:8], disks, found)
    made = list(volumes.values())
    try:
        if seed:
            seed = _upload_seed(conn, "%s-%s-cidata.iso" % (spec["name"], uuid[:8]), *seed)
            made.append(seed)
        # libvirt's schema check (about 8 ms a define) for XML the user wrote; what the
        # spec builds is valid by construction (checked by the unit tests)
        flags = _libvirt().VIR_DOMAIN_DEFINE_VALIDATE if spec["libvirt"]["xml"] else 0
        dom = conn.defineXMLFlags(build_domain_xml(spec, domain_type, uuid, volumes, cpu_mode,
                                                   seed), flags)
    except Exception as exc:
        delete_volumes(conn, made, best_effort=True)
        if _exists(session, spec["name"]):  # another task defined it meanwhile
            raise Conflict("VM %r already exists on %s" % (spec["name"], provider.key),
                           cause=exc) from exc
        if _is(exc, "XML_INVALID_SCHEMA"):
            raise field_error("libvirt.xml" if spec["libvirt"]["xml"] else "spec",
                              "the domain XML does not validate against libvirt's schema "
                              "(%s); fix or remove the element" % redact(
                                  exc.get_error_message() or exc), cause=exc) from exc
        raise
    if spec.get("autostart"):
        dom.setAutostart(1)
    return session.describe(dom)


def _platform(session, spec):
    """(domain type, CPU mode) of a new domain, from what the hypervisor offers."""
    provider = session.provider
    domain_type, warning, supported = session.platform()
    if warning and warning not in provider.warnings:
        provider.warnings.append(warning)
    return domain_type, choose_cpu_mode(supported, spec["libvirt"].get("cpu_mode"), provider.key)


def _exists(session, name):
    try:
        session.lookup(name)
    except Exception:  # noqa: BLE001 - only a domain that is there for sure counts
        return False
    return True


def create_volumes(conn, name, token, disks, found):
    """Create a volume per disk of ``found`` ({index: (pool, base image or None)}, what
    ``checks.check_host`` found for the validated ``disks``, {index: disk}) in its pool, named
    after the VM, ``token`` and the index: {index: volume dict}. A failure deletes the volumes
    made before it."""
    made = [(index, disks[index]) for index in sorted(found)]
    pools = dict((index, pool) for index, (pool, _base) in found.items())
    bases = dict((index, base) for index, (_pool, base) in found.items() if base)
    volumes = {}
    try:
        for index, disk in made:
            volume = "%s-%s-disk%d.%s" % (name, token, index, disk["format"])
            if index in bases:
                vol = clone_volume(pools[index], volume, disk, bases[index])
            else:
                vol = pools[index].createXML(
                    volume_xml(volume, disk["size_gb"], disk["format"], unit="GiB", allocation=None), 0)
            volumes[index] = {"pool": pools[index].name(), "name": volume, "path": vol.path(),
                              "size_gb": disk.get("size_gb") or _whole_gib(vol.info()[1])}
            if index in bases:
                volumes[index].update(base_image=disk["base_image"], clone=disk["clone"])
    except Exception:
        delete_volumes(conn, volumes.values(), best_effort=True)
        raise
    return volumes


def _seed_image(provider, conn, spec, uuid):
    """(pool, ISO image) of the cloud-init seed the new VM ``spec`` asks for, or None."""
    if spec.get("cloud_init") is None:
        return None

    return (storage_pool(provider, conn, "cloud_init"),
            seed_iso(seed_files(spec["cloud_init"], uuid, spec["name"])))


def _upload_seed(conn, name, pool, data):
    """The seed ISO ``data`` uploaded as the raw volume ``name`` of ``pool``: its volume dict."""
    vol = upload(conn, pool, name, data)
    return {"pool": pool.name(), "name": name, "path": vol.path(),
            "size_gb": _whole_gib(len(data)), "role": SEED_ROLE}


def delete_volumes(conn, volumes, best_effort=False):
    for volume in volumes:
        try:
            conn.storageVolLookupByPath(volume["path"]).delete(0)
        except Exception as exc:
            if not (best_effort or _is(exc, "NO_STORAGE_VOL")):
                raise
