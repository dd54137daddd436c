# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Python libraries a task needs, found from what its arguments name, and one clear failure
that lists every one of them that cannot be imported.

Nothing here is imported or probed on the way of a task that works: the controller asks which
libraries a task needs to choose where it runs, and a module asks which are missing only once an
ImportError has ended its task.
"""
import importlib
import sys

from ansible_collections.resilient.virt.plugins.module_utils.errors import MissingLibrary, _chain
from ansible_collections.resilient.virt.plugins.module_utils.providers._environment import environment_types

__all__ = ("CORE", "BACKENDS", "STORES", "OPTIONS", "PACKAGES", "provider_types", "needed",
           "importable", "missing", "missing_error", "explain")

CORE = ("pluggy", "tenacity", "jsonschema")
BACKENDS = {"libvirt": ("libvirt",), "vsphere": ("pyVmomi", "requests"),
            "proxmox": ("proxmoxer", "requests")}  # type -> libraries
STORES = dict((scheme, ("redis",)) for scheme in (  # state store URL scheme -> libraries
    "redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster"))
OPTIONS = {"cloud_init": ("pycdlib", "yaml")}  # task option, when given -> libraries
# import name -> (pip package, what needs it)
PACKAGES = {
    "pluggy": ("pluggy", "to load provider backends"),
    "tenacity": ("tenacity", "for retries"),
    "jsonschema": ("jsonschema", "to check VM specs"),
    "libvirt": ("libvirt-python", "for libvirt providers (it builds against the libvirt C "
                "library: on Debian or Ubuntu install python3-libvirt, or libvirt-dev, "
                "pkg-config and a C compiler first)"),
    "pyVmomi": ("pyvmomi", "for vSphere providers"),
    "requests": ("requests", "for vSphere tags (the vSphere Automation REST API) and Proxmox "
                 "VE providers"),
    "proxmoxer": ("proxmoxer", "for Proxmox VE providers"),
    "redis": ("redis", "for a Redis state store (redis://, redis+sentinel://, redis+cluster://)"),
    "pycdlib": ("pycdlib", "to write cloud-init seed images (cloud_init)"),
    "yaml": ("PyYAML", "to write cloud-init data (cloud_init)"),
}
_MODULES = {"pyVmomi": ("pyVmomi", "pyVim.connect")}  # what must import for the library to work


def provider_types(args):
    """The provider types a task's arguments name (the ``providers`` catalog, ``provider``, and
    providers given in ``vms``), ignoring what is malformed: the module reports that itself."""
    catalog = args.get("providers") if isinstance(args.get("providers"), dict) else {}
    found = [entry.get("type") for entry in catalog.values() if isinstance(entry, dict)]
    references = [args.get("provider")]
    vms = args.get("vms") if isinstance(args.get("vms"), list) else []
    references.extend(vm.get("provider") for vm in vms if isinstance(vm, dict))
    for reference in references:
        if isinstance(reference, dict):
            found.append(reference.get("type"))
    return set(kind for kind in found if isinstance(kind, str))


def needed(args, environ):
    """The libraries (import names) a task with ``args`` in ``environ`` needs."""
    names = set(CORE)
    kinds = provider_types(args)
    if args.get("provider") is None and not args.get("providers"):  # a provider from the environment
        kinds.update(environment_types(environ))
    for kind in kinds:
        names.update(BACKENDS.get(kind, ()))
    store = args.get("state_store") or environ.get("RESILIENT_VIRT_STATE_STORE") or ""
    names.update(STORES.get(str(store).split("://", 1)[0].lower(), ()))
    for option, libraries in OPTIONS.items():
        if args.get(option) is not None:
            names.update(libraries)
    return names


def importable(name):
    """True when this Python imports the library ``name`` (and what it needs to work)."""
    try:
        for module in _MODULES.get(name, (name,)):
            importlib.import_module(module)
    except Exception:  # noqa: BLE001 - anything a missing or broken library raises
        return False
    return True


def missing(names):
    """Those of ``names`` that this Python cannot import, sorted."""
    return sorted(name for name in names if not importable(name))


def missing_error(names, cause=None):
    """MissingLibrary naming every library of ``names`` (import names, at least one) with why the
    task needs it and the pip command, in the wording of Ansible's ``missing_required_lib``."""
    from ansible.module_utils.basic import missing_required_lib

    packages = [PACKAGES.get(name, (name, "by this task")) for name in sorted(names)]
    pips = [package for package, _why in packages]
    reason = "by this task: %s; install with: %s -m pip install %s" % (
        "; ".join("%s %s" % package for package in packages), sys.executable, " ".join(pips))
    return MissingLibrary(missing_required_lib(", ".join(pips), reason=reason), cause=cause,
                          details={"libraries": pips})


def explain(err, args, environ):
    """``err``, or MissingLibrary listing every library the task (``args`` in ``environ``) needs
    that this Python cannot import, when an ImportError lies behind ``err``."""
    if not any(isinstance(cause, ImportError) for cause in _chain(err)):
        return err
    names = missing(needed(args, environ))
    if not names:
        return err
    found = missing_error(names, cause=err)
    found.result = err.result
    return found
