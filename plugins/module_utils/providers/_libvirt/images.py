"""Volumes of new libvirt disks made from images: a qcow2 overlay on a base image or a full
copy of it, and the cloud-init NoCloud seed ISO.

A base image is a volume libvirt knows (a volume in one of the host's storage pools), found and
read through libvirt - its format from its volume XML, never from its name - so remote hosts
work the same. The seed is built in memory with pycdlib (the backend uploads it through a
libvirt stream). Imported with ``create.py`` and ``checks.py``; pycdlib (21 ms to import) and
PyYAML (47 ms) only when a seed is made.
"""
import io
import math
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    is_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.volumes import (
    volume_xml)

__all__ = ("GIB", "SEED_LABEL", "base_image", "check_size", "clone_volume", "seed_files",
           "seed_iso")

GIB = 1024 ** 3
BASE_FORMATS = ("qcow2", "raw")
SEED_LABEL = "cidata"
# the files of a NoCloud seed, with their ISO 9660 level 1 names (Rock Ridge and Joliet give
# cloud-init the real ones)
_SEED_NAMES = {"user-data": "USER_DAT.;1", "meta-data": "META_DAT.;1",
               "network-config": "NETWORK_.;1"}


def _gib(size):
    return "%.2f GiB" % (size / float(GIB))


def base_image(conn, pool, reference, where, key):
    """The base image ``reference`` of the disk at ``where`` (disks[i]): the absolute path of a
    volume, ``<pool>/<volume>``, or a volume of the disk's ``pool``. Returns (volume, format,
    capacity in bytes); InvalidSpec naming ``<where>.base_image`` when libvirt knows no such
    volume or it is neither qcow2 nor raw."""
    field = where + ".base_image"
    try:
        if reference.startswith("/"):
            vol = conn.storageVolLookupByPath(reference)
        elif "/" in reference:
            pool_name, _slash, name = reference.partition("/")
            vol = conn.storagePoolLookupByName(pool_name).storageVolLookupByName(name)
        else:
            vol = pool.storageVolLookupByName(reference)
    except Exception as exc:
        if not is_error(exc, "NO_STORAGE_VOL", "NO_STORAGE_POOL"):
            raise
        raise field_error(field, (
            "%r is not a volume of any storage pool on %s; a base image must be one: give the "
            "path of a volume (virsh vol-list --details POOL), <pool>/<volume>, or a volume of "
            "the disk's pool, or put the image in a pool first (virsh vol-upload, or copy it to "
            "the pool's directory and run virsh pool-refresh POOL)" % (reference, key)),
            cause=exc) from exc
    node = ET.fromstring(vol.XMLDesc(0)).find("target/format")
    fmt = None if node is None else node.get("type")
    if fmt not in BASE_FORMATS:
        raise field_error(field, "%r is a %s volume on %s; a base image must be qcow2 or raw "
                                 "(convert it with qemu-img convert -O qcow2)" % (reference, fmt, key))
    return vol, fmt, vol.info()[1]


def check_size(disk, capacity, where):
    """InvalidSpec naming ``<where>.size_gb`` when the disk asks for less than the base
    image's ``capacity`` (bytes): a volume cannot be smaller than its image."""
    if "size_gb" in disk and disk["size_gb"] * GIB < capacity:
        raise field_error(where + ".size_gb", (
            "%d GiB is less than the capacity of base image %r (%s); give at least %d, or leave "
            "size_gb out to keep the base image's size" % (
                disk["size_gb"], disk["base_image"], _gib(capacity),
                int(math.ceil(capacity / float(GIB))))))


def clone_volume(pool, name, disk, base):
    """The new volume ``name`` in ``pool`` made from ``base`` (volume, format, capacity) as the
    validated ``disk`` asks: a qcow2 overlay whose backing store is the base (``clone:
    overlay``), or a full copy in the disk's format (``clone: copy``); at least the base's
    capacity, ``size_gb`` GiB when larger."""
    vol, fmt, capacity = base
    size = max(capacity, disk.get("size_gb", 0) * GIB)
    if disk["clone"] == "overlay":
        return pool.createXML(volume_xml(name, size, "qcow2", backing=vol.path(),
                                         backing_format=fmt), 0)
    made = pool.createXMLFrom(volume_xml(name, size, disk["format"]), vol, 0)
    if made.info()[1] < size:  # copied at the base's size
        made.resize(size, 0)
    return made


def seed_files(cloud_init, uuid, name):
    """The files of the NoCloud seed of the VM ``name`` (``uuid``) as bytes: ``user-data`` (a
    dict as ``#cloud-config`` YAML), ``meta-data`` (instance-id the uuid and local-hostname the
    name unless ``meta_data`` sets them) and ``network-config`` when given."""
    import yaml

    def text(value, header=""):
        if isinstance(value, dict):
            value = header + yaml.safe_dump(value, default_flow_style=False, sort_keys=False)
        return value.encode("utf-8")

    meta = {"instance-id": uuid, "local-hostname": name}
    meta.update(cloud_init.get("meta_data") or {})
    files = {"user-data": text(cloud_init.get("user_data", ""), "#cloud-config\n"),
             "meta-data": text(meta)}
    if cloud_init.get("network_config") is not None:
        files["network-config"] = text(cloud_init["network_config"])
    return files


def seed_iso(files):
    """An ISO 9660 image labelled ``cidata`` holding ``files`` ({name: bytes} of
    :func:`seed_files`), with Rock Ridge and Joliet names."""
    import pycdlib

    iso = pycdlib.PyCdlib()
    iso.new(vol_ident=SEED_LABEL, joliet=3, rock_ridge="1.09")
    for name, data in sorted(files.items()):
        iso.add_fp(io.BytesIO(data), len(data), "/" + _SEED_NAMES[name], rr_name=name,
                   joliet_path="/" + name)
    out = io.BytesIO()
    iso.write_fp(out)
    iso.close()
    return out.getvalue()
