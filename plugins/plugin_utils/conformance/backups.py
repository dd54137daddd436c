# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The case of the backup hooks (``resilient_virt_backup_*``, ``hookspecs.py``), skipped where no
plugin implements backups for the backend: a backup of a stopped VM and its restore onto that
VM, followed through their handles as the ``backup`` task follows them."""
from __future__ import annotations

import json
import time
import uuid
from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils.errors import NotSupported
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.checks import (
    check_vm, expect, same, skip)
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.harness import Harness

__all__ = ("BackupCases",)

ARTIFACT_FIELDS = ("name", "vm", "incremental", "parent", "location", "size_bytes",
                   "created_at", "complete")
ENDED = ("completed", "failed", "cancelled", "missing")
WAIT = 300.0  # s: a small VM's backup or restore, on a loaded machine


def _ended(guarded: Any, handle: dict[str, Any]) -> dict[str, Any]:
    """Poll ``handle`` until its operation has ended; its last status."""
    deadline = time.monotonic() + WAIT
    while True:
        status = guarded.backup("backup_poll", handle=handle)
        expect(isinstance(status, dict) and status.get("state") in ENDED + ("running",),
               "backup_poll answers a dict whose state is one of %s, not %r"
               % (", ".join(ENDED + ("running",)), status))
        if status["state"] != "running":
            return status
        expect(time.monotonic() < deadline, "%s still runs after %gs" % (handle.get("name"), WAIT))
        time.sleep(0.2)


def _stored(guarded: Any, vm: str, record: str) -> list[dict[str, Any]]:
    return [artifact for artifact in guarded.backup("backup_list", vm=vm) if artifact["name"] == record]


class BackupCases:
    """The backup case; mixed into ``ConformanceSuite``."""

    def test_backups(self, conformance_backend: Any, tmp_path: Any) -> None:
        """A backup of a stopped VM: prepare gives a JSON-able handle, the same for the same
        request; start and poll end completed with an artifact of every field; a second start
        of the handle makes no second backup; the list has it once, complete; a restore onto
        the stopped VM completes and leaves the VM as it was made (what a restore brings back is
        each backend's own tests': the suite cannot read a disk); delete removes the backup
        from the list, and deleting again answers true."""
        with Harness(conformance_backend, tmp_path) as harness:
            guarded = harness.open()
            try:
                guarded.backup("backup_list", vm=None)
            except NotSupported:
                skip("no plugin implements backups for the %s provider (resilient_virt_backup_* "
                     "hooks)" % guarded.type_name)
            name = harness.name("backup")
            spec = harness.spec(name)
            guarded.create(spec)
            record = "conformance-%s" % uuid.uuid4().hex[:8]
            request = {"kind": "backup", "name": record, "vm": name, "incremental": False, "parent": None}
            handle = guarded.backup("backup_prepare", request=request)
            json.dumps(handle)
            same(guarded.backup("backup_prepare", request=request), handle,
                 "the handle a second backup_prepare of the same request gives")
            started = guarded.backup("backup_start", handle=handle)
            status = _ended(guarded, started)
            same(status["state"], "completed", "the state of the backup of %r" % name)
            artifact = status["artifact"]
            absent = [key for key in ARTIFACT_FIELDS if key not in artifact]
            expect(not absent, "the artifact lacks %s (hookspecs.py, backups)" % ", ".join(absent))
            json.dumps(artifact)
            same(artifact["name"], record, "the artifact's name")
            same(artifact["vm"], name, "the artifact's vm")
            same(artifact["complete"], True, "the artifact's complete")

            same(_ended(guarded, guarded.backup("backup_start", handle=started))["state"],
                 "completed", "the state after a second backup_start of the handle")
            stored = _stored(guarded, name, record)
            expect(len(stored) == 1 and stored[0]["complete"] is True,
                   "backup_list lists backup %r once and complete, not %r" % (record, stored))

            restore = {"kind": "restore", "name": record + "-restore", "vm": name,
                       "backup": stored[0], "target": name}
            restored = _ended(guarded, guarded.backup(
                "backup_start", handle=guarded.backup("backup_prepare", request=restore)))
            same(restored["state"], "completed", "the state of the restore onto %r" % name)
            check_vm(guarded.describe(name), guarded, name, spec)

            same(guarded.backup("backup_delete", artifact=artifact), True, "backup_delete's answer")
            same(_stored(guarded, name, record), [], "what backup_list lists of %r after its delete" % record)
            same(guarded.backup("backup_delete", artifact=artifact), True,
                 "backup_delete's answer for a backup already deleted")
