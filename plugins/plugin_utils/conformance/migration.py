# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The case of ``migrate_to`` (moving a VM to another provider of the same backend), which needs
a second endpoint: :class:`MigrationCases`, mixed into a backend's test class beside
``ConformanceSuite``, takes the fixture ``conformance_migration_target`` (the provider dict of
that second endpoint, or None when the environment has none: the case is then skipped)."""
from __future__ import annotations

from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, NotFound
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.checks import (
    declared, expect, raised, same, skip)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.faults import (
    Attempts, LostReply)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.harness import Harness

__all__ = ("MigrationCases",)


def _gone(guarded: Any, name: str) -> bool:
    try:
        guarded.describe(name)
    except NotFound:
        return True
    return False


class MigrationCases:
    """Cases of the ``migrate_to`` capability (``hookspecs.py``, "migration")."""

    def test_migrate_to(self, conformance_backend: Any, conformance_migration_target: Any,
                        tmp_path: Any) -> None:
        """A running VM moves to the target and runs there, this provider has it no more, and
        a first attempt whose reply is lost is not done again; a target that has a VM of that
        name is Conflict, tried once, and nothing moves."""
        with Harness(conformance_backend, tmp_path) as harness:
            attempts = Attempts()
            guarded = harness.open(plugins=(LostReply("migrate_to"), attempts))
            declared(guarded, "migrate_to")
            if conformance_migration_target is None:
                skip("the test environment has no second endpoint of the %s backend"
                     % guarded.type_name)
            target = harness.open(conformance_migration_target)
            name, taken = harness.name("migrate-to"), harness.name("migrate-taken")
            try:
                self._moves(harness, guarded, target, name, attempts)
                self._refused(harness, guarded, target, taken, attempts)
            finally:
                for leftover in (name, taken):
                    try:
                        target.delete(leftover)
                    except NotFound:
                        pass

    @staticmethod
    def _moves(harness: Any, guarded: Any, target: Any, name: str, attempts: Any) -> None:
        guarded.create(harness.spec(name))
        guarded.power(name, "on")
        moved = guarded.migrate_to(name, target)
        expect(isinstance(moved, dict) and moved.get("vm", {}).get("name") == name, moved)
        there = target.describe(name)
        same(there["state"], "running", "the state of the moved VM on the target")
        expect(_gone(guarded, name), "the source still has %r after the move" % name)
        expect(attempts.outcomes("migrate_to") == ["error", "ok"], attempts.ended)
        expect(attempts.started.count("migrate_to") == 1, "the VM was moved twice")

    @staticmethod
    def _refused(harness: Any, guarded: Any, target: Any, name: str, attempts: Any) -> None:
        guarded.create(harness.spec(name))
        target.create(harness.spec(name))
        before = attempts.started.count("migrate_to")
        err = raised(guarded.migrate_to, name, target)
        expect(isinstance(err, Conflict), "a move onto a VM of the same name raised %r, not "
               "Conflict" % (err,))
        same(attempts.started.count("migrate_to") - before, 1, "the attempts of a refused move")
        same(guarded.describe(name)["state"], "stopped", "the VM's state after a refused move")
