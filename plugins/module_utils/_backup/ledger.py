# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The records one task works on: reads, and writes as their owner under a lease.

Writes that leave InProgress or reach a final phase go through ``status_write`` (retried until
``resource_timeout``); the others make one attempt. A lease renewal that fails is not fatal:
the work goes on, and the failure becomes a warning (another run may adopt the record when its
lease expires; the version and owner checks keep the two from both writing its outcome).
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._backup import records, status_write
from ansible_collections.resilient.virt.plugins.module_utils._backup.phases import FINAL, is_critical
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, StoreUnavailable

__all__ = ("Ledger",)


class Ledger:
    """Records of ``open_store()`` written as ``owner`` with leases of ``lease`` seconds."""

    def __init__(self, open_store, owner, lease, resource_timeout, sleep=time.sleep,
                 clock=time.monotonic):
        self.open_store = open_store
        self.owner = owner
        self.lease = float(lease)
        self.resource_timeout = float(resource_timeout)
        self.sleep = sleep
        self.clock = clock
        self.warnings = []

    def now(self):
        return self.open_store().now()

    def get(self, name):
        return self.open_store().get(records.NAMESPACE, name)

    def all(self):
        """Every record, oldest first."""
        found = self.open_store().items(records.NAMESPACE)
        return sorted(found.values(), key=lambda r: (r.get("created_at") or "", r["name"]))

    def create(self, record):
        """Write the new ``record``; Conflict when its name is taken."""
        def add(current, _now):
            if current is not None:
                raise Conflict("a backup record named %s exists already (%s of %s, phase %s); "
                               "choose another name or leave name unset"
                               % (record["name"], current["kind"], current["vm"], current["phase"]))
            return record, record

        return self.open_store().update(records.NAMESPACE, record["name"], add)

    def move(self, record, phase=None, override=False, **fields):
        """The record after moving it to ``phase`` with ``fields``; critical writes retried."""
        critical = phase is not None and is_critical(record["phase"], phase)
        lease = None if phase in FINAL else self.lease
        fn = records.change(record["name"], self.owner, phase, lease=lease, override=override,
                            **fields)
        what = "the move to %s" % (phase or record["phase"])  # the write names the record
        return status_write.write(self.open_store, records.NAMESPACE, record["name"], fn,
                                  critical, self.resource_timeout, what=what, sleep=self.sleep,
                                  clock=self.clock)[0]

    def take(self, record):
        """Take over ``record`` (its lease expired): it is ours for a new lease."""
        fn = records.change(record["name"], self.owner, lease=self.lease,
                            version=record.get("version"))
        return self.open_store().update(records.NAMESPACE, record["name"], fn)[0]

    def give_back(self, record, previous):
        """Give back ``record``, taken over (``take``) from ``previous``: its owner and lease as
        they were, anything else as it is now (``records.give_back``). One attempt: a failure is
        a warning (the record then stays ours until our lease runs out)."""
        fn = records.give_back(record["name"], self.owner, previous)
        try:
            return self.open_store().update(records.NAMESPACE, record["name"], fn)[0]
        except Exception as err:  # noqa: BLE001 - the adoption's own error is the one to raise
            self.warnings.append("%s was not given back after its adoption failed, so a later "
                                 "run adopts it only once this run's lease runs out (%s): %s"
                                 % (record["name"], record.get("lease_until"),
                                    getattr(err, "message", None) or str(err)))
            return record

    def renew(self, record, lease=None, **fields):
        """Renew our lease for ``lease`` seconds (default: the ledger's; 0 releases it) and write
        ``fields``, e.g. progress; a store failure is a warning."""
        fn = records.change(record["name"], self.owner, lease=self.lease if lease is None else lease,
                            **fields)
        try:
            return self.open_store().update(records.NAMESPACE, record["name"], fn)[0]
        except StoreUnavailable as err:
            warning = "the lease of %s was not renewed: %s" % (record["name"], err.message)
            if warning not in self.warnings:
                self.warnings.append(warning)
            return record

    def remove(self, record):
        self.open_store().delete(records.NAMESPACE, record["name"])
