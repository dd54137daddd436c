"""The libvirt provider (KVM/QEMU hosts, or libvirt's in-process ``test:///default`` driver).

One provider is one libvirt host: ``qemu:///system``, ``qemu+ssh://user@host/system``,
``qemu+unix:///system?socket=/path/libvirt-sock``, ``test:///default``. libvirt-python is
imported on the first call; the connection is opened on first use and reused. Every call is
made through GuardedProvider, whose time limit abandons a call to a hung daemon; the
connection of an abandoned call is never used or closed again (closing it would wait on the
hung daemon), and ``close()`` itself gives up after a few seconds.

The host is reported as one hypervisor named by ``provider.name`` (else the host name), in
availability zone ``provider.az``, with ``provider.traits``. libvirt is synchronous (no task
ids), so ``task_status`` is not a capability; neither is ``migrate`` (one host per provider):
``migrate_to`` moves a VM to another libvirt provider (``migrate.py``, loaded by it). Backups are in
``backup.py``, loaded on the first backup call (``_registry.BuiltinBackups``); creating a VM,
its volumes and seed in ``create.py``, loaded by a create, a reconfigure or a delete of volumes;
reconfiguring one in ``edit.py``, loaded by a reconfigure; power actions in ``power.py``;
snapshots (internal ones) in ``snapshots.py``, loaded by a snapshot call.

Code that only some calls need is imported inside the method that needs it, so that a task that
only reads VMs does not pay for it (tests/unit/modules/test_describe_imports.py). Measured with
``python3 -X importtime`` in a fresh process without bytecode files, as a module process runs:
``create.py`` and what it imports 33 ms, ``edit.py`` 9 ms more, ``spec.py`` with
``_vm_schema.py`` 11 ms, ``ssh.py`` 1.1 ms, ``platform.py`` 0.7 ms, ``snapshots.py`` 1.3 ms.
"""
import atexit
import fnmatch
import re
import sys

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, Internal, InvalidSpec, NotFound, NotSupported, Timeout, Unauthorized, Unavailable,
    field_error, redact)
from ansible_collections.resilient.virt.plugins.module_utils.providers._connection import (
    SharedConnection, SharedConnectionMixin)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import guest
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    SNAPSHOT_CAPABILITIES, Option, Provider, check_filters, match_filters, new_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.domain import (
    DOMAIN_TYPES, managed_volumes, name_problem, parse_domain_xml)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    SHUTOFF as _SHUTOFF, error_code as _code, error_codes as _codes, is_error as _is, load as _libvirt)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.power import (
    power as power_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.session import (
    Session)

__all__ = ("LibvirtProvider", "resilient_virt_provider_types", "PATTERNS")

CLOSE_TIMEOUT = 5.0
_URI = r"^[a-z][a-z0-9]*(\+[a-z0-9]+)?://\S*$"
_UUID = r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$"
PATTERNS = (_URI, _UUID)  # compiled ahead by a controller that preloads the collection
# SSH setting -> the environment variable it falls back to; ssh.py, imported only when one is
# given (or a libvirt error is classified), turns them into the URI's parameters
SSH_ENV = {"ssh_key_file": "RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE",
           "ssh_known_hosts": "RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS",
           "ssh_verify_host_key": "RESILIENT_VIRT_LIBVIRT_SSH_VERIFY_HOST_KEY"}
_URI_HELP = ("use e.g. qemu:///system, qemu+ssh://user@host/system, "
             "qemu+unix:///system?socket=/path/to/libvirt-sock or test:///default")
# virDomainState -> VM state
_STATES = {0: "unknown", 1: "running", 2: "running", 3: "paused", 4: "running", 5: "stopped",
           6: "stopped", 7: "paused"}
_ACTIVE = ("running", "paused")  # states in which a VM holds its addresses
# libvirt error code names per taxonomy class; names missing from an old libvirt are skipped
_CODES = (
    (NotFound, ("NO_DOMAIN", "NO_NETWORK", "NO_STORAGE_POOL", "NO_STORAGE_VOL",
                "NO_DOMAIN_SNAPSHOT", "NO_NODE_DEVICE", "NO_INTERFACE", "NO_DOMAIN_CHECKPOINT",
                "NO_DOMAIN_BACKUP")),
    (Unauthorized, ("AUTH_FAILED", "AUTH_CANCELLED", "AUTH_UNAVAILABLE", "ACCESS_DENIED",
                    "OPERATION_DENIED")),
    # SSH and LIBSSH: the SSH failures ssh.ssh_problem does not tell apart (the remote daemon
    # or its socket gone, the connection dropped)
    (Unavailable, ("NO_CONNECT", "RPC", "INVALID_CONN", "SSH", "LIBSSH")),
    (Timeout, ("OPERATION_TIMEOUT",)),
    (InvalidSpec, ("XML_ERROR", "XML_DETAIL", "INVALID_ARG", "CONFIG_UNSUPPORTED",
                   "XML_INVALID_SCHEMA", "OVERFLOW")),
    (Conflict, ("DOM_EXIST", "OPERATION_INVALID", "STORAGE_VOL_EXIST")),
    (NotSupported, ("NO_SUPPORT", "ARGUMENT_UNSUPPORTED", "OPERATION_UNSUPPORTED")),
)


_ABANDONED = []  # connections of abandoned calls, kept open for them until the process exits


def _forget(conn):
    """An abandoned call goes on with ``conn`` (the retry waits for its work to end), so it
    stays open for it. libvirt-python closes a connection in ``__del__``, which would wait on a
    hung daemon: a reference is kept until the process exits, and then nothing closes it."""
    if not _ABANDONED:
        atexit.register(_never_close)
    _ABANDONED.append(conn)


def _never_close():
    for conn in _ABANDONED:
        conn._o = None


def _leases(conn, vms):
    """MAC address (lower case) -> IP addresses, from the DHCP leases of the libvirt networks the
    interfaces of ``vms`` use: one call per network. A network without leases to give (inactive,
    gone, or a driver that keeps none) gives none."""
    found = {}
    for network in sorted(set(nic["network"] for vm in vms for nic in vm["interfaces"]
                              if nic.get("network"))):
        try:
            leases = conn.networkLookupByName(network).DHCPLeases()
        except Exception as exc:  # noqa: BLE001 - addresses are a courtesy; any failure: none
            if _code(exc) is None:
                raise
            continue
        for lease in leases:
            if lease.get("mac") and lease.get("ipaddr"):
                found.setdefault(lease["mac"].lower(), []).append(lease["ipaddr"])
    return found


def _runtime(fields):
    """What a running domain must share with its definition not to need a restart."""
    return (fields["vcpus"], fields["memory_mb"], fields["boot"],
            [(d["path"], d["target"], d["device"]) for d in fields["disks"]],
            [(n.get("mac"), n.get("network"), n.get("bridge"), n.get("model"))
             for n in fields["interfaces"]])


def _version(number):
    return "%d.%d.%d" % (number // 1000000, number // 1000 % 1000, number % 1000)


class LibvirtProvider(SharedConnectionMixin, Provider):
    """A libvirt host: validate, list_hypervisors, list_vms, describe, create, delete, power,
    reconfigure, snapshots."""

    type_name = "libvirt"
    capabilities = frozenset(("validate", "list_hypervisors", "list_vms", "describe", "create",
                              "delete", "power", "reconfigure", "find",
                              "migrate_to", "locate_disks") + SNAPSHOT_CAPABILITIES)
    reconfigurable = frozenset(("vcpus", "memory_mb", "metadata", "tags", "disks", "interfaces",
                                "autostart", "boot"))
    options = dict(Provider.options, **{
        "uri": Option(default="qemu:///system", env="LIBVIRT_DEFAULT_URI",
                      doc="libvirt connection URI; " + _URI_HELP),
        "username": Option(doc="User name for libvirt authentication (SASL), when asked."),
        "password": Option(secret=True, doc="Password for libvirt authentication, when asked."),
        "storage_pool": Option(default="default",
                               doc="Storage pool where disks given by size_gb are created."),
        "backup_pool": Option(default="backups",
                              doc="Directory storage pool where backups are stored (backup.py)."),
        "domain_type": Option(choices=DOMAIN_TYPES,
                              doc="Domain type of new VMs: kvm or qemu (emulation). Unset, kvm "
                                  "where the hypervisor offers it, else qemu with a warning."),
        "cpu_allocation_ratio": Option(kind="ratio", default=1.0,
                                       doc="Virtual CPUs allowed per physical CPU; the hypervisor's "
                                           "cpu capacity reported to failover planning is cpus x ratio."),
        "ssh_key_file": Option(env=SSH_ENV["ssh_key_file"],
                               doc="SSH private key file (without a passphrase) for an SSH URI "
                                   "(qemu+ssh://, qemu+libssh://): libvirt's keyfile parameter "
                                   "(ssh.py)."),
        "ssh_known_hosts": Option(env=SSH_ENV["ssh_known_hosts"],
                                  doc="Known-hosts file that lists the SSH host key of the URI's "
                                      "host; with qemu+ssh:// the connection uses libvirt's libssh "
                                      "transport, which honours it (ssh.py)."),
        "ssh_verify_host_key": Option(kind="bool", default=True, env=SSH_ENV["ssh_verify_host_key"],
                                      doc="Whether the SSH host key is verified; false accepts any "
                                          "host key, with a warning."),
    })

    def __init__(self, config, environ=None):
        super().__init__(config, environ)
        if not re.match(_URI, self.config["uri"]):
            raise field_error(self.option_path("uri"), "%r is not a libvirt URI; %s"
                              % (redact(self.config["uri"]), _URI_HELP))
        given = set(key for key in SSH_ENV if config.get(key) is not None or key in self.sources)
        self._uri = self.config["uri"]
        if given:  # ssh.py imports this module, and only SSH settings need it (docstring above)
            from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.ssh import (
                ssh_uri)

            self._uri, warnings = ssh_uri(self._uri, self.config, given, set(self.sources),
                                          self.option_path)
            self.warnings.extend(warnings)
        self._hostname = None
        self._offered = None  # (domain type, its warning, CPU modes) once read
        self._shared = SharedConnection(self._open, lambda conn: conn.close(), CLOSE_TIMEOUT,
                                        "libvirt close of %s" % self.key, _forget)
        self._peer = None  # the target provider of a migration in progress

    def spec_errors(self, spec):
        # imported here: only a create or a change checks a spec (see the docstring above)
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vm_schema import (
            errors_of)
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import (
            validate_spec)

        return errors_of(validate_spec, spec)

    def check_name(self, name, creating=False):
        super().check_name(name, creating)
        problem = name_problem(name)
        if problem:
            raise field_error("name", "%r %s" % (name, problem))

    # -- connection ---------------------------------------------------------------------------
    def _open(self):
        lv = _libvirt()
        uri = self._uri
        if "username" not in self.config and "password" not in self.config:
            return lv.open(uri)
        answers = {lv.VIR_CRED_AUTHNAME: self.config.get("username", ""),
                   lv.VIR_CRED_PASSPHRASE: self.config.get("password", "")}

        def request(credentials, _opaque):
            for credential in credentials:
                if credential[0] not in answers:
                    return -1
                credential[4] = answers[credential[0]]
            return 0

        return lv.openAuth(uri, [list(answers), request, None], 0)

    def classify_error(self, exc):
        code = _code(exc)
        if code is None:
            return None
        lv = sys.modules["libvirt"]
        message = "libvirt (%s): %s" % (self.key, redact(exc.get_error_message() or exc))
        details = {"libvirt_code": code, "libvirt_domain": exc.get_error_domain()}
        # imported here: ssh.py imports this module
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.ssh import (
            is_ssh, ssh_problem)

        if is_ssh(self._uri):
            fix = ssh_problem(message, self._uri, self.option_path)
            if fix:
                return Unauthorized("%s; %s" % (message, fix), cause=exc, details=details)
        for klass, names in _CODES:
            if code in _codes(lv, names):
                return klass(message, cause=exc, details=details)
        remote = (getattr(lv, "VIR_FROM_RPC", -1), getattr(lv, "VIR_FROM_REMOTE", -1))
        if code in _codes(lv, ("SYSTEM_ERROR", "INTERNAL_ERROR")) and \
                exc.get_error_domain() in remote:
            return Unavailable(message, cause=exc, details=details)
        return Internal(message, cause=exc, details=details)

    def session(self):
        """What the backend's other files get for one call (``session.py``): the connection
        and the lookups on it."""
        return Session(self, self._connection(), self._lookup, self._vm, self._platform)

    # -- helpers ------------------------------------------------------------------------------
    def _platform(self, conn):
        """What the hypervisor offers new domains (``platform.offered``), read once."""
        if self._offered is None:  # imported here: only a new domain needs it (docstring above)
            from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.platform import (
                offered)

            self._offered = offered(conn, self.config.get("domain_type"), self.key)
        return self._offered

    def _hypervisor(self, conn):
        if self.config.get("name"):
            return self.config["name"]
        if self._hostname is None:
            self._hostname = conn.getHostname()
        return self._hostname

    def _lookup(self, conn, name):
        try:
            return conn.lookupByName(name)
        except Exception as exc:
            if _is(exc, "NO_DOMAIN"):
                raise NotFound("VM %r not found on %s" % (name, self.key), cause=exc) from exc
            raise

    def _vm(self, conn, dom, state=None, leases=None, autostart=None, saved=None, arp=True):
        """The VM dict of ``dom``: its configuration (the persistent XML), its state (read unless
        given; a stopped domain with a managed save image is suspended), ``restart_required``
        when it runs with something else, ``autostart`` (read unless given), what the guest says
        (``guest.py``), and the addresses of its interfaces: the agent's, those they hold in
        ``leases`` (read from their networks unless given), then (``arp``) the host's ARP
        table's."""
        lv = _libvirt()
        if state is None:
            state = dom.state()[0]
        live = parse_domain_xml(dom.XMLDesc(0))
        fields = live if state == _SHUTOFF else parse_domain_xml(
            dom.XMLDesc(lv.VIR_DOMAIN_XML_INACTIVE))
        if leases is None:
            leases = _leases(conn, [fields])
        if state == _SHUTOFF and (dom.hasManagedSaveImage(0) if saved is None else saved):
            shown = "suspended"
        else:
            shown = _STATES.get(state, "unknown")
        fields.update(hypervisor=self._hypervisor(conn), state=shown,
                      autostart=bool(dom.autostart() if autostart is None else autostart),
                      restart_required=_runtime(live) != _runtime(fields))
        self._guest(lv, dom, live, fields, leases, arp)
        return new_vm(self, **fields)

    def _guest(self, lv, dom, live, fields, leases, arp):
        """Fill ``fields`` with what the guest says (``guest``) and the addresses of each
        interface: from the agent, the ``leases``, then (``arp`` True) the host's ARP table."""
        running = fields["state"] == "running"  # a paused guest cannot answer
        channel = live["agent"] if running else fields["agent"] and "disconnected"
        fields.pop("agent")
        fields["guest"], found = guest.ask_agent(lv, dom, channel, _is)
        interfaces = fields["interfaces"]
        guest.assign_addresses(interfaces, "agent", found)
        # a lease outlives the guest: a VM that is not running or paused holds no address
        fields["addresses"] = guest.assign_addresses(
            interfaces, "lease", leases if fields["state"] in _ACTIVE else {})
        if arp and running and not all(nic["addresses"] for nic in interfaces):
            fields["addresses"] = guest.assign_addresses(interfaces, "arp",
                                                         guest.arp_addresses(lv, dom, _is))

    # -- operations ---------------------------------------------------------------------------
    def validate(self):
        conn = self._connection()
        return {"uri": redact(self._uri), "hostname": conn.getHostname(),
                "driver": conn.getType(), "libvirt_version": _version(conn.getLibVersion()),
                "hypervisor_version": _version(conn.getVersion())}

    def list_hypervisors(self):
        """The host, its use summed from one bulk stats call over the running domains."""
        lv = _libvirt()
        conn = self._connection()
        arch, memory_mb, cpus = conn.getInfo()[:3]
        used_cpu = used_kib = 0
        stats = lv.VIR_DOMAIN_STATS_VCPU | lv.VIR_DOMAIN_STATS_BALLOON
        for dom, record in conn.getAllDomainStats(stats, lv.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE):
            if "balloon.current" not in record or "vcpu.current" not in record:
                try:  # a driver without these statistics (libvirt's test driver): ask the domain
                    info = dom.info()
                except Exception as exc:
                    if _is(exc, "NO_DOMAIN"):  # stopped and gone meanwhile
                        continue
                    raise
                record = {"balloon.current": info[2], "vcpu.current": info[3]}
            used_kib += record["balloon.current"]
            used_cpu += record["vcpu.current"]
        cpus = int(cpus * self.config["cpu_allocation_ratio"])
        return [{"name": self._hypervisor(conn), "az": self.config["az"], "cpu": cpus,
                 "memory_mb": memory_mb, "used_cpu": used_cpu,
                 "used_memory_mb": used_kib // 1024,
                 "free_memory_mb": conn.getFreeMemory() // (1024 * 1024), "arch": arch,
                 "state": "up", "traits": list(self.config["traits"]),
                 "vm_count": len(conn.listAllDomains(0))}]

    def list_vms(self, filters=None):
        """Every domain: names and states from one bulk call, autostart and managed saves from
        one call each, filtered by name and state before each definition is read (one call per
        VM left, two for a running one, two more for one whose guest agent is connected),
        addresses from the agents and the networks' leases (not the ARP table)."""
        check_filters(filters)
        lv = _libvirt()
        filters = filters or {}
        conn = self._connection()
        wanted = []
        for dom, record in conn.getAllDomainStats(lv.VIR_DOMAIN_STATS_STATE):
            state = record.get("state.state")
            if "name" in filters and not fnmatch.fnmatchcase(dom.name(), filters["name"]):
                continue
            if "state" in filters and _STATES.get(state, "unknown") != filters["state"] and not (
                    filters["state"] == "suspended" and state == _SHUTOFF):
                continue
            wanted.append((dom, state))
        autostart = set(dom.name() for dom in conn.listAllDomains(
            lv.VIR_CONNECT_LIST_DOMAINS_AUTOSTART))
        saved = set(dom.name() for dom in conn.listAllDomains(
            lv.VIR_CONNECT_LIST_DOMAINS_MANAGEDSAVE))
        vms = []
        for dom, state in wanted:
            try:
                vms.append(self._vm(conn, dom, state, leases={}, autostart=dom.name() in autostart,
                                    saved=dom.name() in saved, arp=False))
            except Exception as exc:
                if _is(exc, "NO_DOMAIN"):  # deleted meanwhile
                    continue
                raise

        leases = _leases(conn, vms)
        for vm in vms:
            vm["addresses"] = guest.assign_addresses(vm["interfaces"], "lease",
                                                     leases if vm["state"] in _ACTIVE else {})
        return sorted((vm for vm in vms if match_filters(vm, filters)), key=lambda vm: vm["name"])

    def describe(self, name):
        conn = self._connection()
        return self._vm(conn, self._lookup(conn, name))

    def find(self, uuid):
        if not re.match(_UUID, uuid):
            raise field_error("uuid", "%r is not a UUID such as 6c3b5e0e-9f53-4a3e-9df5-0f3b5c1f2f10"
                              % (uuid,))
        try:
            return self._connection().lookupByUUIDString(uuid).name()
        except Exception as exc:
            if _is(exc, "NO_DOMAIN"):
                raise NotFound("no VM with uuid %s on %s" % (uuid, self.key), cause=exc) from exc
            raise

    def create(self, spec):
        # imported here: only a create needs it (see the docstring above)
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.create import (
            create)

        return create(self, spec)

    def delete(self, name):
        """Power off, remove the volumes created for the VM, then undefine it.

        Volumes go first so that a failure leaves the VM defined and a retry finishes the job.
        """
        conn = self._connection()
        dom = self._lookup(conn, name)
        volumes = managed_volumes(dom.XMLDesc(0))
        persistent = dom.isPersistent()
        if dom.isActive():
            try:
                dom.destroy()
            except Exception as exc:
                if not _is(exc, "OPERATION_INVALID"):  # stopped meanwhile
                    raise
        if volumes:  # imported here: only a VM with volumes needs it (docstring above)
            from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.create import (
                delete_volumes)

            delete_volumes(conn, volumes)
        if persistent:
            self._undefine(dom)

    def _undefine(self, dom):
        lv = _libvirt()
        wanted = [getattr(lv, "VIR_DOMAIN_UNDEFINE_" + n, 0) for n in (
            "MANAGED_SAVE", "SNAPSHOTS_METADATA", "CHECKPOINTS_METADATA", "NVRAM")]
        # drivers refuse flags they do not know: try all, then the common two, then none
        for flags in (sum(wanted), wanted[0] | wanted[1]):
            try:
                return dom.undefineFlags(flags)
            except Exception as exc:
                if not _is(exc, "INVALID_ARG", "NO_SUPPORT", "ARGUMENT_UNSUPPORTED"):
                    raise
        return dom.undefine()

    def power(self, name, action, timeout=None):
        return power_vm(self, name, action, timeout)

    def migrate_to(self, name, target, live=True, timeout=None, bandwidth_mib=None):
        """Move the VM to the libvirt provider ``target`` (``migrate.py``)."""
        # imported here: only a migration needs it (see the docstring above)
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.migrate import (
            migrate_to)

        self._peer = target
        try:
            return migrate_to(self, name, target, live, timeout, bandwidth_mib)
        finally:
            self._peer = None

    def locate_disks(self, paths, witnesses=()):
        """Where this host sees the disk files ``paths`` (``disk_location.py``)."""
        # imported here: only an evacuation needs it
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.disk_location import (
            locate_disks)

        return locate_disks(self, paths, witnesses)

    def abandon(self):
        """Drop the connection of the abandoned call, and the target's of a migration."""
        peer = self._peer
        super().abandon()
        if peer is not None:
            peer.abandon()

    def reconfigure(self, name, vcpus=None, memory_mb=None, **changes):
        """Change the definition, then the running domain where it can take the change: vCPUs,
        memory and devices live, when refused (or a device the guest does not release) at the
        next start, which ``restart_required`` then says. Added disks given by size_gb get new
        volumes; a removed disk's volume is kept, with a warning that names it."""
        # imported here: only a change needs it (see the docstring above)
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.edit import (
            reconfigure)

        return reconfigure(self, name, vcpus, memory_mb, changes)

    # imported in each: only a snapshot task needs snapshots.py (see the docstring above)
    def list_snapshots(self, name):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import snapshots

        return snapshots.list_snapshots(self, name)

    def create_snapshot(self, name, snapshot, description="", memory=False, quiesce=False):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import snapshots

        return snapshots.create_snapshot(self, name, snapshot, description, memory, quiesce)

    def delete_snapshot(self, name, snapshot):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import snapshots

        return snapshots.delete_snapshot(self, name, snapshot)

    def revert_snapshot(self, name, snapshot):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import snapshots

        return snapshots.revert_snapshot(self, name, snapshot)


@hookimpl
def resilient_virt_provider_types():
    return {LibvirtProvider.type_name: LibvirtProvider}
