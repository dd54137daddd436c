"""One login to a Proxmox VE cluster and what every operation of the backend reads through it.

``ProxmoxProvider`` makes a :class:`Session` per login (its ``session()``), reused by every call
of the provider object until the login is dropped; the files of the backend get it instead of
the provider's private members. Requests go through :meth:`Session.request`: with a user and
password, a 401 about the login ticket (it expired, or the cluster forgot it) logs in again
once and repeats the request, which PVE refused before doing anything. An API token never
expires that way.
"""
import re

from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, NotFound
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import new_vm
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.faults import (
    is_expired_ticket)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.guest import (
    ask_agent, assign_addresses)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.vm_dict import (
    agent_enabled, config_of, disks_of, interfaces_of, metadata_of, state_of, tags_of, uuid_of,
    vcpus_of)

__all__ = ("Session",)

_MIB = 1024 * 1024
# ``/<node>/<vmid>``: a VM addressed where names are not unique (what ``find`` returns then)
_REFERENCE = re.compile(r"^/([A-Za-z0-9][A-Za-z0-9.-]*)/([1-9][0-9]*)$")


class Session:
    """One login: ``api`` (the ProxmoxAPI), ``provider`` (its ``key``, ``config``, ``warnings``,
    ``started``, ``scrub``), ``login()`` (a new ProxmoxAPI, for a ticket that expired), and the
    lookups below."""

    def __init__(self, api, provider, login):
        self.api = api
        self.provider = provider
        self._login = login
        self.renewed = 0  # logins made again because the ticket had expired

    def request(self, method, *path, **params):
        """``method`` on ``/api2/json/<path>`` with ``params``; PVE's ``data``."""
        try:
            return self.api(list(map(str, path)))._request(method, **self._arguments(method, params))
        except Exception as exc:  # noqa: BLE001 - re-raised unless it is an expired ticket
            if not (is_expired_ticket(exc) and self._login is not None):
                raise
        self.api = self._login()
        self.renewed += 1
        return self.api(list(map(str, path)))._request(method, **self._arguments(method, params))

    @staticmethod
    def _arguments(method, params):
        return {"params": params} if method in ("GET", "DELETE") else {"data": params}

    def get(self, *path, **params):
        return self.request("GET", *path, **params)

    def post(self, *path, **params):
        return self.request("POST", *path, **params)

    def put(self, *path, **params):
        return self.request("PUT", *path, **params)

    def delete(self, *path, **params):
        return self.request("DELETE", *path, **params)

    # -- lookups ------------------------------------------------------------------------------
    def resources(self, kind=None):
        """``/cluster/resources`` (of ``kind`` vm, node or storage when given): one request for
        the whole cluster."""
        return self.get("cluster", "resources", **({"type": kind} if kind else {})) or []

    def vm_resources(self):
        """The cluster's QEMU VMs (not containers), templates included."""
        return self.qemu_of(self.resources("vm"))

    @staticmethod
    def qemu_of(records):
        """The QEMU VMs among ``/cluster/resources`` entries."""
        return [r for r in records if r.get("type") == "qemu"]

    def find_vm(self, name, records=None):
        """The ``/cluster/resources`` entry of the VM named ``name`` (or ``/<node>/<vmid>``);
        NotFound, or Conflict when several VMs have that name."""
        records = self.vm_resources() if records is None else records
        reference = _REFERENCE.match(name)
        if reference:
            found = [r for r in records if r.get("node") == reference.group(1)
                     and str(r.get("vmid")) == reference.group(2)]
        else:
            found = [r for r in records if r.get("name") == name]
        if not found:
            raise NotFound("VM %r not found on %s" % (name, self.provider.key))
        if len(found) > 1:
            raise Conflict("%d VMs are named %r on %s (VM ids %s); address the one you mean by "
                           "its uuid, or as /<node>/<vmid>" % (
                               len(found), name, self.provider.key,
                               ", ".join(str(r.get("vmid")) for r in found)))
        return found[0]

    def describe(self, record, name=None, guest=True):
        """The VM dict of the VM of ``record`` (its ``/cluster/resources`` entry); ``guest``
        False skips the guest agent."""
        node, vmid = record["node"], record["vmid"]
        config, waiting = config_of(self.get("nodes", node, "qemu", vmid, "pending"))
        current = None
        if record.get("status") == "running":
            current = self.get("nodes", node, "qemu", vmid, "status", "current")
        interfaces = interfaces_of(config)
        guest_info, found = {"agent": False, "agent_state": None, "os": None, "hostname": None}, {}
        if agent_enabled(config):
            guest_info["agent_state"] = "not_running"
            if guest and current is not None and current.get("qmpstatus") == "running":
                guest_info, found = ask_agent(self, node, vmid)
        return self._vm(record, config, name, current, interfaces,
                        addresses=assign_addresses(interfaces, found), guest=guest_info,
                        restart_required=waiting)

    def summary(self, record):
        """The VM dict of a ``/cluster/resources`` entry and the VM's configuration (one
        request, none for a VM of an offline node: listed from the entry alone), without
        ``status/current`` and the guest agent (what ``list_vm_summaries`` gives)."""
        if record.get("status") == "unknown":
            return self.entry_summary(record)
        config = self.get("nodes", record["node"], "qemu", record["vmid"], "config") or {}
        return self._vm(record, config, interfaces=interfaces_of(config))

    def entry_summary(self, record):
        """The VM dict of a ``/cluster/resources`` entry alone: no request; ``uuid``,
        ``metadata``, ``autostart`` and the datastore unknown (only the configuration holds
        them)."""
        placement = {"host": record.get("node")}
        if record.get("pool"):
            placement["resource_pool"] = record["pool"]
        return new_vm(
            self.provider, record.get("name"), hypervisor=record.get("node"),
            state=state_of(record, None, record.get("lock")),
            vcpus=record.get("maxcpu"), memory_mb=(record.get("maxmem") or 0) // _MIB,
            tags=tags_of(record.get("tags")), placement=placement)

    def _vm(self, record, config, name=None, current=None, interfaces=(), **more):
        node = record["node"]
        disks = disks_of(config)
        placement = {"host": node, "datastore": disks[0]["storage"] if disks else None}
        if record.get("pool"):
            placement["resource_pool"] = record["pool"]
        return new_vm(
            self.provider, name or config.get("name") or record.get("name"),
            uuid=uuid_of(config), hypervisor=node,
            state=state_of(record, current, config.get("lock") or record.get("lock")),
            vcpus=vcpus_of(config), memory_mb=int(config.get("memory") or 512), disks=disks,
            interfaces=list(interfaces), metadata=metadata_of(config.get("description")),
            tags=tags_of(config.get("tags")),
            autostart=str(config.get("onboot", "0")) in ("1", "true"), placement=placement,
            **more)
