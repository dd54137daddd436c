"""The vSphere provider: a vCenter (or ESXi host) through pyVmomi's SOAP API.

Hosts (HostSystems) are the hypervisors; a host's cluster is its availability zone. pyVmomi is
imported on first use; the session is opened on first use, reused by every call of this
provider object and logged out by ``close()``, which never waits more than a few seconds.
Reads use one PropertyCollector call per query instead of one SOAP call per attribute.

Security: ``protocol`` is https and the server certificate is verified against the system's
trusted CAs unless ``validate_certs`` is false; plain http is used only when asked for
(``protocol: http``, e.g. a simulator on loopback). Either choice adds a message to
``warnings``. The password never appears in errors, results or ``repr()``.

Asynchronous vSphere tasks are polled until they end or ``task_timeout`` passes; the Timeout
then carries the task id (``details.task_id``) for ``task_status``. A call abandoned by the
caller's time limit stops polling at its next poll.
"""
import re
import socket
import ssl
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, QuotaExceeded, Timeout, Unavailable, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._connection import (
    SharedConnection, SharedConnectionMixin)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    CAPABILITIES, POWER_ACTIONS, Option, Provider, check_filters, match_filters, new_vm)
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.faults import (
    SESSION_LOST, classify_fault, fault_name)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
    MAX_NAME_LENGTH)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    COMPUTE_PATHS, HOST_PATHS, VM_PATHS, custom_values, host_fields, host_state, retrieve,
    retrieve_view, vm_fields)

__all__ = ("VSphereProvider", "resilient_virt_provider_types")

DEFAULT_SHUTDOWN_TIMEOUT = 60.0
CLOSE_TIMEOUT = 3.0
MAX_POLL_INTERVAL = 1.0
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


class _Session:
    """One login: the service instance, its content and lookups cached for its lifetime."""

    def __init__(self, si):
        self.si = si
        self.content = si.RetrieveContent()
        self.views = {}
        self.root = None
        self.field_names = None
        self.portgroups = None
        self.hosts = {}


class VSphereProvider(SharedConnectionMixin, Provider):
    """A vCenter or ESXi endpoint: every capability of the contract."""

    type_name = "vsphere"
    capabilities = frozenset(CAPABILITIES)
    options = dict(Provider.options, **{
        "host": Option(required=True, doc="vCenter or ESXi host name or address."),
        "port": Option("int", default=443, doc="Port of the SOAP API (/sdk)."),
        "protocol": Option(default="https", choices=("https", "http"),
                           doc="https; http only for a simulator or lab on loopback."),
        "username": Option(required=True, doc="User name, e.g. administrator@vsphere.local."),
        "password": Option(secret=True, required=True, doc="Password of username."),
        "validate_certs": Option("bool", default=True,
                                 doc="Verify the server certificate (https). Keep true outside "
                                     "a lab: false lets a man in the middle read the password."),
        "datacenter": Option(doc="Only use this datacenter (default: all)."),
        "timeout": Option("duration", default=60.0,
                          doc="Time limit of the login and of each SOAP request."),
        "task_timeout": Option("duration", default=240.0,
                               doc="How long to wait for a vSphere task (create, power, ...)."),
        "traits_attribute": Option(default="traits",
                                   doc="Host custom attribute holding comma-separated traits."),
    })

    def __init__(self, config):
        super().__init__(config)
        port = self.config["port"]
        if not 0 < port < 65536:
            raise field_error("provider.port", "%d is not a TCP port (1-65535)" % port)
        if not _HOST.match(self.config["host"]):
            raise field_error("provider.host", "must be a host name or an IP address only (without "
                              "scheme, user, password, port or path): put the user "
                              "in provider.username, the password in "
                              "provider.password and the port in provider.port")
        if self.config["protocol"] == "http":
            self.warnings.append(
                "provider.protocol is http: the session with %s, password included, is not "
                "encrypted; use https outside a loopback lab" % self.endpoint())
        elif not self.config["validate_certs"]:
            self.warnings.append(
                "provider.validate_certs is false: the certificate of %s is not verified, so a "
                "man in the middle could read the password; trust the server's CA instead"
                % self.endpoint())
        self._shared = SharedConnection(self._login, _logout,
                                        min(CLOSE_TIMEOUT, self.config["timeout"]),
                                        "vSphere logout from %s" % self.endpoint())

    def __repr__(self):
        return "<VSphereProvider %s>" % self.key

    def endpoint(self):
        return "%s:%d" % (self.config["host"], self.config["port"])

    def check_name(self, name, creating=False):
        super().check_name(name, creating)
        if len(name) > MAX_NAME_LENGTH:
            raise field_error("name", "%r has %d characters; vSphere VM names have at most %d"
                              % (name[:20] + "...", len(name), MAX_NAME_LENGTH))

    # -- session ------------------------------------------------------------------------------
    def _login(self):
        from pyVim.connect import SmartConnect

        from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import (
            run_with_timeout)

        context = None
        if self.config["protocol"] == "https":
            # always an explicit context: given none, pyVmomi skips verification for localhost
            context = ssl.create_default_context()
            if not self.config["validate_certs"]:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        kwargs = dict(protocol=self.config["protocol"], host=self.config["host"],
                      port=self.config["port"], user=self.config["username"],
                      pwd=self.config["password"], sslContext=context,
                      httpConnectionTimeout=self.config["timeout"])
        return run_with_timeout(lambda: _Session(SmartConnect(**kwargs)), self.config["timeout"],
                                "vSphere login to %s" % self.endpoint())

    def classify_error(self, exc):
        """pyVmomi faults, vSphere HTTP and connection failures, with the endpoint named.

        A lost session (expired, or its container views gone) is dropped, so a retry logs in.
        """
        err = classify_fault(exc)
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

    # -- inventory helpers ----------------------------------------------------------------------
    def _view(self, session, kinds):
        """A ContainerView of ``kinds`` under the datacenter (or root), made once per session."""
        names = tuple(sorted(k.__name__ for k in kinds))
        if names not in session.views:
            session.views[names] = session.content.viewManager.CreateContainerView(
                self._root(session), list(kinds), True)
        return session.views[names]

    def _root(self, session):
        if session.root is not None:
            return session.root
        content = session.content
        wanted = self.config.get("datacenter")
        if wanted is None:
            session.root = content.rootFolder
            return session.root
        from pyVmomi import vim

        view = content.viewManager.CreateContainerView(content.rootFolder, [vim.Datacenter], True)
        found = retrieve_view(content, view, {vim.Datacenter: ["name"]})
        for ref, props in found:
            if props.get("name") == wanted:
                session.root = ref
                return ref
        known = ", ".join(sorted(p.get("name", "?") for ref, p in found)) or "none"
        raise field_error("provider.datacenter", "no datacenter named %r on %s (datacenters: %s)"
                          % (wanted, self.endpoint(), known))

    def _field_names(self, session, props_list):
        """Custom field key -> name; fetched when a key is not known yet."""
        known = session.field_names or {}
        if any(item.key not in known for p in props_list for item in p.get("customValue") or []):
            fields = session.content.customFieldsManager.field or []
            session.field_names = known = dict((f.key, f.name) for f in fields)
        return known

    def _portgroups(self, session, props_list):
        """Distributed port group key -> name; fetched when a VM uses a key not known yet."""
        from pyVmomi import vim

        known = session.portgroups or {}
        backing = vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo
        if any(isinstance(getattr(d, "backing", None), backing) and d.backing.port is not None
               and d.backing.port.portgroupKey not in known
               for p in props_list for d in p.get("config.hardware.device") or []):
            view = self._view(session, [vim.dvs.DistributedVirtualPortgroup])
            found = retrieve_view(session.content, view,
                                  {vim.dvs.DistributedVirtualPortgroup: ["key", "name"]})
            session.portgroups = known = dict((p["key"], p["name"]) for ref, p in found
                                              if "key" in p)
        return known

    def _host_records(self, session):
        """Every host: (moref, props, az); also refreshes the host map used by VM dicts."""
        from pyVmomi import vim

        found = retrieve_view(session.content, self._view(session, [vim.HostSystem,
                                                                    vim.ComputeResource]),
                              {vim.HostSystem: HOST_PATHS, vim.ComputeResource: COMPUTE_PATHS})
        computes = dict((ref._moId, (ref, props)) for ref, props in found
                        if isinstance(ref, vim.ComputeResource))
        records = []
        for ref, props in found:
            if not isinstance(ref, vim.HostSystem):
                continue
            parent = props.get("parent")
            compute = computes.get(parent._moId) if parent is not None else None
            if compute is not None and isinstance(compute[0], vim.ClusterComputeResource):
                az = compute[1].get("name")
            else:
                az = self.config["az"]
            props["compute"] = compute
            records.append((ref, props, az))
        session.hosts = dict((ref._moId, (props.get("name"), az)) for ref, props, az in records)
        return records

    def _traits(self, props, field_names):
        traits = set(self.config["traits"])
        text = custom_values(props, field_names).get(self.config["traits_attribute"]) or ""
        traits.update(t.strip() for t in text.split(",") if t.strip())
        return sorted(traits)

    def _vm_refs(self, session, name):
        from pyVmomi import vim

        view = self._view(session, [vim.VirtualMachine])
        return [ref for ref, props in retrieve_view(session.content, view,
                                                    {vim.VirtualMachine: ["name"]})
                if props.get("name") == name]

    def _find_vm(self, session, name):
        refs = self._vm_refs(session, name)
        if not refs:
            raise NotFound("VM %r not found on %s" % (name, self.key))
        if len(refs) > 1:
            raise Conflict("%d VMs are named %r on %s; rename all but one (this provider "
                           "identifies VMs by name)" % (len(refs), name, self.key))
        return refs[0]

    def _vm_dicts(self, session, found):
        props_list = [props for ref, props in found]
        if any(p.get("runtime.host") is not None and p["runtime.host"]._moId not in session.hosts
               for p in props_list):
            self._host_records(session)
        field_names = self._field_names(session, props_list)
        portgroups = self._portgroups(session, props_list)
        return [new_vm(self, props.get("name"), **vm_fields(props, session.hosts, field_names, portgroups))
                for props in props_list]

    def _describe_ref(self, session, ref, name):
        from pyVmomi import vim

        found = retrieve(session.content, [ref], {vim.VirtualMachine: VM_PATHS})
        if not found:
            raise NotFound("VM %r not found on %s" % (name, self.key))
        return self._vm_dicts(session, found)[0]

    def _wait(self, session, task, what, timeout=None):
        """Poll ``task`` until it ends: its result, its fault raised, or Timeout."""
        limit = self.config["task_timeout"] if timeout is None else timeout
        generation = self._shared.generation
        end = time.monotonic() + limit
        delay = 0.02
        while True:
            info = task.info
            if info.state == "success":
                return info.result
            if info.state == "error":
                raise info.error
            left = end - time.monotonic()
            if left <= 0 or generation != self._shared.generation:
                raise Timeout("%s on %s still running after %gs (task %s); see task_status"
                              % (what, self.key, limit, task._moId),
                              details={"task_id": task._moId, "timeout": limit})
            time.sleep(min(delay, left))
            delay = min(delay * 2, MAX_POLL_INTERVAL)

    def _power_state(self, session, ref):
        from pyVmomi import vim

        found = retrieve(session.content, [ref], {vim.VirtualMachine: ["runtime.powerState"]})
        return str(found[0][1].get("runtime.powerState")) if found else None

    # -- operations -----------------------------------------------------------------------------
    def validate(self):
        session = self._connection()
        about = session.content.about
        self._root(session)  # checks provider.datacenter
        return {"endpoint": "%s://%s" % (self.config["protocol"], self.endpoint()),
                "product": about.fullName, "api_type": about.apiType,
                "api_version": about.apiVersion, "instance_uuid": about.instanceUuid,
                "datacenter": self.config.get("datacenter"), "warnings": list(self.warnings)}

    def list_hypervisors(self):
        session = self._connection()
        records = self._host_records(session)
        field_names = self._field_names(session, [props for ref, props, az in records])
        hosts = [host_fields(props, az, self._traits(props, field_names))
                 for ref, props, az in records]
        return sorted(hosts, key=lambda h: h["name"])

    def list_vms(self, filters=None, paths=VM_PATHS):
        from pyVmomi import vim

        check_filters(filters)
        session = self._connection()
        view = self._view(session, [vim.VirtualMachine])
        found = retrieve_view(session.content, view, {vim.VirtualMachine: paths})
        vms = [vm for vm in self._vm_dicts(session, found) if match_filters(vm, filters)]
        return sorted(vms, key=lambda vm: vm["name"] or "")

    def list_vm_summaries(self, filters=None):
        """list_vms without the device list (disks and interfaces left empty): the devices are
        most of what the query returns and parses."""
        return self.list_vms(filters, [p for p in VM_PATHS if p != "config.hardware.device"])

    def describe(self, name):
        session = self._connection()
        return self._describe_ref(session, self._find_vm(session, name), name)

    def create(self, spec):
        """Create the VM (stopped) on the host chosen by :meth:`_place`.

        ``metadata`` is stored once the VM exists; if that fails the VM stays, and the error
        says why.
        """
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
            config_spec, validate_spec)

        spec = validate_spec(spec)
        session = self._connection()
        if self._vm_refs(session, spec["name"]):
            raise Conflict("VM %r already exists on %s" % (spec["name"], self.key))
        host_ref, props = self._place(session, spec)
        datastore = self._datastore(session, props, spec)
        config = config_spec(spec, datastore, self._backing_resolver(session, props))
        folder = self._datacenter_of(props["compute"][0]).vmFolder
        task = folder.CreateVM_Task(config=config, pool=props["compute"][1]["resourcePool"],
                                    host=host_ref)
        ref = self._wait(session, task, "creating VM %r" % spec["name"])
        if spec["metadata"]:
            self._set_metadata(session, ref, spec["metadata"])
        return self._describe_ref(session, ref, spec["name"])

    def delete(self, name):
        session = self._connection()
        ref = self._find_vm(session, name)
        if self._power_state(session, ref) != "poweredOff":
            self._wait(session, ref.PowerOffVM_Task(), "powering off VM %r" % name)
        self._wait(session, ref.Destroy_Task(), "deleting VM %r" % name)

    def power(self, name, action, timeout=None):
        if action not in POWER_ACTIONS:
            raise field_error("action", "%r: use one of %s" % (action, ", ".join(POWER_ACTIONS)))
        session = self._connection()
        ref = self._find_vm(session, name)
        state = self._power_state(session, ref)
        changed = True
        if action == "on" and state != "poweredOn":
            self._wait(session, ref.PowerOnVM_Task(), "powering on VM %r" % name, timeout)
        elif action == "off" and state != "poweredOff":
            self._wait(session, ref.PowerOffVM_Task(), "powering off VM %r" % name, timeout)
        elif action == "shutdown" and state != "poweredOff":
            self._shutdown(session, ref, name, state,
                           DEFAULT_SHUTDOWN_TIMEOUT if timeout is None else timeout)
        elif action == "reboot":
            self._reboot(session, ref, name, state, timeout)
        else:
            changed = False
        return dict(self._describe_ref(session, ref, name), changed=changed)

    def _shutdown(self, session, ref, name, state, timeout):
        if state == "suspended":
            raise Conflict("VM %r is suspended, so its guest cannot shut down; power it on "
                           "first or power it off" % name)
        ref.ShutdownGuest()
        end = time.monotonic() + timeout
        while self._power_state(session, ref) != "poweredOff":
            if time.monotonic() >= end:
                raise Timeout("VM %r did not shut down within %gs (the guest ignored or is still "
                              "handling the request)" % (name, timeout),
                              details={"timeout": timeout})
            time.sleep(min(0.25, max(0.0, end - time.monotonic())))

    def _reboot(self, session, ref, name, state, timeout):
        """Guest reboot when VMware Tools run in the guest, else a hard reset."""
        if state != "poweredOn":
            raise Conflict("VM %r is not running, so it cannot be rebooted; power it on instead"
                           % name)
        if str(ref.guest.toolsRunningStatus) == "guestToolsRunning":
            ref.RebootGuest()
        else:
            self._wait(session, ref.ResetVM_Task(), "resetting VM %r" % name, timeout)

    def reconfigure(self, name, vcpus=None, memory_mb=None):
        from pyVmomi import vim

        for field, value, low in (("vcpus", vcpus, 1), ("memory_mb", memory_mb, 4)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < low):
                raise field_error(field, "%r: must be an integer >= %d" % (value, low))
        if memory_mb is not None and memory_mb % 4:
            raise field_error("memory_mb", "%d: must be a multiple of 4 (vSphere allocates memory "
                              "in 4 MB steps)" % memory_mb)
        session = self._connection()
        ref = self._find_vm(session, name)
        current = self._describe_ref(session, ref, name)
        changes = {}
        if vcpus is not None and vcpus != current["vcpus"]:
            changes["numCPUs"] = vcpus
        if memory_mb is not None and memory_mb != current["memory_mb"]:
            changes["memoryMB"] = memory_mb
        if not changes:
            return current
        self._wait(session, ref.ReconfigVM_Task(spec=vim.vm.ConfigSpec(**changes)),
                   "reconfiguring VM %r" % name)
        return self._describe_ref(session, ref, name)

    def migrate(self, name, hypervisor):
        """Move VM ``name`` to host ``hypervisor`` (vMotion when running), keeping its storage."""
        from pyVmomi import vim

        session = self._connection()
        ref = self._find_vm(session, name)
        current = self._describe_ref(session, ref, name)
        if current["hypervisor"] == hypervisor:
            return current
        target_ref, props, _az = self._usable_host(self._host_records(session), hypervisor,
                                                   "hypervisor")
        spec = vim.vm.RelocateSpec(host=target_ref, pool=props["compute"][1]["resourcePool"])
        self._wait(session, ref.RelocateVM_Task(spec=spec), "migrating VM %r to %r"
                   % (name, hypervisor))
        return self._describe_ref(session, ref, name)

    def task_status(self, task_id):
        """State of vSphere task ``task_id`` (e.g. task-123): running, success or error."""
        from pyVmomi import vim

        if not isinstance(task_id, str) or not task_id:
            raise field_error("task_id", "must be a vSphere task id such as task-123")
        session = self._connection()
        info = vim.Task(task_id, stub=session.si._stub).info
        out = {"id": task_id, "state": _TASK_STATES.get(str(info.state), "running"),
               "progress": info.progress, "operation": info.descriptionId,
               "entity": info.entityName, "error": None}
        if info.error is not None:
            from ansible_collections.resilient.virt.plugins.module_utils.errors import classify

            out["error"] = classify(info.error, (self.classify_error,)).to_dict()
        return out

    # -- create and migrate helpers -----------------------------------------------------------
    def _usable_host(self, records, name, path):
        """(ref, props, az) of connected host ``name``; errors name ``path``."""
        for ref, props, az in records:
            if props.get("name") != name:
                continue
            state = host_state(props)
            if state != "connected":
                raise Conflict("host %r on %s is %s; choose another %s"
                               % (name, self.key, state, path))
            return ref, props, az
        known = sorted(props.get("name") for ref, props, az in records)
        raise field_error(path, "no host named %r on %s (hosts: %s)"
                          % (name, self.key, ", ".join(known)))

    def _place(self, session, spec):
        """(host ref, props) for a new VM: spec.hypervisor, else the connected host of spec.az
        (or of any cluster) with the most free memory."""
        records = self._host_records(session)
        if spec.get("hypervisor"):
            ref, props, az = self._usable_host(records, spec["hypervisor"], "hypervisor")
            if spec.get("az") and az != spec["az"]:
                raise field_error("az", "host %r is in az %r, not %r"
                                  % (spec["hypervisor"], az, spec["az"]))
            return ref, props
        if spec.get("az"):
            zones = sorted(set(az for ref, props, az in records))
            records = [r for r in records if r[2] == spec["az"]]
            if not records:
                raise field_error("az", "no cluster named %r on %s (azs: %s)"
                                  % (spec["az"], self.key, ", ".join(zones)))
        usable = [(ref, props) for ref, props, az in records if host_state(props) == "connected"]
        if not usable:
            raise QuotaExceeded("no connected host outside maintenance mode on %s%s"
                                % (self.key, " in az %r" % spec["az"] if spec.get("az") else ""))

        def free_mb(item):
            facts = host_fields(item[1], None, [])
            return facts["memory_mb"] - (facts["used_memory_mb"] or 0)
        return max(usable, key=free_mb)

    def _datastore(self, session, props, spec):
        from pyVmomi import vim

        found = retrieve(session.content, props.get("datastore") or [],
                         {vim.Datastore: ["summary.name", "summary.freeSpace",
                                          "summary.accessible"]})
        stores = [(p.get("summary.name"), p.get("summary.freeSpace") or 0) for ref, p in found
                  if p.get("summary.accessible")]
        if spec.get("datastore"):
            if spec["datastore"] not in [n for n, free in stores]:
                known = ", ".join(sorted(n for n, free in stores))
                raise field_error("datastore", "%r is not an accessible datastore of host %r "
                                  "(datastores: %s)" % (spec["datastore"], props["name"],
                                                        known))
            return spec["datastore"]
        if not stores:
            raise QuotaExceeded("host %r on %s has no accessible datastore" % (props["name"],
                                                                               self.key))
        return max(stores, key=lambda s: s[1])[0]

    def _backing_resolver(self, session, props):
        """backing_for(network name, path) over the port groups the host can reach."""
        from pyVmomi import vim

        found = retrieve(session.content, props.get("network") or [], {vim.Network: ["name"]})
        networks = dict((p.get("name"), ref) for ref, p in found)
        host = props["name"]

        def backing_for(name, path):
            ref = networks.get(name)
            if ref is None:
                raise field_error(path, "no network named %r on host %r (networks: %s)"
                                  % (name, host, ", ".join(sorted(networks))))
            nic = vim.vm.device.VirtualEthernetCard
            if isinstance(ref, vim.dvs.DistributedVirtualPortgroup):
                port = vim.dvs.PortConnection(portgroupKey=ref.key,
                                              switchUuid=ref.config.distributedVirtualSwitch.uuid)
                return nic.DistributedVirtualPortBackingInfo(port=port)
            if isinstance(ref, vim.OpaqueNetwork):
                return nic.OpaqueNetworkBackingInfo(opaqueNetworkId=ref.summary.opaqueNetworkId,
                                                    opaqueNetworkType=ref.summary.opaqueNetworkType)
            return nic.NetworkBackingInfo(deviceName=name, network=ref)
        return backing_for

    @staticmethod
    def _datacenter_of(entity):
        from pyVmomi import vim

        while not isinstance(entity, vim.Datacenter):
            entity = entity.parent
        return entity

    def _set_metadata(self, session, ref, metadata):
        """Store metadata as custom attributes, defining the missing ones for VMs."""
        from pyVmomi import vim

        manager = session.content.customFieldsManager
        keys = dict((f.name, f.key) for f in manager.field or []
                    if f.managedObjectType in (None, vim.VirtualMachine))
        for name, value in sorted(metadata.items()):
            if name not in keys:
                keys[name] = manager.AddCustomFieldDef(name=name, moType=vim.VirtualMachine).key
            manager.SetField(entity=ref, key=keys[name], value=value)
        session.field_names = None


@hookimpl
def resilient_virt_provider_types():
    return {VSphereProvider.type_name: VSphereProvider}
