# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provider a task gets from its environment when it names none.

AWX credentials inject a provider's settings as environment variables (the built-in VMware
vCenter credential sets VMWARE_HOST, VMWARE_USER, VMWARE_PASSWORD...). The options read them
themselves (``Option(env=...)`` in each backend); this file only tells which backend the
environment names when a task gives neither ``provider`` nor ``providers``: the one whose
variable of :data:`SIGNS` is set and not empty.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error

__all__ = ("SIGNS", "environment_types", "environment_provider", "environment_catalog")

# provider type -> the environment variable that names an endpoint of that type
SIGNS = {"vsphere": "VMWARE_HOST", "libvirt": "LIBVIRT_DEFAULT_URI", "proxmox": "PROXMOX_HOST"}


def environment_types(environ):
    """The provider types whose variable of SIGNS is set and not empty in ``environ``, sorted."""
    return sorted(kind for kind, name in SIGNS.items() if environ.get(name))


def environment_provider(environ, field="provider"):
    """``{"type": <type>}`` when ``environ`` names exactly one backend (its options take the rest
    from the environment), None when it names none; InvalidSpec naming ``field`` when several."""
    kinds = environment_types(environ)
    if not kinds:
        return None
    if len(kinds) > 1:
        raise field_error(field, "is not given and the environment names several providers (%s); "
                          "give %s with the type to use (type: %s), or unset all but one of these "
                          "variables" % (", ".join("%s from %s" % (kind, SIGNS[kind]) for kind in kinds),
                                         field, " or type: ".join(kinds)))
    return {"type": kinds[0]}


def environment_catalog(environ):
    """The ``providers`` catalog of an inventory source that gives none: the provider the
    environment names, under its type's name; InvalidSpec naming ``providers`` when it names
    none or several."""
    config = environment_provider(environ, "providers")
    if config is None:
        raise field_error("providers", "is not given and the environment names no provider; give "
                          "providers, or set %s" % " or ".join(
                              "%s (%s)" % (name, kind) for kind, name in sorted(SIGNS.items())))
    return {config["type"]: config}
