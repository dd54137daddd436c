"""The Proxmox VE provider: a cluster (or a single node) through its REST API, with proxmoxer.

The cluster's nodes are the hypervisors. proxmoxer (and requests under it) is imported on first
use; the login is made on first use, reused by every call of this provider object, and renewed
once when PVE says its ticket expired (``session.py``). It logs in with an API token
(``token_id`` ``user@realm!name`` and ``token_secret``), else with ``username`` and
``password``.

Security: the server certificate is verified against the system's trusted CAs, or the CAs of
``ca_path``, unless ``validate_certs`` is false (which adds a warning). Neither the password nor
the token secret appears in errors, results or ``repr()``.

Changing calls start PVE tasks, followed by their UPID until they end or ``task_timeout``
passes (``tasks.py``); ``task_status`` answers a UPID. PVE's errors are mapped into the
taxonomy by ``faults.py``: a VM that another operation holds (a backup, a migration) is a
retryable Conflict, lost quorum and an offline node are Unavailable, a full storage is
QuotaExceeded, refused parameters an InvalidSpec naming the spec's field.

This file holds the options, the login, the error mapping and the reads; ``create.py`` creates
and clones VMs, ``edit.py`` changes them, ``power.py`` powers them, ``delete.py`` deletes them
(an HA resource taken out of HA first), ``snapshots.py`` takes, lists, reverts and deletes
snapshots, ``vm_dict.py`` and
``guest.py`` make VM dicts of PVE's answers, ``spec.py`` checks specs; ``backup.py`` holds the
backup hooks (vzdump), ``restore.py`` their restores (qmrestore), ``nodes.py`` the warnings
about offline nodes and nodes in maintenance,
``recover.py`` the recovery of a failed node's VM by PVE's HA manager.
"""
import re

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    NotFound, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._connection import (
    SharedConnection, SharedConnectionMixin)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vm_schema import errors_of
from ansible_collections.resilient.virt.plugins.module_utils.providers._tls import (
    certificate_error, check_ca_path)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    SNAPSHOT_CAPABILITIES, Option, Provider, check_filters, match_filters)
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.create import (
    create as create_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.delete import (
    delete as delete_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.edit import (
    reconfigure as reconfigure_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.faults import (
    classify_exception)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.migrate import (
    migrate as migrate_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.nodes import (
    maintenance_nodes, maintenance_warning, offline_nodes, offline_warning)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.power import (
    power as power_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.session import (
    Session)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox import snapshots
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.spec import (
    MAX_NAME_LENGTH, validate_spec)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import (
    status_of, upid_node)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.vm_dict import (
    uuid_of, config_of)

__all__ = ("ProxmoxProvider", "resilient_virt_provider_types")

CLOSE_TIMEOUT = 3.0
_MIB = 1024 * 1024
# a DNS name, an IPv4 address, or an IPv6 address (bare or in brackets)
_HOST = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[?[0-9A-Fa-f:.]+\]?)$")
_TOKEN_ID = re.compile(r"^[^\s!]+@[^\s!]+![A-Za-z][A-Za-z0-9._-]*$")


class ProxmoxProvider(SharedConnectionMixin, Provider):
    """A Proxmox VE cluster: its nodes are the hypervisors."""

    type_name = "proxmox"
    capabilities = frozenset(("validate", "list_hypervisors", "list_vms", "describe", "find",
                              "create", "delete", "power", "reconfigure", "task_status", "migrate",
                              "recover")
                             + SNAPSHOT_CAPABILITIES)
    reconfigurable = frozenset(("vcpus", "memory_mb", "metadata", "tags", "autostart"))
    options = dict(Provider.options, **{
        "host": Option(required=True, env="PROXMOX_HOST",
                       doc="Host name or address of a node of the cluster (any node answers "
                           "for the whole cluster)."),
        "port": Option("int", default=8006, env="PROXMOX_PORT", doc="Port of the PVE API."),
        "username": Option(env="PROXMOX_USER", doc="User with its realm, e.g. root@pam; with "
                                                   "password (not needed with a token)."),
        "password": Option(secret=True, env="PROXMOX_PASSWORD", doc="Password of username."),
        "token_id": Option(env="PROXMOX_TOKEN_ID",
                           doc="API token id, user@realm!name (instead of username and "
                               "password)."),
        "token_secret": Option(secret=True, env="PROXMOX_TOKEN_SECRET",
                               doc="Secret of the API token token_id."),
        "validate_certs": Option("bool", default=True, env="PROXMOX_VALIDATE_CERTS",
                                 doc="Verify the server certificate. Keep true outside a lab: "
                                     "false lets a man in the middle read the credentials."),
        "ca_path": Option(env="PROXMOX_CA_PATH",
                          doc="CA certificates to verify the server with instead of the "
                              "system's: a PEM file (bundle), or a directory of them named by "
                              "subject hash (openssl rehash). For PVE's own cluster CA."),
        "timeout": Option("duration", default=60.0, doc="Time limit of each API request."),
        "task_timeout": Option("duration", default=240.0,
                               doc="How long to wait for a PVE task (create, power, ...)."),
        "storage": Option(default="local-lvm",
                          doc="Storage of new disks and cloud-init drives unless "
                              "placement.datastore (or a disk's storage) names another."),
        "bridge": Option(default="vmbr0", doc="Bridge of new NICs that name none."),
        "backup_storage": Option(default="local",
                                 doc="Storage the backup module's vzdump archives go to (its "
                                     "content must include backup)."),
    })

    def __init__(self, config, environ=None):
        super().__init__(config, environ)
        port = self.config["port"]
        if not 0 < port < 65536:
            raise field_error(self.option_path("port"), "%d is not a TCP port (1-65535)" % port)
        if not _HOST.match(self.config["host"]):
            raise field_error(self.option_path("host"), "must be a host name or an IP address only "
                              "(without scheme, user, password, port or path): put the user in "
                              "provider.username and the port in provider.port")
        self._check_credentials()
        if "ca_path" in self.config:
            self.config["ca_path"] = check_ca_path(self.config["ca_path"],
                                                   self.option_path("ca_path"))
        if not self.config["validate_certs"]:
            self.warnings.append(
                "%s is false: the certificate of %s is not verified, so a man in the middle could "
                "read the credentials; give the cluster's CA in provider.ca_path instead"
                % (self.option_path("validate_certs"), self.endpoint()))
        self._shared = SharedConnection(self._login, lambda session: None,
                                        min(CLOSE_TIMEOUT, self.config["timeout"]),
                                        "Proxmox logout from %s" % self.endpoint())

    def _check_credentials(self):
        config = self.config
        if "token_id" in config or "token_secret" in config:
            missing = [key for key in ("token_id", "token_secret") if key not in config]
            if missing:
                raise field_error(self.option_path(missing[0]), "is required with %s (an API "
                                  "token is its id and its secret)"
                                  % self.option_path(({"token_id", "token_secret"} - set(missing)).pop()))
            if not _TOKEN_ID.match(config["token_id"]):
                raise field_error(self.option_path("token_id"), "must be user@realm!tokenname, "
                                  "e.g. automation@pve!ansible")
            return
        missing = [key for key in ("username", "password") if key not in config]
        if missing:
            raise field_error(self.option_path(missing[0]), "is required: give username and "
                              "password, or an API token (token_id and token_secret)")
        if "@" not in config["username"]:
            raise field_error(self.option_path("username"), "must name its realm, e.g. root@pam "
                              "or automation@pve")

    def __repr__(self):
        return "<ProxmoxProvider %s>" % self.key

    def endpoint(self):
        return "%s:%d" % (self.config["host"], self.config["port"])

    def spec_errors(self, spec):
        return errors_of(validate_spec, spec)

    def check_name(self, name, creating=False):
        """A VM name, or ``/<node>/<vmid>`` for an existing VM where names are not unique."""
        super().check_name(name, creating)
        if len(name) > MAX_NAME_LENGTH and not name.startswith("/"):
            raise field_error("name", "%r has %d characters; Proxmox VM names have at most %d"
                              % (name[:20] + "...", len(name), MAX_NAME_LENGTH))

    # -- the login ------------------------------------------------------------------------------
    def session(self):
        """The login the backend's other files work through (``session.py``), made on first
        use."""
        return self._connection()

    def _verify(self):
        if not self.config["validate_certs"]:
            return False
        return self.config.get("ca_path") or True

    def _api(self):
        from proxmoxer import ProxmoxAPI

        config = self.config
        kwargs = dict(port=config["port"], verify_ssl=self._verify(), timeout=config["timeout"])
        if "token_id" in config:
            user, _sep, token = config["token_id"].partition("!")
            return ProxmoxAPI(config["host"], user=user, token_name=token,
                              token_value=config["token_secret"], **kwargs)
        return ProxmoxAPI(config["host"], user=config["username"], password=config["password"],
                          **kwargs)

    def _login(self):
        renew = None if "token_id" in self.config else self._api
        return Session(self._api(), self, renew)

    def classify_error(self, exc):
        """PVE's errors (``faults.py``), certificate failures and the rest of requests' with
        the provider named."""
        err = classify_exception(exc, "Proxmox VE %s" % self.endpoint()) or certificate_error(
            exc, self.config, "Proxmox VE endpoint %s" % self.endpoint(),
            self.option_path("ca_path"))
        if err is None:
            return None
        message = self.scrub("%s (%s)" % (err.message, self.key))
        err.message = message
        err.args = (message,)
        return err

    # -- operations -----------------------------------------------------------------------------
    def validate(self):
        session = self.session()
        version = session.get("version")
        status = session.get("cluster", "status") or []
        cluster = next((s for s in status if s.get("type") == "cluster"), {})
        return {"endpoint": "https://%s" % self.endpoint(), "product": "Proxmox VE",
                "version": version.get("version"), "release": version.get("release"),
                "cluster": cluster.get("name"), "quorate": bool(cluster.get("quorate", 1)),
                "nodes": sorted(s.get("name") for s in status if s.get("type") == "node"),
                "auth": "token" if "token_id" in self.config else "password",
                "warnings": list(self.warnings)}

    def list_hypervisors(self):
        session = self.session()
        records = session.resources()
        return self._hypervisors(records, self._node_health(session, records))

    def _node_health(self, session, records):
        """A warning per node that ``/cluster/resources`` entries show offline, and per node in
        maintenance (``nodes.py``); the names of those in maintenance."""
        maintenance = maintenance_nodes(session, records)
        warnings = [offline_warning(self.key, node) for node in offline_nodes(records)]
        warnings += [maintenance_warning(self.key, node) for node in maintenance]
        self.warnings.extend(w for w in warnings if w not in self.warnings)
        return maintenance

    def _hypervisors(self, records, maintenance=()):
        """The hypervisor dicts of the nodes of a ``/cluster/resources`` answer: an offline node
        is disconnected, one of ``maintenance`` in maintenance."""
        counts = {}
        for record in records:
            if record.get("type") == "qemu":
                counts[record.get("node")] = counts.get(record.get("node"), 0) + 1
        hosts = []
        for record in records:
            if record.get("type") != "node":
                continue
            online = record.get("status") == "online"
            state = "disconnected" if not online else (
                "maintenance" if record.get("node") in maintenance else "connected")
            cores = record.get("maxcpu")
            hosts.append({
                "name": record.get("node"), "az": self.config["az"], "cpu": cores,
                "memory_mb": (record.get("maxmem") or 0) // _MIB if online else None,
                "used_cpu": round((record.get("cpu") or 0) * cores, 2) if online and cores else None,
                "used_memory_mb": (record.get("mem") or 0) // _MIB if online else None,
                "state": state,
                "traits": sorted(self.config["traits"]),
                "vm_count": counts.get(record.get("node"), 0)})
        return sorted(hosts, key=lambda h: h["name"])

    def list_vms(self, filters=None):
        check_filters(filters)
        session = self.session()
        vms = [session.summary(record) if record.get("status") == "unknown"
               else session.describe(record) for record in self._listed(session, filters)]
        return sorted((vm for vm in vms if match_filters(vm, filters)),
                      key=lambda vm: vm["name"] or "")

    def list_vm_summaries(self, filters=None):
        """list_vms from ``/cluster/resources`` and each VM's configuration (for its metadata,
        where a fleet's owner marker lives), without ``status/current`` and the guest agent: a
        paused VM shows as running, and no guest addresses."""
        check_filters(filters)
        session = self.session()
        vms = [session.summary(record) for record in self._listed(session, filters)]
        return sorted((vm for vm in vms if match_filters(vm, filters)),
                      key=lambda vm: vm["name"] or "")

    def list_hypervisors_and_vms(self, filters=None):
        """Nodes and VM summaries of one ``/cluster/resources`` request, whatever the size of
        the cluster: the VMs without what only their configuration holds (``uuid``,
        ``metadata``, ``autostart``, the datastore); an offline node is a disconnected
        hypervisor and its VMs are ``unknown``; the HA manager is asked too when the cluster has
        HA resources (a node in maintenance, ``nodes.py``)."""
        check_filters(filters)
        session = self.session()
        records = session.resources()
        maintenance = self._node_health(session, records)
        vms = [session.entry_summary(record)
               for record in self._listed(session, filters, session.qemu_of(records))]
        return {"hypervisors": self._hypervisors(records, maintenance),
                "vms": sorted((vm for vm in vms if match_filters(vm, filters)),
                              key=lambda vm: vm["name"] or "")}

    def _listed(self, session, filters, records=None):
        """The ``/cluster/resources`` entries of the VMs (``records``, else the cluster's, with
        the warnings of :meth:`_node_health`) that pass the filters the entries answer (name,
        hypervisor). A VM of an offline node (status ``unknown``) cannot be read further: the
        lists show it from these entries alone."""
        if records is None:
            records = session.vm_resources()
            self._node_health(session, records)
        if filters and "name" in filters:
            import fnmatch

            records = [r for r in records if fnmatch.fnmatchcase(r.get("name") or "",
                                                                 filters["name"])]
        if filters and "hypervisor" in filters:
            records = [r for r in records if r.get("node") == filters["hypervisor"]]
        return records

    def describe(self, name):
        """The VM dict; a VM of an offline node (status ``unknown``) from its cluster entry
        alone, as the lists show it (its node would answer for the rest)."""
        session = self.session()
        record = session.find_vm(name)
        if record.get("status") == "unknown":
            return session.entry_summary(record)
        return session.describe(record, name)

    def find(self, uuid):
        """The name of the VM whose SMBIOS uuid is given, or ``/<node>/<vmid>`` when its name
        is not unique."""
        session = self.session()
        records = session.vm_resources()
        for record in records:
            config = config_of(session.get("nodes", record["node"], "qemu", record["vmid"],
                                           "pending"))[0]
            if (uuid_of(config) or "").lower() == uuid.lower():
                same = [r for r in records if r.get("name") == record.get("name")]
                return record["name"] if len(same) == 1 else "/%s/%s" % (record["node"],
                                                                         record["vmid"])
        raise NotFound("no VM with uuid %s on %s" % (uuid, self.key))

    def create(self, spec):
        return create_vm(self, spec)

    def delete(self, name):
        """Out of HA, stopped, then destroyed with its disks (``delete.py``)."""
        return delete_vm(self, name)

    def power(self, name, action, timeout=None):
        return power_vm(self, name, action, timeout)

    def reconfigure(self, name, vcpus=None, memory_mb=None, metadata=None, tags=None,
                    autostart=None):
        return reconfigure_vm(self, name, vcpus, memory_mb, metadata, tags, autostart)

    def migrate(self, name, hypervisor, resource_pool=None, datastore=None):
        """To the node ``hypervisor`` by PVE's migration (``migrate.py``)."""
        return migrate_vm(self, name, hypervisor, resource_pool, datastore)

    def recover(self, name, hypervisor):
        """On the node ``hypervisor``, from a failed, fenced node, by PVE's HA manager
        (``recover.py``)."""
        from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.recover import (
            recover as recover_vm)  # only an evacuation of a failed host needs it

        return recover_vm(self, name, hypervisor)

    def task_status(self, task_id):
        """State of the PVE task ``task_id`` (a UPID): running, success or error."""
        upid_node(task_id)
        return status_of(self.session(), task_id)

    # -- snapshots (snapshots.py) -----------------------------------------------------------------
    def list_snapshots(self, name):
        return snapshots.list_snapshots(self, name)

    def create_snapshot(self, name, snapshot, description="", memory=False, quiesce=False):
        return snapshots.create_snapshot(self, name, snapshot, description, memory, quiesce)

    def delete_snapshot(self, name, snapshot):
        return snapshots.delete_snapshot(self, name, snapshot)

    def revert_snapshot(self, name, snapshot):
        return snapshots.revert_snapshot(self, name, snapshot)


@hookimpl
def resilient_virt_provider_types():
    return {ProxmoxProvider.type_name: ProxmoxProvider}
