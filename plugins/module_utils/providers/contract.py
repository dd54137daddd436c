"""What every provider backend implements: the Provider base class and the data shapes.

A backend subclasses :class:`Provider`, sets ``type_name``, ``capabilities`` and ``options``
(the keys of its ``provider`` dict), and implements the operations it lists in
``capabilities``; the others raise NotSupported. Methods return plain JSON-able dicts:

* VM dict: :class:`VM`; :func:`new_vm` makes one.
* snapshot dict: :class:`Snapshot`; :func:`new_snapshot` makes one.
* hypervisor dict: ``name, az, cpu, memory_mb, used_cpu, used_memory_mb, state, traits``, and
  ``vm_count`` (VMs defined on it) when the backend can count them without a call per VM.

Backends raise errors of ``plugins.module_utils.errors`` or let their library's exceptions out:
``classify_error`` then maps those into the taxonomy. Calls reach a backend through
``GuardedProvider`` (retries, breaker, rate limit, timeouts), so a backend does one attempt only.
An attempt abandoned at its time limit goes on in its thread and is waited for by the retry: a
backend lets it finish its work (never stops it halfway because a newer attempt exists), and
names the platform's long operations it starts with :meth:`Provider.started`.

VM names are checked by :meth:`Provider.check_name` before any call that takes one; backends
extend it with what their platform refuses or mishandles. Secret options (``Option(secret=True)``)
must have names that ``masking.is_secret_key`` recognises (``password``, ``api_token``...), so
that modules can mask them before anything is loaded; a backend that declares another name fails
to load. :meth:`Provider.scrub` removes the configuration's secrets from any text.

Environment fallbacks: ``Option(env="NAME")`` takes the value of the task's environment variable
``NAME`` when the provider dict leaves the key unset (absent or None) and the variable is set and
not empty (``environ``, given by the registry, is the task's environment; none is read when it is
None). Such a value is checked like a given one, and errors about it name the variable
(:meth:`Provider.option_path`). A secret option's variable must have a name
``masking.is_secret_variable`` recognises (``VMWARE_PASSWORD``): modules mask the values of such
variables before anything is loaded.
"""
from __future__ import annotations

import copy
import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any, Callable, ClassVar, TypedDict, cast

from ansible_collections.resilient.virt.plugins.module_utils._convert import (
    parse_duration, to_bool, to_float, to_int)
from ansible_collections.resilient.virt.plugins.module_utils._input import check_text
from ansible_collections.resilient.virt.plugins.module_utils._masking import (
    SECRET_VARIABLE_ENDINGS, is_secret_key, is_secret_variable, scrub, secret_values)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.inflight import record_started
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, NotSupported, VirtError, field_error, field_errors, redact)

__all__ = ("Provider", "Option", "VM", "VM_FIELDS", "new_vm", "check_filters", "match_filters",
           "required_text", "CAPABILITIES", "POWER_ACTIONS", "VM_STATES", "OWNER_KEY",
           "Snapshot", "SNAPSHOT_FIELDS", "SNAPSHOT_CAPABILITIES", "new_snapshot")

# the snapshot operations: optional, a backend lists all of them or none (hookspecs.py says how
# the collection uses them)
SNAPSHOT_CAPABILITIES = ("list_snapshots", "create_snapshot", "delete_snapshot",
                         "revert_snapshot")
CAPABILITIES = ("validate", "list_hypervisors", "list_vms", "describe", "find", "create",
                "delete", "power", "reconfigure", "task_status", "migrate",
                "migrate_to", "locate_disks", "maintenance", "recover") + SNAPSHOT_CAPABILITIES
POWER_ACTIONS = ("on", "off", "shutdown", "reboot", "pause", "suspend")
VM_STATES = ("running", "stopped", "paused", "suspended", "unknown")
VM_FIELDS = ("name", "uuid", "hypervisor", "az", "state", "vcpus", "memory_mb", "disks",
             "interfaces", "addresses", "guest", "metadata", "tags", "autostart", "placement",
             "restart_required", "provider", "provider_key")
SNAPSHOT_FIELDS = ("name", "description", "created", "parent", "memory", "quiesced", "vm_state",
                   "current", "id")
OWNER_KEY = "resilient_virt_owner"  # metadata key of the marker vm_fleet puts on the VMs it creates
FILTER_KEYS = ("name", "state", "tags", "hypervisor", "az")
NO_GUEST = {"agent": False, "agent_state": None, "os": None, "hostname": None}


class _VMRequired(TypedDict):
    name: str
    uuid: str | None
    hypervisor: str | None
    az: str | None
    state: str
    vcpus: int | None
    memory_mb: int | None
    disks: list[dict[str, Any]]
    interfaces: list[dict[str, Any]]
    addresses: list[str]
    guest: dict[str, Any]
    metadata: dict[str, Any]
    tags: list[str]
    autostart: bool | None
    placement: dict[str, Any]
    restart_required: bool
    provider: str
    provider_key: str


class VM(_VMRequired, total=False):
    """A VM as backends return it; every key but ``changed`` is always there (None or empty
    when unknown).

    ``state`` is one of VM_STATES. ``vcpus, memory_mb, disks, interfaces`` are as configured
    (what the VM runs with after its next start). ``addresses``: the IP addresses the provider
    knows, the primary first; each interface also carries its own ``addresses`` and
    ``address_source`` (agent, lease, arp, tools or None). ``guest``: ``agent`` (bool, the guest
    agent or VMware Tools answers), ``agent_state`` (the platform's word for it, or None), ``os``
    and ``hostname`` as the guest reports them. ``placement``: where the VM is, as the backend
    names it (vSphere: datacenter, cluster, host, resource_pool, folder, datastore).
    ``restart_required``: the running VM still runs with something other than its
    configuration. ``provider``: the name the user gave; ``provider_key``: its key.
    ``changed``: only in what :meth:`Provider.power` returns, False when nothing was done.
    """

    changed: bool


class Snapshot(TypedDict):
    """A snapshot of a VM as backends return it; every key is always there.

    ``name``: unique among the VM's snapshots where the platform requires it (libvirt), else
    as given (vSphere allows two of one name: the collection refuses to act on such a name).
    ``description``: the text stored with it, verbatim (the collection keeps its own marks at
    its end). ``created``: RFC 3339 UTC (``2026-11-23T03:00:00Z``). ``parent``: the name of
    the snapshot it builds on, or None for a root. ``memory``: it holds the VM's running state
    (reverting resumes the VM as it was). ``quiesced``: the guest's filesystems were frozen
    through its agent or tools while it was taken (False when unknown). ``vm_state``: the VM's
    state (VM_STATES) that a revert brings back: ``running`` with memory, else ``stopped``.
    ``current``: the VM's current snapshot (the parent of the next one; what the VM last
    reverted to or took). ``id``: the platform's own reference (a moref, the name).
    """

    name: str
    description: str
    created: str | None
    parent: str | None
    memory: bool
    quiesced: bool
    vm_state: str
    current: bool
    id: str


class Option:
    """One key of a provider dict: ``kind`` str|int|ratio|bool|list|duration, default, choices.

    ``secret`` options (passwords, tokens) are never shown in errors or results. ``env`` names
    the environment variable whose value is used when the provider dict leaves the key unset.
    ``aliases`` are other names the key may be given by (the names other collections use).
    """

    def __init__(self, kind: str = "str", default: Any = None, required: bool = False,
                 choices: tuple[Any, ...] | None = None, secret: bool = False,
                 doc: str = "", env: str | None = None, aliases: tuple[str, ...] = ()):
        self.aliases = tuple(aliases)
        self.kind = kind
        self.default = default
        self.required = required
        self.choices = choices
        self.secret = secret
        self.doc = doc
        self.env = env

    def convert(self, value: Any, path: str) -> Any:
        """Return ``value`` converted to this option's kind; ValueError says what is wrong."""
        if self.kind == "duration":
            return parse_duration(value, path)
        value = _CONVERTERS[self.kind](value)
        if self.choices is not None and value not in self.choices:
            raise ValueError("must be one of %s" % ", ".join(map(str, self.choices)))
        return value


def _to_str(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    return value


def _to_ratio(value: Any) -> float:
    try:
        number = to_float(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise ValueError("must be a positive number")
    return number


def _to_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError("must be a list of strings")
    return list(value)


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "str": _to_str, "int": to_int, "ratio": _to_ratio, "bool": to_bool, "list": _to_list}


def from_environment(options: dict[str, Option], config: dict[str, Any],
                     environ: Mapping[str, str] | None) -> dict[str, str]:
    """The keys ``config`` leaves unset (absent or None) whose option's ``env`` variable is set
    and not empty in ``environ``: key -> variable name (empty when ``environ`` is None)."""
    if not environ:
        return {}
    return dict((key, option.env) for key, option in options.items()
                if option.env and config.get(key) is None and environ.get(option.env))


def _with_environment(options: dict[str, Option], config: dict[str, Any],
                      environ: Mapping[str, str] | None) -> tuple[dict[str, Any], dict[str, str]]:
    """(``config`` with the values of its environment fallbacks, :func:`from_environment`)."""
    sources = from_environment(options, config, environ)
    values = dict(config)
    values.update((key, (environ or {})[name]) for key, name in sources.items())
    return values, sources


def _without_aliases(options: dict[str, Option], config: dict[str, Any]
                     ) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """``config`` with every alias given (``hostname``) under its option's key (``host``), and
    an error for an option given by two names."""
    config, errors = dict(config), []
    for key, option in options.items():
        for alias in option.aliases:
            if config.get(alias) is None:
                config.pop(alias, None)
                continue
            if config.get(key) is not None:
                errors.append({"path": "provider.%s" % alias, "message": "provider.%s is another "
                               "name of provider.%s, which is given too; give one of them"
                               % (alias, key)})
                config.pop(alias)
                continue
            config[key] = config.pop(alias)
    return config, errors


def config_errors(options: dict[str, Option], config: dict[str, Any], type_name: str | None,
                  environ: Mapping[str, str] | None = None
                  ) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Check ``config`` against ``options``: (clean dict, [{"path", "message"}...]).

    Keys whose value is None count as unset; an unset key with an ``env`` variable set in
    ``environ`` takes its value, and errors about it name the variable. Unknown keys are errors
    (typos are caught); secret values are never echoed.
    """
    config, errors = _without_aliases(options, config)
    clean = {}
    values, sources = _with_environment(options, config, environ)
    for key, value in values.items():
        path = sources.get(key) or "provider.%s" % key
        option = options.get(key)
        if value is None:
            continue
        if option is None:
            known = ", ".join(sorted(options))
            errors.append({"path": path, "message": "%s is not an option of the %s provider "
                           "(a typo?); known options: %s" % (path, type_name, known)})
            continue
        try:
            clean[key] = option.convert(value, path)
        except InvalidSpec as exc:
            errors.append({"path": path, "message": exc.message})
        except ValueError as exc:
            hidden = option.secret or is_secret_key(key)
            shown = "(hidden)" if hidden else "=" + redact(repr(value))[:80]
            origin = " (from the environment)" if key in sources else ""
            errors.append({"path": path, "message": "%s%s%s: %s" % (path, shown, origin, exc)})
    for key, option in options.items():
        if key in clean:
            continue
        if option.required:
            hint = "; give it, or set the environment variable %s" % option.env if option.env else ""
            errors.append({"path": "provider.%s" % key, "message": "provider.%s is required by "
                           "the %s provider%s" % (key, type_name, hint)})
        elif option.default is not None:
            clean[key] = copy.copy(option.default)
    return clean, errors


class Provider:
    """Base of every backend. ``config`` is the ``provider`` dict (already checked here)."""

    type_name: ClassVar[str | None] = None
    capabilities: ClassVar[frozenset[str]] = frozenset()
    # what reconfigure() can change on an existing VM (see _reconfigure.FIELDS)
    reconfigurable: ClassVar[frozenset[str]] = frozenset(("vcpus", "memory_mb"))
    options: ClassVar[dict[str, Option]] = {
        "type": Option(doc="Provider type."),
        "name": Option(doc="Name of this provider; also names its circuit breaker."),
        "az": Option(default="default", doc="Availability zone reported for its hypervisors."),
        "traits": Option("list", default=[], doc="Traits reported for its hypervisors."),
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        hidden = sorted(key for key, option in cls.options.items()
                        if option.secret and not is_secret_key(key))
        if hidden:
            raise TypeError(
                "%s.%s declares the secret option(s) %s under names that are not recognised as "
                "secret, so they could not be masked before validation; name them with password, "
                "token, secret, api_key, private_key or credential"
                % (cls.__module__, cls.__name__, ", ".join(hidden)))
        variables = sorted(str(option.env) for option in cls.options.values()
                           if option.secret and option.env and not is_secret_variable(option.env))
        if variables:
            raise TypeError(
                "%s.%s reads secret options from the environment variable(s) %s, whose names are "
                "not recognised as secret, so their values could not be masked before validation; "
                "end their names with one of %s" % (cls.__module__, cls.__name__, ", ".join(variables),
                                                    ", ".join(SECRET_VARIABLE_ENDINGS)))

    def __init__(self, config: dict[str, Any], environ: Mapping[str, str] | None = None):
        """``environ``: the task's environment, for the options' ``env`` fallbacks (None: none);
        a backend that overrides ``__init__`` passes it on."""
        if not isinstance(config, dict):
            raise InvalidSpec("provider must be a dict such as {type: %s, ...}, not %s"
                              % (self.type_name, type(config).__name__))
        given, sources = _with_environment(self.options, _without_aliases(self.options, config)[0],
                                           environ)
        self.sources: dict[str, str] = sources  # key -> the environment variable its value came from
        self._secrets = secret_values(given)
        clean, errors = config_errors(self.options, config, self.type_name, environ)
        if errors:
            raise field_errors(errors, "invalid provider")
        clean["type"] = self.type_name
        self.config: dict[str, Any] = clean
        self.warnings: list[str] = []  # things the user should know (insecure settings...); modules show them

    def option_path(self, key: str) -> str:
        """What errors about option ``key`` name: ``provider.<key>``, or the environment variable
        its value came from."""
        return self.sources.get(key) or "provider.%s" % key

    def scrub(self, text: str) -> str:
        """``text`` without this provider's secrets (secret options, passwords inside URLs)."""
        return scrub(text, self._secrets)

    def check_name(self, name: Any, creating: bool = False) -> None:
        """Raise InvalidSpec (field ``name``) unless ``name`` can name a VM of this provider.

        The base rules (``_input.text_problem``, shared with every module): a non-empty string
        of at most 255 characters without control, invisible or direction-changing characters;
        a new VM's name also neither starts nor ends with whitespace. Backends add what their
        platform refuses.
        """
        check_text(name, "name", what="a VM name")
        if creating and name.strip() != name:
            raise field_error("name", "%r starts or ends with whitespace; remove it" % name)

    @property
    def key(self) -> str:
        """``<type>:<name or endpoint>``: names the circuit breaker and the rate limit."""
        return "%s:%s" % (self.type_name, self.config.get("name") or redact(self.endpoint()))

    def endpoint(self) -> str:
        """Where the provider is (URI or host); used in ``key`` when no name is given."""
        return self.config.get("uri") or self.config.get("host") or "default"

    def safe_config(self) -> dict[str, Any]:
        """The configuration with secret values replaced, fit for results and logs."""
        return dict((k, "********" if self.options[k].secret else v)
                    for k, v in self.config.items())

    def started(self, handle: str) -> None:
        """Say that the operation in progress has started a long operation on the platform
        whose state ``task_status(handle)`` answers (a vSphere task id), before waiting for it.

        If the attempt is abandoned at its time limit, its retry follows that operation until
        it ends instead of starting the work again; call it as soon as the handle is known.
        """
        record_started(handle)

    def spec_errors(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """Every problem this backend finds in the VM spec ``spec`` of a create without
        contacting anything, as ``{path, message}`` dicts; the base class finds none."""
        return []

    def unsupported(self, operation: str) -> NotSupported:
        return NotSupported("%s provider does not support %s" % (self.type_name, operation))

    def require(self, operation: str) -> None:
        """Raise NotSupported unless ``operation`` is one of ``capabilities``."""
        if operation not in self.capabilities:
            raise self.unsupported(operation)

    def validate(self) -> dict[str, Any]:
        """Connect and check credentials; return facts about the endpoint (dict)."""
        raise self.unsupported("validate")

    def list_hypervisors(self) -> list[dict[str, Any]]:
        raise self.unsupported("list_hypervisors")

    def list_vms(self, filters: dict[str, Any] | None = None) -> list[VM]:
        raise self.unsupported("list_vms")

    def list_vm_summaries(self, filters: dict[str, Any] | None = None) -> list[VM]:
        """VM dicts as :meth:`list_vms` gives them, but ``disks`` and ``interfaces`` may be left
        empty by a backend that lists much faster without them (the inventory uses this).
        Needs the ``list_vms`` capability; by default it is :meth:`list_vms`."""
        return self.list_vms(filters)

    def list_hypervisors_and_vms(self, filters: dict[str, Any] | None = None
                                 ) -> dict[str, list[Any]]:
        """``{"hypervisors": list_hypervisors(), "vms": list_vm_summaries(filters)}``, what the
        inventory asks for. A backend that answers both from one request overrides it; its VMs
        may then also leave ``uuid``, ``metadata`` and ``autostart`` unknown (None, {}) when
        those cost a request per VM. Needs ``list_hypervisors`` and ``list_vms``."""
        return {"hypervisors": self.list_hypervisors(), "vms": self.list_vm_summaries(filters)}

    def describe(self, name: str) -> VM:
        """Return the VM dict of ``name``; raise NotFound when there is none."""
        raise self.unsupported("describe")

    def find(self, uuid: str) -> str:
        """The name by which every other call knows the VM whose ``uuid`` is given (its name, or
        a longer reference where names are not unique, such as an inventory path); NotFound
        when there is none. Lets users address a VM by uuid."""
        raise self.unsupported("find")

    def create(self, spec: dict[str, Any]) -> VM:
        """Create a VM (stopped) from ``spec``; InvalidSpec lists every bad field by path."""
        raise self.unsupported("create")

    def delete(self, name: str) -> None:
        raise self.unsupported("delete")

    def power(self, name: str, action: str, timeout: float | None = None) -> VM:
        """``action`` in POWER_ACTIONS; ``shutdown`` waits up to ``timeout`` s, then Timeout.
        ``on`` also resumes a paused VM and restores a suspended one; ``pause`` stops its vCPUs
        (memory kept in the host), ``suspend`` saves its memory to disk and stops it; a backend
        that cannot do one raises NotSupported with the reason.

        Returns the VM dict, with ``changed`` False when the VM already was in the wanted state
        (another task got there first) and nothing was done; a missing ``changed`` means True.
        """
        raise self.unsupported("power")

    def reconfigure(self, name: str, vcpus: int | None = None, memory_mb: int | None = None,
                    **changes: Any) -> VM:
        """Change the fields of ``reconfigurable`` that are given (only those are passed), each
        to its wanted value as ``_reconfigure`` defines it: ``metadata`` merged (a None value
        removes the key), ``tags`` exact, ``disks`` and ``interfaces`` exact lists matched by
        position (``_reconfigure.list_changes``; a removed disk's storage is kept, with a warning
        that names it), ``autostart``, ``boot``. Live where the platform can, otherwise in the
        configuration only: the VM dict returned then has ``restart_required`` True, and
        describes the configuration, so a second call with the same values changes nothing.
        """
        raise self.unsupported("reconfigure")

    def task_status(self, task_id: str) -> dict[str, Any]:
        raise self.unsupported("task_status")

    # -- snapshots (optional: SNAPSHOT_CAPABILITIES; hookspecs.py is the manual) ---------------
    def list_snapshots(self, name: str) -> list[Snapshot]:
        """The snapshots of VM ``name``, parents before children; NotFound when there is no such
        VM."""
        raise self.unsupported("list_snapshots")

    def create_snapshot(self, name: str, snapshot: str, description: str = "",
                        memory: bool = False, quiesce: bool | str = False) -> Snapshot:
        """Take snapshot ``snapshot`` of VM ``name`` and return it.

        ``memory``: keep the running state too. ``quiesce``: freeze the guest's filesystems
        through its agent or tools while the disks are taken: True fails (nothing made) when
        that cannot be done, ``"best_effort"`` then takes the snapshot unquiesced and says why
        under the returned dict's extra key ``not_quiesced``. A kind the backend cannot make
        for this VM (memory with a disk that cannot hold it, a disk-only snapshot of a running
        VM...) raises NotSupported naming why and the fix, before anything is made.
        """
        raise self.unsupported("create_snapshot")

    def delete_snapshot(self, name: str, snapshot: str) -> None:
        """Delete snapshot ``snapshot`` of VM ``name``; its children then build on its parent
        and keep their data. A snapshot already gone is NotFound."""
        raise self.unsupported("delete_snapshot")

    def revert_snapshot(self, name: str, snapshot: str) -> VM:
        """Bring VM ``name`` back to snapshot ``snapshot``: its disks, and its memory and
        running state when the snapshot has them (``vm_state``); the VM then is in that state,
        whatever it was in before. Returns the VM dict after."""
        raise self.unsupported("revert_snapshot")

    # -- migration (optional: hookspecs.py is the manual) ---------------------------------------
    def migrate(self, name: str, hypervisor: str, **placement: Any) -> VM:
        """Move VM ``name`` to the host ``hypervisor`` of this provider, live when it runs;
        ``placement`` may give ``resource_pool`` and ``datastore`` (only those given are
        passed). Returns the VM dict after the move."""
        raise self.unsupported("migrate")

    def migrate_to(self, name: str, target: Provider, live: bool = True,
                   timeout: float | None = None, bandwidth_mib: int | None = None
                   ) -> dict[str, Any]:
        """Move VM ``name`` to the provider ``target`` (another endpoint of this backend's
        type), its disks copied, live when it runs (``live`` False: paused while its memory is
        copied), a stopped VM cold; a migration still going on after ``timeout`` s is cancelled
        and raises Timeout, the VM running on this provider as before. Returns ``{"vm": the VM
        dict on the target, "mode": live, paused or cold, "downtime_ms": the guest's downtime
        or None, "copied_disks": [paths on the target], "shared_disks": [paths of disks on
        storage both share, used where they are]}``."""
        raise self.unsupported("migrate_to")

    def locate_disks(self, paths: list[str], witnesses: Sequence[Provider] = ()
                     ) -> dict[str, dict[str, Any] | None]:
        """Where this provider's host sees the disk files ``paths`` of a VM that ran elsewhere:
        ``{path: None when it has no volume at that path, else {"pool": its storage pool,
        "shared": True when a marker made there was found through one of ``witnesses`` (other
        providers of the same type, tried in order until one answers), False when that
        witness has a pool of that name that does not show it, None when no witness could
        tell, "witness": the key of the one that told, "witness_error": why none could}}``."""
        raise self.unsupported("locate_disks")

    def recover(self, name: str, hypervisor: str) -> VM:
        """Start VM ``name``, whose host failed and is fenced (proven powered off), on the host
        ``hypervisor`` of this provider, from its own disks, in the platform's own way of
        restarting a failed host's VM. Returns the VM dict after, the VM running there."""
        raise self.unsupported("recover")

    def set_maintenance(self, hypervisor: str, enabled: bool) -> bool:
        """Put the host ``hypervisor`` of this provider in the platform's maintenance mode
        (``enabled``) or take it out; True when its mode changed. Its VMs are moved first by
        the collection, never by this call."""
        raise self.unsupported("maintenance")

    def classify_error(self, exc: BaseException) -> VirtError | None:
        """Map an exception of the backend's library to a VirtError, or None to pass."""
        return None

    def abandon(self) -> None:
        """A call was abandoned while still running: never reuse or wait on its connection."""

    def close(self) -> None:
        """Release connections; must return promptly even when the endpoint hangs."""


def new_vm(provider: Provider, name: str, **fields: Any) -> VM:
    """A VM dict with every key of :class:`VM` but ``changed`` (None or empty when unknown):
    ``provider`` is the name the user gave the provider (its key when it has none),
    ``provider_key`` its key."""
    vm: dict[str, Any] = {"name": name, "uuid": None, "hypervisor": None, "az": provider.config.get("az"),
                          "state": "unknown", "vcpus": None, "memory_mb": None, "disks": [],
                          "interfaces": [], "addresses": [], "guest": dict(NO_GUEST),
                          "metadata": {}, "tags": [],
                          "autostart": None, "placement": {}, "restart_required": False,
                          "provider": provider.config.get("name") or provider.key,
                          "provider_key": provider.key}
    vm.update(fields)
    return cast(VM, vm)


def new_snapshot(name: str, **fields: Any) -> Snapshot:
    """A snapshot dict with every key of :class:`Snapshot` (the defaults: no description, no
    parent, no memory, not quiesced, ``stopped``, not current, ``id`` the name)."""
    snapshot: dict[str, Any] = {"name": name, "description": "", "created": None, "parent": None,
                                "memory": False, "quiesced": False, "vm_state": "stopped",
                                "current": False, "id": name}
    snapshot.update(fields)
    return cast(Snapshot, snapshot)


def required_text(mapping: Any, key: str, path: str) -> str:
    """The non-empty string ``mapping[key]`` of a request or handle; InvalidSpec naming ``path``
    otherwise."""
    value = mapping.get(key) if isinstance(mapping, dict) else None
    if not isinstance(value, str) or not value:
        raise field_error(path, "must be a non-empty string, got %r" % (value,))
    return value


def check_filters(filters: dict[str, Any] | None) -> None:
    """Raise InvalidSpec naming ``filters.<key>`` for an unknown filter key."""
    bad = sorted(set(filters or {}) - set(FILTER_KEYS))
    if bad:
        raise field_errors([{"path": "filters.%s" % key, "message": "unknown filter; known filters: "
                             + ", ".join(FILTER_KEYS)} for key in bad])


def match_filters(vm: Mapping[str, Any], filters: dict[str, Any] | None) -> bool:
    """True when ``vm`` passes ``filters``: name (glob), state, hypervisor, az, tags (all)."""
    filters = filters or {}
    check_filters(filters)
    if "name" in filters and not fnmatch.fnmatchcase(vm.get("name") or "", filters["name"]):
        return False
    for key in ("state", "hypervisor", "az"):
        if key in filters and vm.get(key) != filters[key]:
            return False
    tags = filters.get("tags") or []
    return set([tags] if isinstance(tags, str) else tags) <= set(vm.get("tags") or [])
