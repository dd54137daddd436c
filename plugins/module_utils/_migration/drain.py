# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The moves of a drain plan (``drain_plan.py``), at most ``parallel`` at a time, each one a
move of the ``vm_migrate`` task (its own look, prechecks and time limit). A move that fails
leaves its VM where it was, named with the error; the others go on.
"""
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.resilient.virt.plugins.module_utils.errors import VirtError

__all__ = ("run_moves", "shown_move")


def shown_move(move):
    """What a result shows of a planned move."""
    vm, candidate = move["vm"], move["candidate"]
    return {"vm": vm["name"], "state": vm["state"], "target": candidate.key,
            "hypervisor": candidate.hypervisor["name"]}


def run_moves(moves, parallel, move_one):
    """(moved, failed): ``move_one(move)`` (the vm_migrate result) for each of ``moves``;
    ``moved`` the shown moves with the mode, time and downtime of each, ``failed`` those that
    raised, with ``why``."""

    def attempt(move):
        try:
            return move, move_one(move), None
        except VirtError as err:
            return move, None, err

    moved, failed = [], []
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(moves) or 1))) as pool:
        for move, result, err in pool.map(attempt, moves):
            shown = shown_move(move)
            if err is not None:
                failed.append({"vm": shown["vm"], "why": "moving it to %s failed: %s: %s" % (
                    shown["target"], type(err).__name__, err.message)})
                continue
            migration = result["migration"]
            shown.update(mode=migration["mode"], changed=result["changed"],
                         duration_seconds=migration["duration_seconds"],
                         downtime_ms=migration["downtime_ms"])
            moved.append(shown)
    return moved, failed
