# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which snapshots of a VM retention deletes: only those this collection made, never a pinned
one, never the one the task just took."""
from ansible_collections.resilient.virt.plugins.module_utils._time import parse_time

__all__ = ("to_prune",)


def to_prune(snapshots, keep_last=None, max_age=None, now=None, keep=None):
    """The snapshots (shown: with ``managed`` and ``pinned``) to delete, oldest first.

    Among the managed, unpinned snapshots, oldest first by ``created`` (ties in the order
    given, which is parents before children): those beyond the newest ``keep_last``, and
    those created more than ``max_age`` seconds before ``now`` (epoch seconds); ``keep`` (a
    name) is never deleted. A snapshot without a creation time is never too old.
    """
    ordered = sorted(((index, s) for index, s in enumerate(snapshots)
                      if s["managed"] and not s["pinned"]),
                     key=lambda item: (parse_time(item[1]["created"], "created")
                                       if item[1]["created"] else float("inf"), item[0]))
    ordered = [s for _index, s in ordered]
    chosen = set()
    if keep_last is not None:
        chosen.update(s["name"] for s in ordered[:max(0, len(ordered) - keep_last)])
    if max_age is not None:
        chosen.update(s["name"] for s in ordered
                      if s["created"] and parse_time(s["created"], "created") < now - max_age)
    return [s for s in ordered if s["name"] in chosen and s["name"] != keep]
