# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evacuation priorities: VM name glob patterns mapped to a priority, the highest matching one
wins, a VM no pattern matches has priority 0 (``name_patterns.py`` checks the entries)."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.name_patterns import (
    checked_entries, matches)
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error

__all__ = ("validate_priorities", "priority_of")

KEYS = ("match", "priority")


def validate_priorities(priorities, path="priorities"):
    """Checked ``[(pattern, priority)]`` from ``[{match: pattern, priority: int}]``; InvalidSpec
    names the entry and the fix."""
    out = []
    for where, entry, pattern in checked_entries(priorities, path, KEYS, "{match: 'db-*', priority: 100}"):
        priority = entry.get("priority")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise field_error(where + ".priority", "must be a whole number (higher moves first), "
                              "got %r" % (priority,))
        out.append((pattern, priority))
    return out


def priority_of(name, priorities):
    """The highest priority of ``priorities`` (checked pairs) whose pattern matches ``name``; 0
    when none does."""
    found = [priority for pattern, priority in priorities if matches(pattern, name)]
    return max(found) if found else 0
