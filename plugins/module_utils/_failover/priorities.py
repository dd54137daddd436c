# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evacuation priorities: VM name glob patterns mapped to a priority, the highest matching one
wins, a VM no pattern matches has priority 0. Patterns glob as ``requirements`` do."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.requirements import glob_regex
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error

__all__ = ("validate_priorities", "priority_of")

KEYS = ("match", "priority")


def validate_priorities(priorities, path="priorities"):
    """Checked ``[(pattern, priority)]`` from ``[{match: pattern, priority: int}]``; InvalidSpec
    names the entry and the fix."""
    if priorities is None:
        return []
    if not isinstance(priorities, list):
        raise field_error(path, "must be a list such as [{match: 'db-*', priority: 100}]")
    out = []
    for index, entry in enumerate(priorities):
        where = "%s[%d]" % (path, index)
        if not isinstance(entry, dict):
            raise field_error(where, "must be a mapping such as {match: 'db-*', priority: 100}")
        unknown = sorted(str(key) for key in entry if key not in KEYS)
        if unknown:
            raise field_error("%s.%s" % (where, unknown[0]), "is not a key; use match and priority")
        pattern, priority = entry.get("match"), entry.get("priority")
        if not isinstance(pattern, str) or not pattern:
            raise field_error(where + ".match", "must be a VM name pattern such as 'db-*'")
        try:
            glob_regex(pattern)
        except ValueError as exc:
            raise field_error(where + ".match", "the pattern %s; use *, ?, [a-z] or escape with \\"
                              % exc) from exc
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise field_error(where + ".priority", "must be a whole number (higher moves first), "
                              "got %r" % (priority,))
        out.append((pattern, priority))
    return out


def priority_of(name, priorities):
    """The highest priority of ``priorities`` (checked pairs) whose pattern matches ``name``; 0
    when none does."""
    found = [priority for pattern, priority in priorities if glob_regex(pattern).match(name or "")]
    return max(found) if found else 0
