"""The vSphere provider: a vCenter (or ESXi host) through pyVmomi's SOAP API.

Hosts (HostSystems) are the hypervisors; a host's cluster is its availability zone. pyVmomi
(62 ms to import, python3 -X importtime) is imported on first use, inside the functions of this
package that use it; the session is opened on first use, reused by every call of this provider
object and logged out by ``close()``, which never waits more than a few seconds.
Reads use one PropertyCollector call per query instead of one SOAP call per attribute.

Security: ``protocol`` is https and the server certificate is verified against the system's
trusted CAs, or the CAs of ``ca_path``, unless ``validate_certs`` is false
(``providers/_tls.py``); plain http is used only when asked for (``protocol: http``, e.g. a
simulator on loopback). Either choice adds a message to ``warnings``. The password never
appears in errors, results or ``repr()``.

Asynchronous vSphere tasks are polled until they end or ``task_timeout`` passes; the Timeout
then carries the task id (``details.task_id``) for ``task_status``. A call abandoned by the
caller's time limit stops polling at its next poll.

This file holds the provider's options, its sessions, its error mapping and the reads; the
files of the package get a login's ``Session`` (``session.py``: the lookups every operation
makes) and do the rest: ``create.py`` creates and clones VMs, ``edit.py`` changes and moves them
(``reconfigure``, ``migrate``), ``recover.py`` registers a failed host's VMs on another host,
``power.py`` powers them, ``backup.py`` takes snapshots. Where a
VM goes and where it is (``placement``) is worked out by ``location.py``; a VM listing reads
the folders and resource pools above its VMs in the same query as the VMs. Guest information
comes from VMware Tools, in the same read as the rest.

Tags are vSphere tags of the ``tag_category`` category, kept in vCenter's REST API
(``tagging.py``): its session is opened on the first VM dict or tag change, with the same TLS
settings (by a VM listing, in a thread while its SOAP query runs). An endpoint without that
API (an ESXi host) has no tags: VM dicts show none, and setting one raises NotSupported.
"""
import re
import socket

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import run_with_timeout
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    NotFound, NotSupported, Timeout, Unavailable, classify, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._connection import (
    SharedConnection, SharedConnectionMixin)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vm_schema import errors_of
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.tagging import TagClient
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    CAPABILITIES, Option, Provider, check_filters, match_filters)
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.faults import (
    SESSION_LOST, classify_fault, fault_name)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
    MAX_NAME_LENGTH, validate_spec)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.create import (
    create as create_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.edit import (
    migrate as migrate_vm, reconfigure as reconfigure_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.maintenance import (
    set_maintenance as set_host_maintenance)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.power import (
    power as power_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers._tls import (
    certificate_error, check_ca_path, ssl_context)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    VM_PATHS, custom_values, host_fields, retrieve, retrieve_view)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.location import (
    TREE_PATHS, Tree)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.session import (
    Session)

__all__ = ("VSphereProvider", "resilient_virt_provider_types")

CLOSE_TIMEOUT = 3.0
_TASK_STATES = {"queued": "running", "running": "running", "success": "success",
                "error": "error"}


def _lost_view(exc):
    """True for ManagedObjectNotFound about a ContainerView (they die with their session)."""
    obj = getattr(exc, "obj", None)
    return fault_name(exc) == "vmodl.fault.ManagedObjectNotFound" and \
        type(obj).__name__ == "vim.view.ContainerView"


# a DNS name, an IPv4 address, or an IPv6 address (bare or in brackets)
_HOST = re.compile(r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[?[0-9A-Fa-f:.]+\]?)$")


def _logout(session):
    try:
        session.content.sessionManager.Logout()
    finally:
        session.si._stub.DropConnections()


class VSphereProvider(SharedConnectionMixin, Provider):
    """A vCenter or ESXi endpoint: every capability of the contract but ``migrate_to`` (its
    VMs move between the hosts of one provider, with ``migrate``)."""

    type_name = "vsphere"
    capabilities = frozenset(CAPABILITIES) - {"migrate_to"}
    reconfigurable = frozenset(("vcpus", "memory_mb", "metadata", "tags", "disks", "interfaces",
                                "placement"))
    options = dict(Provider.options, **{
        "host": Option(required=True, env="VMWARE_HOST", aliases=("hostname",),
                       doc="vCenter or ESXi host name or address (alias hostname, as in "
                           "community.vmware)."),
        "port": Option("int", default=443, env="VMWARE_PORT", doc="Port of the SOAP API (/sdk)."),
        "protocol": Option(default="https", choices=("https", "http"),
                           doc="https; http only for a simulator or lab on loopback."),
        "username": Option(required=True, env="VMWARE_USER",
                           doc="User name, e.g. administrator@vsphere.local."),
        "password": Option(secret=True, required=True, env="VMWARE_PASSWORD", doc="Password of username."),
        "validate_certs": Option("bool", default=True, env="VMWARE_VALIDATE_CERTS",
                                 doc="Verify the server certificate (https). Keep true outside "
                                     "a lab: false lets a man in the middle read the password."),
        "ca_path": Option(env="VMWARE_CA_PATH",
                          doc="CA certificates to verify the server with instead of the "
                              "system's: a PEM file (bundle), or a directory of them named by "
                              "subject hash (openssl rehash). For a vCenter behind a private CA."),
        "datacenter": Option(doc="Only use this datacenter (default: all)."),
        "timeout": Option("duration", default=60.0,
                          doc="Time limit of the login and of each SOAP request."),
        "task_timeout": Option("duration", default=240.0,
                               doc="How long to wait for a vSphere task (create, power, ...)."),
        "traits_attribute": Option(default="traits",
                                   doc="Host custom attribute holding comma-separated traits."),
        "tag_category": Option(default="resilient.virt",
                               doc="vSphere tag category of the tags of VMs (vCenter's REST "
                                   "API; created when a tag is first set)."),
    })

    def __init__(self, config, environ=None):
        super().__init__(config, environ)
        port = self.config["port"]
        if not 0 < port < 65536:
            raise field_error(self.option_path("port"), "%d is not a TCP port (1-65535)" % port)
        if not _HOST.match(self.config["host"]):
            raise field_error(self.option_path("host"), "must be a host name or an IP address only "
                              "(without scheme, user, password, port or path): put the user "
                              "in provider.username, the password in "
                              "provider.password and the port in provider.port")
        if "ca_path" in self.config:
            self.config["ca_path"] = check_ca_path(self.config["ca_path"], self.option_path("ca_path"))
        if self.config["protocol"] == "http":
            self.warnings.append(
                "provider.protocol is http: the session with %s, password included, is not "
                "encrypted; use https outside a loopback lab" % self.endpoint())
        elif not self.config["validate_certs"]:
            self.warnings.append(
                "%s is false: the certificate of %s is not verified, so a man in the middle could "
                "read the password; give the server's CA in provider.ca_path instead"
                % (self.option_path("validate_certs"), self.endpoint()))
        self._shared = SharedConnection(self._login, _logout,
                                        min(CLOSE_TIMEOUT, self.config["timeout"]),
                                        "vSphere logout from %s" % self.endpoint())
        self._rest = SharedConnection(self._rest_login, lambda client: client.close(),
                                      min(CLOSE_TIMEOUT, self.config["timeout"]),
                                      "vSphere REST logout from %s" % self.endpoint())
        self._no_rest = None  # why the endpoint has no tags, once known

    def __repr__(self):
        return "<VSphereProvider %s>" % self.key

    def endpoint(self):
        return "%s:%d" % (self.config["host"], self.config["port"])

    def spec_errors(self, spec):
        return errors_of(validate_spec, spec)

    def check_name(self, name, creating=False):
        """A VM name, or an existing VM's inventory path (``/DC0/vm/team-a/web1``), which names
        it where names are not unique."""
        super().check_name(name, creating)
        leaf = name.rsplit("/", 1)[-1] if name.startswith("/") and not creating else name
        if len(leaf) > MAX_NAME_LENGTH:
            raise field_error("name", "%r has %d characters; vSphere VM names have at most %d"
                              % (leaf[:20] + "...", len(leaf), MAX_NAME_LENGTH))

    # -- sessions -----------------------------------------------------------------------------
    def session(self):
        """The login the backend's other files work through (``session.py``), made on first
        use."""
        return self._connection()

    def _ssl_context(self):
        """The TLS context of both APIs (None for http): see ``providers/_tls.py``."""
        return ssl_context(self.config)

    def _login(self):
        from pyVim.connect import SmartConnect

        kwargs = dict(protocol=self.config["protocol"], host=self.config["host"],
                      port=self.config["port"], user=self.config["username"],
                      pwd=self.config["password"], sslContext=self._ssl_context(),
                      httpConnectionTimeout=self.config["timeout"])
        return run_with_timeout(
            lambda: Session(SmartConnect(**kwargs), self, self._tag_client, self._require_tags),
            self.config["timeout"], "vSphere login to %s" % self.endpoint())

    def _rest_login(self):
        return TagClient(self.config, self._ssl_context(), self.scrub,
                         lambda exc, where: certificate_error(exc, self.config, where,
                                                              self.option_path("ca_path")))

    def _tags(self):
        """The REST session for tags, logged in on first use and again once it ended."""
        client = self._rest.get()
        if not client.alive:
            self._rest.abandon()
            client = self._rest.get()
        return client

    def _tag_client(self, session):
        """The REST session for tags, or None when the endpoint serves no vSphere Automation
        API (an ESXi host; ``_no_rest`` then says why)."""
        if self._no_rest is None and session.content.about.apiType != "VirtualCenter":
            self._no_rest = ("%s is an ESXi host (%s), which has no vSphere Automation API (tags "
                             "need vCenter); point provider.host at a vCenter or remove tags"
                             % (self.endpoint(), session.content.about.apiType))
        if self._no_rest is not None:
            return None
        try:
            return self._tags()
        except NotSupported as err:
            self._no_rest = err.message
            return None

    def _require_tags(self, session):
        """The REST session for tags; NotSupported saying why the endpoint has none."""
        client = self._tag_client(session)
        if client is None:
            raise NotSupported("vsphere provider %s cannot set tags: %s" % (self.key,
                                                                            self._no_rest))
        return client

    def abandon(self):
        self._shared.abandon()
        self._rest.abandon()

    def close(self):
        self._shared.close()
        self._rest.close()

    def classify_error(self, exc):
        """pyVmomi faults, vSphere HTTP and connection failures, with the endpoint named.

        A lost session (expired, or its container views gone) is dropped, so a retry logs in.
        """
        err = classify_fault(exc) or certificate_error(
            exc, self.config, "vSphere endpoint %s" % self.endpoint(), self.option_path("ca_path"))
        if err is None:
            err = self._network_error(exc)
        if err is None:
            return None
        if fault_name(exc) == SESSION_LOST or _lost_view(exc):
            self.abandon()
            err = Unavailable("vSphere session on %s was lost (%s); the next call logs in again"
                              % (self.endpoint(), fault_name(exc)), cause=exc)
        message = "%s (%s)" % (err.message, self.key)
        err.message = message
        err.args = (message,)
        return err

    def _network_error(self, exc):
        if isinstance(exc, (socket.timeout, TimeoutError)):
            return Timeout("vSphere endpoint %s did not answer within %gs"
                           % (self.endpoint(), self.config["timeout"]), cause=exc)
        if isinstance(exc, ConnectionError):
            return Unavailable("cannot reach vSphere endpoint %s: %s: %s"
                               % (self.endpoint(), type(exc).__name__, exc), cause=exc)
        return None

    def _traits(self, props, field_names):
        traits = set(self.config["traits"])
        text = custom_values(props, field_names).get(self.config["traits_attribute"]) or ""
        traits.update(t.strip() for t in text.split(",") if t.strip())
        return sorted(traits)

    # -- operations -----------------------------------------------------------------------------
    def validate(self):
        session = self.session()
        about = session.content.about
        session.root()  # checks provider.datacenter
        return {"endpoint": "%s://%s" % (self.config["protocol"], self.endpoint()),
                "product": about.fullName, "api_type": about.apiType,
                "api_version": about.apiVersion, "instance_uuid": about.instanceUuid,
                "datacenter": self.config.get("datacenter"), "warnings": list(self.warnings)}

    def list_hypervisors(self):
        session = self.session()
        records = session.host_records()
        field_names = session.field_names([props for ref, props, az in records])
        hosts = [host_fields(props, az, self._traits(props, field_names))
                 for ref, props, az in records]
        return sorted(hosts, key=lambda h: h["name"])

    def list_vms(self, filters=None, paths=VM_PATHS):
        from pyVmomi import vim

        check_filters(filters)
        session = self.session()
        tags_of = session.tags_of_soon()
        view = session.view([vim.VirtualMachine])
        wanted = dict((getattr(vim, kind), kind_paths) for kind, kind_paths in TREE_PATHS.items())
        wanted[vim.VirtualMachine] = paths
        found = retrieve_view(session.content, view, wanted, ancestors=True)
        top = session.content.rootFolder._moId
        tree = Tree([(ref, props) for ref, props in found
                     if not isinstance(ref, vim.VirtualMachine) and ref._moId != top])
        found = [(ref, props) for ref, props in found if isinstance(ref, vim.VirtualMachine)]
        vms = [vm for vm in session.vm_dicts(found, tree, tags_of)
               if match_filters(vm, filters)]
        return sorted(vms, key=lambda vm: vm["name"] or "")

    def list_vm_summaries(self, filters=None):
        """list_vms without the device list (disks and interfaces left empty): the devices are
        most of what the query returns and parses."""
        return self.list_vms(filters, [p for p in VM_PATHS if p != "config.hardware.device"])

    def describe(self, name):
        session = self.session()
        return session.describe(session.find_vm(name), name)

    def find(self, uuid):
        """The inventory path (``/DC0/vm/team-a/web1``) of the VM whose ``uuid`` (its instance
        UUID, as VM dicts show it) is given: it names that VM even where names are not unique."""
        from pyVmomi import vim

        session = self.session()
        root = session.root()
        ref = session.content.searchIndex.FindByUuid(
            datacenter=root if isinstance(root, vim.Datacenter) else None, uuid=uuid,
            vmSearch=True, instanceUuid=True)
        found = retrieve(session.content, [ref], {vim.VirtualMachine: ["name"]}) if ref else []
        if not found:
            raise NotFound("no VM with uuid %s on %s" % (uuid, self.key))
        path = [found[0][1]["name"]]
        entity, top = ref.parent, session.content.rootFolder._moId
        while entity is not None and entity._moId != top:  # up to the datacenter
            path.insert(0, entity.name)
            entity = entity.parent
        return "/" + "/".join(path)

    def create(self, spec):
        return create_vm(self, spec)

    def delete(self, name):
        session = self.session()
        ref = session.find_vm(name)
        if session.power_state(ref) != "poweredOff":
            session.wait(ref.PowerOffVM_Task(), "powering off VM %r" % name)
        session.wait(ref.Destroy_Task(), "deleting VM %r" % name)

    def power(self, name, action, timeout=None):
        return power_vm(self, name, action, timeout)

    def reconfigure(self, name, vcpus=None, memory_mb=None, metadata=None, tags=None,
                    disks=None, interfaces=None, autostart=None, placement=None):
        return reconfigure_vm(self, name, vcpus, memory_mb, metadata, tags, disks, interfaces,
                              autostart, placement)

    def migrate(self, name, hypervisor, resource_pool=None, datastore=None):
        return migrate_vm(self, name, hypervisor, resource_pool, datastore)

    def recover(self, name, hypervisor):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.recover import (
            recover as recover_vm)  # only an evacuation of a failed host needs it

        return recover_vm(self, name, hypervisor)

    def set_maintenance(self, hypervisor, enabled):
        return set_host_maintenance(self, hypervisor, enabled)

    # imported in each: only a snapshot task needs snapshots.py and snapshot_tree.py (6.5 ms in
    # a fresh process without bytecode files, python3 -X importtime)
    def list_snapshots(self, name):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere import snapshots

        return snapshots.list_snapshots(self, name)

    def create_snapshot(self, name, snapshot, description="", memory=False, quiesce=False):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere import snapshots

        return snapshots.create_snapshot(self, name, snapshot, description, memory, quiesce)

    def delete_snapshot(self, name, snapshot):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere import snapshots

        return snapshots.delete_snapshot(self, name, snapshot)

    def revert_snapshot(self, name, snapshot):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere import snapshots

        return snapshots.revert_snapshot(self, name, snapshot)

    def task_status(self, task_id):
        """State of vSphere task ``task_id`` (e.g. task-123): running, success or error."""
        from pyVmomi import vim

        if not isinstance(task_id, str) or not task_id:
            raise field_error("task_id", "must be a vSphere task id such as task-123")
        session = self.session()
        info = vim.Task(task_id, stub=session.si._stub).info
        out = {"id": task_id, "state": _TASK_STATES.get(str(info.state), "running"),
               "progress": info.progress, "operation": info.descriptionId,
               "entity": info.entityName, "error": None}
        if info.error is not None:
            out["error"] = classify(info.error, (self.classify_error,)).to_dict()
        return out


@hookimpl
def resilient_virt_provider_types():
    return {VSphereProvider.type_name: VSphereProvider}
