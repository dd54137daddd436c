# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The handles of the restores an evacuation started, kept in the state store from before the
restore starts until its VM runs on the target (namespace :data:`NAMESPACE`, key: the target
provider's key and the restore's record name).

A run killed during the copy leaves its record; the next run starts that restore again with the
kept handle (the provider's start removes what the earlier attempt of that handle left, or does
nothing while its copy still runs) instead of planning a new one, which the leftover volumes
would refuse. A record holds ``name`` (the restore's record name), ``vm``, ``provider`` (the
target's key), ``handle`` (the provider's restore handle: pools, volumes and backup by name, no
credential) and ``created_at`` (RFC 3339 UTC).
"""
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time

__all__ = ("NAMESPACE", "RestoreHandles")

NAMESPACE = "failover_restores"


def _key(provider_key, name):
    return "%s/%s" % (provider_key, name)


class RestoreHandles:
    """The restore handles kept in ``store``."""

    def __init__(self, store):
        self.store = store

    def kept(self, provider_key, name):
        """The handle of restore ``name`` on ``provider_key`` kept by an earlier run, or None."""
        record = self.store.get(NAMESPACE, _key(provider_key, name))
        return record["handle"] if record else None

    def keep(self, provider_key, name, vm, handle):
        """Keep ``handle`` of restore ``name`` of VM ``vm`` on ``provider_key``."""
        def write(_current, now):
            record = {"name": name, "vm": vm, "provider": provider_key, "handle": handle,
                      "created_at": format_time(now)}
            return record, record

        self.store.update(NAMESPACE, _key(provider_key, name), write)

    def forget(self, provider_key, name):
        """Remove the record of restore ``name`` on ``provider_key`` (none is fine)."""
        self.store.delete(NAMESPACE, _key(provider_key, name))

    def forget_vm(self, provider_key, vm):
        """Remove every record of a restore of VM ``vm`` on ``provider_key``: it runs there."""
        for key, record in self.store.items(NAMESPACE, prefix=_key(provider_key, "")).items():
            if record.get("provider") == provider_key and record.get("vm") == vm:
                self.store.delete(NAMESPACE, key)
