# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a reconfiguration of an existing VM changes: the rules every backend and the planner share.

* ``vcpus``, ``memory_mb``, ``autostart``, ``boot``: the wanted value.
* ``metadata``: merged into the VM's; a key whose value is None is removed; values are stored as
  strings (numbers and booleans as JSON: ``true``, ``1.5``).
* ``tags``: the exact set of tags (order does not matter).
* ``placement``: where the VM is (vSphere: ``datacenter``, ``cluster``, ``host``,
  ``resource_pool``, ``folder``, ``datastore``); only the keys given are compared (a name or a
  relative path matches the end of the VM's absolute path), and a change moves the VM.
* ``disks`` and ``interfaces``: the exact list, matched to the VM's by position. A wanted item
  beyond the VM's list is added; a VM item beyond the wanted list is removed (a disk's storage is
  kept); an item at the same position is compared on the keys the wanted item gives, and may only
  differ in what :data:`CHANGEABLE` allows (an interface's network or bridge), anything else is
  an error naming the field.
"""
import json

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_errors

__all__ = ("FIELDS", "CHANGEABLE", "metadata_value", "merged_metadata", "list_changes",
           "differences")

FIELDS = ("vcpus", "memory_mb", "metadata", "tags", "disks", "interfaces", "autostart", "boot",
          "placement")
CHANGEABLE = {"disks": (), "interfaces": ("network", "bridge")}
_ITEM = {"disks": "disk", "interfaces": "interface"}


def metadata_value(value):
    """A metadata value as stored: a string (JSON for other scalars); None stays None."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def merged_metadata(current, wanted):
    """The VM's metadata once ``wanted`` is merged in (None values remove their key)."""
    merged = dict(current or {})
    for key, value in (wanted or {}).items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = metadata_value(value)
    return merged


def _same(key, current, wanted):
    if key == "mac" and isinstance(current, str) and isinstance(wanted, str):
        return current.lower() == wanted.lower()
    return current == wanted


def _same_place(have, wanted):
    """A placement value as given - a name, or a path relative (``team-a``) or absolute
    (``/DC0/vm/team-a``) - against the VM's absolute one."""
    if have == wanted:
        return True
    return isinstance(wanted, str) and isinstance(have, str) and not wanted.startswith("/") \
        and have.endswith("/" + wanted)


def list_changes(field, current, wanted):
    """How ``current`` items (the VM's ``field``) become ``wanted``: a dict ``update`` [(index,
    wanted item)], ``add`` [(index, wanted item)], ``remove`` [(index, current item)], each
    empty when nothing changes. InvalidSpec names every item that differs in something
    :data:`CHANGEABLE` does not allow."""
    current, wanted = list(current or []), list(wanted or [])
    changes = {"update": [], "add": [], "remove": []}
    errors = []
    for index, item in enumerate(wanted[:len(current)]):
        have = current[index]
        differing = [key for key, value in sorted(item.items())
                     if value is not None and not _same(key, have.get(key), value)]
        fixed = [key for key in differing if key not in CHANGEABLE[field]]
        for key in fixed:
            errors.append({"path": "%s[%d].%s" % (field, index, key), "message": (
                "%r asked, but the VM's %s at this position has %r, and an existing %s cannot "
                "be changed that way: give the VM's value, or list the new %s after the "
                "existing ones" % (item[key], _ITEM[field], have.get(key), _ITEM[field],
                                   _ITEM[field]))})
        if differing and not fixed:
            changes["update"].append((index, item))
    if errors:
        raise field_errors(errors, "%s cannot change as asked" % field)
    changes["add"] = [(index, item) for index, item in enumerate(wanted) if index >= len(current)]
    changes["remove"] = [(index, item) for index, item in enumerate(current)
                         if index >= len(wanted)]
    return changes


def differences(vm, wanted):
    """The fields of ``wanted`` (field -> wanted value) that ``vm`` does not have yet, with their
    wanted values; {} when the VM already is as wanted."""
    out = {}
    for field, value in wanted.items():
        if value is None:
            continue
        have = vm.get(field)
        if field == "metadata":
            differs = merged_metadata(have, value) != (have or {})
            value = dict((key, metadata_value(item)) for key, item in value.items())
        elif field == "tags":
            differs = set(value) != set(have or [])
        elif field == "placement":
            differs = any(item is not None and not _same_place((have or {}).get(key), item)
                          for key, item in value.items())
        elif field in CHANGEABLE:
            differs = any(list_changes(field, have, value).values())
        else:
            differs = value != have
        if differs:
            out[field] = value
    return out
