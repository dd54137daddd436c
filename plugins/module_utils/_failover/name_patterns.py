# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-VM settings given as a list of entries keyed by a VM name glob pattern (``match``), such
as ``priorities`` and ``restore_from_backup``. Patterns glob as ``requirements`` do."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.requirements import glob_regex
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error

__all__ = ("checked_entries", "matches")


def checked_entries(entries, path, keys, example):
    """``[(where, entry, pattern)]`` of the list ``entries`` at ``path``, each a mapping with
    only ``keys`` and a valid ``match`` pattern; InvalidSpec names the entry and the fix, with
    ``example`` (an entry as YAML flow text) to show the shape."""
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise field_error(path, "must be a list such as [%s]" % example)
    out = []
    for index, entry in enumerate(entries):
        where = "%s[%d]" % (path, index)
        if not isinstance(entry, dict):
            raise field_error(where, "must be a mapping such as %s" % example)
        unknown = sorted(str(key) for key in entry if key not in keys)
        if unknown:
            raise field_error("%s.%s" % (where, unknown[0]), "is not a key; use %s" % " and ".join(keys))
        pattern = entry.get("match")
        if not isinstance(pattern, str) or not pattern:
            raise field_error(where + ".match", "must be a VM name pattern such as 'db-*'")
        try:
            glob_regex(pattern)
        except ValueError as exc:
            raise field_error(where + ".match", "the pattern %s; use *, ?, [a-z] or escape with \\"
                              % exc) from exc
        out.append((where, entry, pattern))
    return out


def matches(pattern, name):
    """True when the checked ``pattern`` matches the VM name ``name``."""
    return bool(glob_regex(pattern).match(name or ""))
