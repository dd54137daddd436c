"""The vSphere provider: a vCenter (or ESXi host) through pyVmomi's SOAP API.

Hosts (HostSystems) are the hypervisors; a host's cluster is its availability zone. pyVmomi is
imported on first use; the session is opened on first use, reused by every call of this
provider object and logged out by ``close()``, which never waits more than a few seconds.
Reads use one PropertyCollector call per query instead of one SOAP call per attribute.

Security: ``protocol`` is https and the server certificate is verified against the system's
trusted CAs, or the CAs of ``ca_path``, unless ``validate_certs`` is false (``tls.py``); plain
http is used only when asked for (``protocol: http``, e.g. a simulator on loopback). Either
choice adds a message to ``warnings``. The password never appears in errors, results or ``repr()``.

Asynchronous vSphere tasks are polled until they end or ``task_timeout`` passes; the Timeout
then carries the task id (``details.task_id``) for ``task_status``. A call abandoned by the
caller's time limit stops polling at its next poll.

Where a VM goes and where it is (``placement``) is worked out by ``placement.py``; a VM listing
reads the folders and resource pools above its VMs in the same query as the VMs. A VM moves
with RelocateVM_Task and MoveIntoFolder_Task. ``template`` makes ``create`` clone a VM or
template, then change the clone as ``reconfigure`` would; a new VM whose later steps fail is
deleted again. Guest information comes from VMware Tools, in the same read as the rest.

Tags are vSphere tags of the ``tag_category`` category, kept in vCenter's REST API
(``tagging.py``): its session is opened on the first VM dict or tag change, with the same TLS
settings (by a VM listing, in a thread while its SOAP query runs). An endpoint without that
API (an ESXi host) has no tags: VM dicts show none, and setting one raises NotSupported.
"""
import re
import socket
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, Timeout, Unavailable, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._connection import (
    SharedConnection, SharedConnectionMixin)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    CAPABILITIES, POWER_ACTIONS, Option, Provider, check_filters, match_filters)
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl
from ansible_collections.resilient.virt.plugins.module_utils.providers._reconfigure import (
    differences, list_changes)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.faults import (
    SESSION_LOST, classify_fault, fault_name)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
    MAX_NAME_LENGTH)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.tls import (
    certificate_error, check_ca_path, ssl_context)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import (
    VM_PATHS, custom_values, datastore_of, host_fields, retrieve, retrieve_view)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.placement import (
    KEYS as PLACEMENT_KEYS, TREE_PATHS, Tree)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.session import (
    Session)

__all__ = ("VSphereProvider", "resilient_virt_provider_types")

DEFAULT_SHUTDOWN_TIMEOUT = 60.0
HOT_PLUG_PATHS = ("config.cpuHotAddEnabled", "config.cpuHotRemoveEnabled",
                  "config.memoryHotAddEnabled")
HARDWARE = ("vcpus", "memory_mb", "disks", "interfaces")  # changed by ReconfigVM_Task
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
    """A vCenter or ESXi endpoint: every capability of the contract."""

    type_name = "vsphere"
    capabilities = frozenset(CAPABILITIES)
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
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vm_schema import (
            errors_of)
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
            validate_spec)

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
        """The TLS context of both APIs (None for http): see ``tls.py``."""
        return ssl_context(self.config)

    def _login(self):
        from pyVim.connect import SmartConnect

        from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import (
            run_with_timeout)

        kwargs = dict(protocol=self.config["protocol"], host=self.config["host"],
                      port=self.config["port"], user=self.config["username"],
                      pwd=self.config["password"], sslContext=self._ssl_context(),
                      httpConnectionTimeout=self.config["timeout"])
        return run_with_timeout(lambda: Session(SmartConnect(**kwargs), self, self._tag_client,
                                                 self._require_tags),
                                self.config["timeout"],
                                "vSphere login to %s" % self.endpoint())

    def _rest_login(self):
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.tagging import (
            TagClient)

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
        """Create the VM (stopped) where ``placement`` puts it, or clone ``template`` there.

        ``metadata`` and ``tags`` are stored once the VM exists (a clone also takes the
        hardware the spec asks for, then its customization); if that fails the VM is deleted
        again and the error says why. Tags on an endpoint without them, and every mistake in the
        spec that can be seen before, fail before anything is created.
        """
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
            config_spec, placement_request, validate_spec)

        spec = validate_spec(spec)
        session = self.session()
        if session.vm_refs(spec["name"]):
            raise Conflict("VM %r already exists on %s" % (spec["name"], self.key))
        tagger = session.require_tags() if spec["tags"] else None
        source = self._source(session, spec["template"]) if "template" in spec else None
        wanted, paths = placement_request(spec)
        target = session.placer().resolve(wanted, paths, az=spec.get("az"))
        if source is not None:
            return self._clone(session, spec, source, target)
        config = config_spec(spec, target["datastore"][0],
                             self._backing_resolver(session, target["host"][1]))
        task = target["folder"].CreateVM_Task(config=config, pool=target["pool"],
                                              host=target["host"][0])
        ref = session.wait(task, "creating VM %r" % spec["name"])

        def finish():
            self._labels(session, ref, {}, spec["metadata"], spec["tags"] if tagger else None)
            return session.describe(ref, spec["name"])

        return self._finish(session, ref, spec["name"], finish)

    def _source(self, session, template):
        """(ref, props, VM dict) of the VM or template ``template`` names: a name, or an
        inventory path (``/DC0/vm/templates/debian``)."""
        from pyVmomi import vim

        folder, _sep, name = template.rpartition("/")
        refs = session.vm_refs(name)
        found = retrieve(session.content, refs, {vim.VirtualMachine: VM_PATHS})
        tree = session.tree([props.get("parent") for ref, props in found])
        if folder:
            found = [(ref, props) for ref, props in found
                     if tree.path(props.get("parent")) == folder]
        if len(found) != 1:
            where = " in folder %s" % folder if folder else ""
            raise field_error("template", (
                "no VM or template named %r%s on %s; give the name or the inventory path "
                "(/<datacenter>/vm/<folder>/<name>) of an existing one" % (name, where, self.key))
                if not found else "%d VMs or templates are named %r on %s; give the inventory "
                "path of one: %s" % (len(found), name, self.key, ", ".join(sorted(
                    "%s/%s" % (tree.path(props.get("parent")), name) for ref, props in found))))
        return found[0] + (session.vm_dicts(found)[0],)

    def _clone(self, session, spec, source, target):
        """Clone ``source`` (ref, props, VM dict) to ``target``, then give the clone what the
        spec asks (``_change``) and its customization; a mistake that the source shows is
        refused before cloning."""
        from pyVmomi import vim

        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
            customization_spec)

        ref, props, vm = source
        name = spec["name"]
        wanted = dict((field, spec[field]) for field in HARDWARE if field in spec)
        self._device_specs(session, target["host"][0], props, vm, differences(vm, wanted))
        location = vim.vm.RelocateSpec(host=target["host"][0], pool=target["pool"],
                                       datastore=target["datastore"][1])
        task = ref.CloneVM_Task(folder=target["folder"], name=name, spec=vim.vm.CloneSpec(
            location=location, powerOn=False, template=False))
        clone = session.wait(task, "cloning %r into VM %r" % (spec["template"], name))
        wanted.update(metadata=spec["metadata"], tags=spec["tags"])

        def finish():
            made = self._change(session, clone, name, wanted)
            if "customization" in spec:  # once the clone has its final NICs
                custom = customization_spec(spec, len(made["interfaces"]))
                session.wait(clone.CustomizeVM_Task(spec=custom), "customizing VM %r" % name)
            return made

        return self._finish(session, clone, name, finish)

    def _finish(self, session, ref, name, work):
        """``work()`` on the new VM ``ref``: its VM dict. When it fails, the VM is deleted again
        and its error raised (a warning says when the VM could not be deleted), also in an
        attempt abandoned by its time limit: the retry waits for it, then looks."""
        try:
            return work()
        except Exception:
            try:
                session.wait(ref.Destroy_Task(), "deleting the half-made VM %r" % name)
            except Exception as exc:  # noqa: BLE001 - the step's error is the one to raise
                self.warnings.append("VM %r was created, then a step failed, and deleting it "
                                     "failed too (%s); delete it by hand" % (
                                         name, self.scrub(str(exc))))
            raise

    def delete(self, name):
        session = self.session()
        ref = session.find_vm(name)
        if session.power_state(ref) != "poweredOff":
            session.wait(ref.PowerOffVM_Task(), "powering off VM %r" % name)
        session.wait(ref.Destroy_Task(), "deleting VM %r" % name)

    def power(self, name, action, timeout=None):
        """``on`` also resumes a suspended VM; ``suspend`` saves a running VM's memory to disk
        (SuspendVM_Task); ``pause`` is NotSupported: vSphere cannot stop a VM's vCPUs and keep
        its memory in the host."""
        if action not in POWER_ACTIONS:
            raise field_error("action", "%r: use one of %s" % (action, ", ".join(POWER_ACTIONS)))
        if action == "pause":
            raise NotSupported("vSphere cannot pause a VM (stop its vCPUs and keep its memory in "
                               "the host); use suspend (memory saved to disk) or off instead")
        session = self.session()
        ref = session.find_vm(name)
        state = session.power_state(ref)
        changed = True
        if action == "suspend" and state == "poweredOff":
            raise Conflict("VM %r is stopped, so it cannot be suspended; power it on first"
                           % name)
        if action == "suspend" and state != "suspended":
            session.wait(ref.SuspendVM_Task(), "suspending VM %r" % name, timeout)
        elif action == "on" and state != "poweredOn":
            session.wait(ref.PowerOnVM_Task(), "powering on VM %r" % name, timeout)
        elif action == "off" and state != "poweredOff":
            session.wait(ref.PowerOffVM_Task(), "powering off VM %r" % name, timeout)
        elif action == "shutdown" and state != "poweredOff":
            self._shutdown(session, ref, name, state,
                           DEFAULT_SHUTDOWN_TIMEOUT if timeout is None else timeout)
        elif action == "reboot":
            self._reboot(session, ref, name, state, timeout)
        else:
            changed = False
        return dict(session.describe(ref, name), changed=changed)

    def _shutdown(self, session, ref, name, state, timeout):
        if state == "suspended":
            raise Conflict("VM %r is suspended, so its guest cannot shut down; power it on "
                           "first or power it off" % name)
        ref.ShutdownGuest()
        end = time.monotonic() + timeout
        while session.power_state(ref) != "poweredOff":
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
            session.wait(ref.ResetVM_Task(), "resetting VM %r" % name, timeout)

    def reconfigure(self, name, vcpus=None, memory_mb=None, metadata=None, tags=None,
                    disks=None, interfaces=None, autostart=None, placement=None):
        """Change what differs (``_reconfigure`` rules): the hardware in one ReconfigVM_Task,
        then custom attributes, then tags, then where the VM is (``_relocate``). vSphere keeps
        no configuration for the next start, so a running VM is refused what it cannot take
        live (vCPUs or memory without hot plug): Conflict, and nothing is changed. A removed
        disk's file is kept, with a warning. ``changed`` is False when nothing had to change
        (placement given in another form than VM dicts show, naming where the VM already is)."""
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
            validate_changes)

        if autostart is not None:
            raise NotSupported("vsphere provider cannot change autostart (a host setting of "
                               "ESXi that vSphere HA clusters ignore); remove autostart")
        wanted = validate_changes(dict(vcpus=vcpus, memory_mb=memory_mb, metadata=metadata,
                                       tags=tags, disks=disks, interfaces=interfaces,
                                       placement=placement))
        session = self.session()
        return self._change(session, session.find_vm(name), name, wanted)

    def _change(self, session, ref, name, wanted):
        """Give VM ``ref`` the ``wanted`` fields (checked) where they differ; its VM dict."""
        from pyVmomi import vim

        found = retrieve(session.content, [ref], {vim.VirtualMachine: VM_PATHS + HOT_PLUG_PATHS})
        if not found:
            raise NotFound("VM %r not found on %s" % (name, self.key))
        props = found[0][1]
        current = session.vm_dicts(found)[0]
        plan = differences(current, wanted)
        if not plan:
            return dict(current, changed=False)
        tagger = session.require_tags() if "tags" in plan else None
        hardware = [field for field in HARDWARE if field in plan]
        if hardware:
            self._check_power_for(name, props, current, plan, hardware)
            changes, kept = self._device_specs(session, props["runtime.host"], props, current, plan)
            config = vim.vm.ConfigSpec(deviceChange=changes, numCPUs=plan.get("vcpus"),
                                       memoryMB=plan.get("memory_mb"))
            session.wait(ref.ReconfigVM_Task(spec=config), "reconfiguring VM %r" % name)
            for label, file_name in kept:
                self.warnings.append(
                    "%s was removed from VM %r; its file %s is kept (delete it with the datastore "
                    "browser once it is no longer needed)" % (label, name, file_name))
        self._labels(session, ref, current["metadata"], plan.get("metadata"),
                     plan.get("tags") if tagger else None)
        moved = "placement" in plan and self._relocate(
            session, ref, name, props, plan["placement"],
            dict((key, "placement." + key) for key in PLACEMENT_KEYS))
        vm = session.describe(ref, name)
        if set(plan) == {"placement"} and not moved:
            vm["changed"] = False
        return vm

    def _labels(self, session, ref, have, metadata, tags):
        """Store the ``metadata`` values that differ from ``have``, then exactly ``tags`` (None:
        leave the tags)."""
        if metadata:
            self._set_metadata(session, ref, dict(
                (key, value) for key, value in metadata.items() if have.get(key) != value))
        if tags is not None:
            session.require_tags().set_tags(ref._moId, tags)

    def _device_specs(self, session, host, props, current, plan):
        """(device specs, kept disk files) doing the disks and interfaces of ``plan`` on the
        devices of ``props``, networks looked up on ``host``; InvalidSpec names a bad field."""
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.spec import (
            device_changes)
        from pyVmomi import vim

        changes, kept, backing_for = [], [], None
        for field in ("disks", "interfaces"):
            if field not in plan:
                continue
            steps = list_changes(field, current[field], plan[field])
            if field == "interfaces" and (steps["add"] or steps["update"]):
                host_props = retrieve(session.content, [host],
                                      {vim.HostSystem: ["name", "network"]})[0][1]
                backing_for = self._backing_resolver(session, host_props)
            specs, files = device_changes(field, steps, props["config.hardware.device"],
                                          backing_for)
            changes += specs
            kept += files
        return changes, kept

    def _relocate(self, session, ref, name, props, wanted, paths):
        """Move VM ``ref`` where ``wanted`` (placement keys) says: RelocateVM_Task for its host,
        resource pool and datastore (vMotion, storage vMotion), MoveIntoFolder_Task for its
        folder; only what differs. True when it moved."""
        from pyVmomi import vim

        current = {"host": props.get("runtime.host"), "pool": props.get("resourcePool"),
                   "folder": props.get("parent"),
                   "datastore": datastore_of(props.get("config.files.vmPathName"))}
        target = session.placer().resolve(wanted, paths, current)
        spec = vim.vm.RelocateSpec()
        if target["host"][0] != current["host"]:
            spec.host = target["host"][0]
        if target["pool"] != current["pool"]:
            spec.pool = target["pool"]
        if target["datastore"][0] != current["datastore"]:
            spec.datastore = target["datastore"][1]
        moved = bool(spec.host or spec.pool or spec.datastore)
        if moved:
            session.wait(ref.RelocateVM_Task(spec=spec), "moving VM %r to host %r" % (
                name, target["host"][1]["name"]))
        if target["folder"] != current["folder"]:
            session.wait(target["folder"].MoveIntoFolder_Task([ref]),
                       "moving VM %r into another folder" % name)
            moved = True
        return moved

    def _check_power_for(self, name, props, current, plan, hardware):
        """Conflict unless the VM can take the hardware changes of ``plan`` in its power state:
        anything when off; when running, devices, and vCPUs and memory only as far as hot plug
        allows (vCenter refuses the rest); nothing when suspended."""
        state = str(props.get("runtime.powerState"))
        if state == "poweredOff":
            return
        if state == "suspended":
            raise Conflict("VM %r is suspended and vSphere changes no hardware of a suspended VM "
                           "(%s); power it off first" % (name, ", ".join(hardware)))
        refused = []
        if "vcpus" in plan:
            more = plan["vcpus"] > current["vcpus"]
            if not props.get("config.cpuHotAddEnabled" if more else "config.cpuHotRemoveEnabled"):
                refused.append("vcpus (CPU hot %s is off)" % ("add" if more else "remove"))
        if "memory_mb" in plan:
            if plan["memory_mb"] < current["memory_mb"]:
                refused.append("memory_mb (memory cannot shrink while the VM runs)")
            elif not props.get("config.memoryHotAddEnabled"):
                refused.append("memory_mb (memory hot add is off)")
        if refused:
            raise Conflict("VM %r is running and vSphere cannot change %s while it runs; power "
                           "it off first (vSphere keeps no changes for the next start), or enable "
                           "hot plug on the VM" % (name, " or ".join(refused)))

    def migrate(self, name, hypervisor):
        """Move VM ``name`` to host ``hypervisor`` (vMotion when running), keeping its storage,
        and its resource pool when the host is in the same cluster."""
        from pyVmomi import vim

        session = self.session()
        ref = session.find_vm(name)
        found = retrieve(session.content, [ref], {vim.VirtualMachine: VM_PATHS})
        if not found:
            raise NotFound("VM %r not found on %s" % (name, self.key))
        paths = dict((key, "placement." + key) for key in PLACEMENT_KEYS)
        self._relocate(session, ref, name, found[0][1], {"host": hypervisor},
                       dict(paths, host="hypervisor"))
        return session.describe(ref, name)

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
            from ansible_collections.resilient.virt.plugins.module_utils.errors import classify

            out["error"] = classify(info.error, (self.classify_error,)).to_dict()
        return out

    # -- create helpers -----------------------------------------------------------------------
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

    def _set_metadata(self, session, ref, metadata):
        """Store metadata as custom attributes, defining the missing ones for VMs; a None value
        clears the attribute on this VM (vSphere then shows it empty: no value)."""
        from pyVmomi import vim

        manager = session.content.customFieldsManager
        keys = dict((f.name, f.key) for f in manager.field or []
                    if f.managedObjectType in (None, vim.VirtualMachine))
        for name, value in sorted(metadata.items()):
            if value is None and name not in keys:
                continue
            if name not in keys:
                keys[name] = _define_field(manager, name)
            manager.SetField(entity=ref, key=keys[name], value=value or "")
        session.forget_field_names()


def _define_field(manager, name):
    """Key of a new custom attribute ``name`` for VMs; one that another task defined since the
    fields were read (vSphere answers DuplicateName) is looked up instead."""
    from pyVmomi import vim

    try:
        return manager.AddCustomFieldDef(name=name, moType=vim.VirtualMachine).key
    except vim.fault.DuplicateName:
        for field in manager.field or []:
            if field.name == name and field.managedObjectType in (None, vim.VirtualMachine):
                return field.key
        raise


@hookimpl
def resilient_virt_provider_types():
    return {VSphereProvider.type_name: VSphereProvider}
