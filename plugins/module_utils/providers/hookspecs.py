"""Every hook of the ``resilient_virt`` plugin system; these docstrings are the documentation.

A plugin is any object (usually a module) with functions named like the hooks below and marked
with ``HookimplMarker("resilient_virt")`` (:data:`hookimpl` here, or a plugin's own marker with
the same project name, so a third-party package needs only ``pluggy`` to declare hooks).

How plugins are found (see ``_registry.py``):

* built-in backends (``libvirt``, ``vsphere``) are modules of this collection, imported only
  when their provider type is asked for;
* third-party backends are declared in the entry point group ``resilient_virt.providers``
  (``<type name> = "package.module"`` or ``"package.module:object"``); they are loaded only
  when the requested type is not built in;
* observer plugins (metrics, logging, fault injection) are listed, comma separated, in the
  environment variable ``RESILIENT_VIRT_PLUGINS`` as ``package.module`` or
  ``package.module:object``, or passed to ``_registry.open_provider(plugins=...)``.

Arguments are passed by name: an implementation may accept any subset of them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

try:
    import pluggy
except ImportError:  # _registry.plugin_manager() reports it when a provider is opened
    pluggy = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ansible_collections.resilient.virt.plugins.module_utils.errors import VirtError
    from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import Provider

PROJECT = "resilient_virt"


def _unmarked(function: Callable[..., Any] | None = None, **_options: Any) -> Any:
    """Stand-in for pluggy's markers when pluggy is missing: leaves functions unchanged."""
    return _unmarked if function is None else function


hookspec = pluggy.HookspecMarker(PROJECT) if pluggy else _unmarked
hookimpl = pluggy.HookimplMarker(PROJECT) if pluggy else _unmarked


@hookspec
def resilient_virt_provider_types() -> Any:
    """Declare the provider types this plugin implements.

    Return a dict ``{type_name: ProviderSubclass}`` or a list of Provider subclasses (each
    class's ``type_name`` is then used). The classes subclass
    ``plugins.module_utils.providers.contract.Provider``. Called once per process when a
    provider is opened; every plugin's answer is collected (not firstresult). Two plugins
    declaring the same type name is an error that names both.
    """


@hookspec(firstresult=True)
def resilient_virt_classify_error(provider: Provider, exc: BaseException) -> VirtError | None:
    """Map ``exc`` (raised by ``provider``'s library) into the error taxonomy.

    ``provider`` is the Provider instance, ``exc`` the exception. Return a ``VirtError`` from
    ``plugins.module_utils.errors`` (for example ``Unavailable(str(exc))`` so that it is retried
    and counts against the circuit breaker) or None to pass. firstresult: the first non-None
    answer wins. Called only when the provider's own ``classify_error`` returned None; when every
    answer is None the standard classifier decides (network errors -> Unavailable/Timeout, any
    other exception -> Internal).
    """


@hookspec
def resilient_virt_before_call(provider: Provider, operation: str, arguments: dict[str, Any]) -> None:
    """Called before every attempt of a provider operation, inside the attempt.

    ``operation`` is the method name (``describe``, ``create``, ``power``, ``create_snapshot``...,
    or ``hold_capacity``/``release_capacity``), ``arguments`` a dict of its arguments (for example
    ``{"name": "web1", "action": "on", "timeout": None}``); do not modify it. The return value
    is ignored. An implementation may raise to inject a fault: the exception is handled exactly
    like a failure of the provider call itself (classified, counted by the circuit breaker,
    retried when retryable) and the provider is not called for this attempt. All
    implementations are called (not firstresult).
    """


@hookspec
def resilient_virt_after_call(provider: Provider, operation: str, arguments: dict[str, Any],
                              outcome: str, error: VirtError | None, duration: float) -> None:
    """Called after every attempt of a provider operation, to observe it (metrics, logging).

    ``outcome`` is ``"ok"``, ``"error"`` (``error`` is then the classified ``VirtError``) or
    ``"timeout"`` (the attempt did not answer within its time limit and was abandoned; ``error``
    is the ``Timeout``). ``duration`` is the attempt's wall time in seconds. A retry answered by
    the look-before-retry (the earlier attempt had done the work) is reported too, although no
    ``resilient_virt_before_call`` preceded it. The return value is ignored and
    exceptions raised here are ignored too, so an observer cannot change the result of an
    operation. All implementations are called (not firstresult).
    """


@hookspec(firstresult=True)
def resilient_virt_hold_capacity(provider: Provider,
                                 reservation: dict[str, Any]) -> dict[str, Any] | None:
    """Hold failover capacity natively on the provider, when it has such a feature.

    ``reservation`` is a dict describing the capacity (for example ``name``, ``hypervisor``,
    ``vcpus``, ``memory_mb``). Return a JSON-able dict identifying what was held (kept with the
    reservation and passed back to ``resilient_virt_release_capacity``), or None when the
    provider cannot hold capacity natively: the collection then tracks the reservation itself.
    firstresult. Called through ``GuardedProvider.hold_capacity`` like a mutating provider call
    (time limit, retries, circuit breaker), so the implementation must be idempotent.
    """


@hookspec(firstresult=True)
def resilient_virt_release_capacity(provider: Provider,
                                    reservation: dict[str, Any]) -> bool | None:
    """Release capacity held by ``resilient_virt_hold_capacity``.

    ``reservation`` is the same dict, with the held value under ``reservation["held"]``.
    Return True when released (releasing something already gone counts as released) or None
    when not supported. firstresult. Called through ``GuardedProvider.release_capacity`` like a
    mutating provider call, so the implementation must be idempotent.
    """


# -- snapshots --------------------------------------------------------------------------------
# Snapshots are kept beside the VM and reverted in place (backups, below, are copies kept
# elsewhere). They are optional Provider methods, not hooks: a backend that takes snapshots
# lists every name of ``contract.SNAPSHOT_CAPABILITIES`` in its ``capabilities`` and implements
#
#   list_snapshots(name) -> [snapshot dict], parents before children
#   create_snapshot(name, snapshot, description, memory, quiesce) -> snapshot dict
#   delete_snapshot(name, snapshot) -> None (children keep their data)
#   revert_snapshot(name, snapshot) -> VM dict, the VM in the snapshot's ``vm_state``
#
# (their docstrings in ``contract.Provider``; the snapshot dict is ``contract.Snapshot``). A
# backend without them has the module fail with NotSupported naming the provider. What the
# collection does around them (``_guarded.py``, ``_snapshot/``):
#
# * ``list_snapshots`` is a read, the others changing calls, each guarded (time limit, retries,
#   circuit breaker) and seen by ``resilient_virt_before_call``/``_after_call`` under its name.
# * A retried ``create_snapshot`` looks first: when the VM has a snapshot of that name, the
#   earlier attempt made it and it is not made again. A backend that starts a platform task
#   names it with ``Provider.started`` so that the retry follows it. ``delete_snapshot`` is
#   looked before retrying too (gone: done); ``revert_snapshot`` is redone (a revert twice ends
#   the same).
# * Names: the task refuses a name two snapshots of the VM share; a backend checks what its
#   platform refuses in a snapshot name (InvalidSpec naming ``name``).
# * ``description`` is stored and returned verbatim: the collection ends it with a line of its
#   own (``[resilient.virt snapshot]``, ``[resilient.virt snapshot, pinned]``) to tell the
#   snapshots it made, which alone its retention may delete, and those never to delete.
# * ``memory`` and ``quiesce``: the task sends ``memory`` False for a VM that is not running
#   (with a warning), refuses ``quiesce`` True with ``memory`` True (a snapshot with memory is
#   whole already) and sends ``quiesce`` False then, and for a stopped VM. What is left to the
#   backend: a running VM's snapshot with or without memory, quiesced, best effort or not.
#   Every refusal (NotSupported, Conflict, InvalidSpec) comes before anything is made, names
#   the VM and why, and says what would work instead.


# -- migration --------------------------------------------------------------------------------
# Moving a VM to another hypervisor. Optional Provider methods, not hooks, one of two kinds
# (their docstrings in ``contract.Provider``; the ``vm_migrate`` module uses them, through
# ``_migration/``):
#
#   migrate(name, hypervisor, **placement) -> VM dict   capability ``migrate``: between the hosts
#       of one provider (vSphere: RelocateVM_Task); ``placement`` may give ``resource_pool`` and
#       ``datastore``, passed only when the user gives them.
#   migrate_to(name, target, live, timeout, bandwidth_mib) -> {vm, mode, downtime_ms,
#       copied_disks, shared_disks}   capability ``migrate_to``: to another provider of the same backend
#       (libvirt: one provider per host); ``target`` is that provider, unguarded (the backend
#       uses its connection; abandoning the call abandons it too).
#   locate_disks(paths, witnesses) -> {path: None or {pool, shared, witness, witness_error}}
#       capability ``locate_disks``: where this host sees the disk files of a VM that ran on a
#       failed host, and whether their pools are proved shared through one of ``witnesses``
#       (unguarded providers of the same backend); the evacuation of a fenced hypervisor
#       (``_failover/evacuation.py``) defines the VM on those files. A read, guarded as one.
#
# What the collection does around them (``_guarded.py``): both are changing calls, guarded and
# seen by ``resilient_virt_before_call``/``_after_call`` under their names. A retried call looks
# first: ``migrate`` is done when the VM is on ``hypervisor``, ``migrate_to`` when ``target``
# has the VM and this provider has not; the work of an abandoned attempt is waited for before
# that look. ``migrate_to``'s ``timeout`` is shorter than the attempt's time limit (checked
# before the call): a backend keeps it itself, cancels the migration and raises Timeout, which
# is an answer (not retried, not counted by the circuit breaker). What a backend owes:
#
# * Check what it can before anything moves (the target's CPU where the platform tells, the
#   storage the disks need there), and refuse with Conflict, NotSupported or InvalidSpec naming
#   what fails and the fix.
# * A migration that fails or is cancelled leaves the VM where it was, running if it ran, and
#   removes what it made on the target; there are never two copies of the VM that run.
# * ``changed`` is False in the VM dict when the VM already was where asked (``migrate``).
#
#   recover(name, hypervisor) -> VM dict   capability ``recover``: start the VM of a host that
#       failed and is fenced (proven powered off) on the host ``hypervisor`` of this provider,
#       from its own disks, the platform's way (vSphere: registered again from its datastore;
#       Proxmox VE: its HA manager's recovery). The evacuation of a fenced hypervisor
#       (``_failover/evacuation.py``) calls it for a move within one provider whose
#       ``list_hypervisors`` reports the VM's host ``disconnected`` (``migrate`` otherwise, which
#       needs the VM's host to answer). Guarded as a changing call; a retry
#       looks first whether the VM runs on ``hypervisor``. The backend checks what the move
#       needs (the host sees the VM's storage) and refuses with Conflict or NotSupported naming
#       it before anything changes.
#
#   set_maintenance(hypervisor, enabled) -> bool   capability ``maintenance``: the host in or out
#       of the platform's own maintenance mode (vSphere: EnterMaintenanceMode_Task), True when
#       it changed; its hypervisor dict then reads ``state: maintenance``. The ``hypervisor``
#       module calls it once it has moved the VMs off itself; a retry looks at that state first.

# -- backups ----------------------------------------------------------------------------------
# A backup or a restore is one provider operation followed through a handle: ``prepare`` plans
# it without changing anything, the collection writes the handle to the backup record, then
# ``start`` starts it, and ``poll`` follows it, from this process or from a later run that adopts
# the record after its owner died. Every hook is firstresult: a plugin answers None for a
# provider it does not serve; when no plugin answers, the operation raises NotSupported.
# Implementations make one attempt: calls are guarded like provider calls (time limit, retries,
# circuit breaker), prepare/poll/list as reads, start/cancel/delete as changing calls.
#
# ``request`` (to prepare):
#   {"kind": "backup", "name": record name, "vm": VM name, "incremental": bool,
#    "parent": the artifact of the backup an incremental one builds on, or None}
#   {"kind": "restore", "name": record name, "vm": VM the backup was taken of,
#    "backup": the artifact to restore (an incremental one names its chain through "parent"),
#    "target": VM name to restore to (the same VM, stopped, or a new name)}
# ``handle``: a JSON-able dict (at most a few KiB) that names the operation on the provider,
#   with everything poll/cancel need, including ``kind`` and ``name`` from the request.
# ``artifact``: a JSON-able dict describing a stored backup: ``name`` (the record name),
#   ``vm``, ``incremental`` (bool), ``parent`` (name of the backup it builds on, or None),
#   ``location`` (where it lives, e.g. a path or a snapshot), ``size_bytes`` (or None),
#   ``created_at`` (RFC 3339 UTC) and ``complete`` (False for an incomplete leftover), plus
#   anything else the backend needs to restore or delete it.


@hookspec(firstresult=True)
def resilient_virt_backup_prepare(provider: Provider, request: dict[str, Any]) -> dict[str, Any] | None:
    """Plan a backup or restore of ``request`` and return its handle, changing nothing.

    Check what can be checked without changing anything (the VM exists and can be backed up,
    an incremental backup's parent is usable, a restore target is stopped or absent) and raise
    InvalidSpec, Conflict or NotSupported with the fix. The same request must give the same
    handle, so that a retried ``start`` finds the operation an earlier attempt started.
    firstresult; called as a read.
    """


@hookspec(firstresult=True)
def resilient_virt_backup_start(provider: Provider, handle: dict[str, Any]) -> dict[str, Any] | None:
    """Start the operation of ``handle``; return the handle, completed with what only the start
    knows (a task id). Idempotent: when the operation already runs or has finished, return
    without starting it again. May finish the work before returning (a copy of a stopped VM's
    disks); ``poll`` then reports it completed. firstresult; called as a changing call, looked
    before retrying (a poll that finds the operation counts as started).
    """


@hookspec(firstresult=True)
def resilient_virt_backup_poll(provider: Provider, handle: dict[str, Any]) -> dict[str, Any] | None:
    """The state of the operation of ``handle``: a dict with ``state`` one of ``running``,
    ``completed``, ``failed``, ``cancelled`` or ``missing`` (the provider knows nothing of it:
    never started, or its traces are gone), ``progress`` (0-100, or None), ``message`` (why it
    failed), ``warnings`` (list) and, when completed, ``artifact`` (for a backup; what it
    stored) or ``vm`` (for a restore; the restored VM's name). A backup whose files are not all
    complete is never reported completed. firstresult; called as a task status read.
    """


@hookspec(firstresult=True)
def resilient_virt_backup_cancel(provider: Provider, handle: dict[str, Any]) -> bool | None:
    """Cancel the operation of ``handle`` and remove what it left half-made; True when it is
    cancelled or was not running. Idempotent. firstresult; called as a changing call."""


@hookspec(firstresult=True)
def resilient_virt_backup_list(provider: Provider, vm: str | None) -> list[dict[str, Any]] | None:
    """The backups stored on the provider, of ``vm`` or of every VM (``vm`` None): a list of
    artifacts, incomplete leftovers included with ``complete`` False. firstresult; called as a
    read."""


@hookspec(firstresult=True)
def resilient_virt_backup_delete(provider: Provider, artifact: dict[str, Any]) -> bool | None:
    """Delete the stored backup ``artifact`` (as listed, or as ``poll`` returned it); True when
    it is gone, also when it was already gone. Idempotent. firstresult; called as a changing
    call."""


# -- fencing ----------------------------------------------------------------------------------


@hookspec(firstresult=True)
def resilient_virt_fence_hypervisor(hypervisor: str, fencing: dict[str, Any],
                                    timeout: float) -> dict[str, Any] | None:
    """Fence the hypervisor ``hypervisor``: make sure that it runs nothing any more, and prove it.

    Before the VMs of a hypervisor that stopped answering are started elsewhere, it must be
    fenced: a libvirtd that died or hangs may leave its guests running, and a second copy of a
    VM on the same disks destroys them. ``fencing`` is the hypervisor's fencing settings: ``type``
    names the agent (built in: ``ipmi``, ``redfish``), the other keys are that agent's settings (an
    address, credentials named as every secret is, so that they are masked; the agent refuses
    a key it does not know, naming it). ``timeout`` is the seconds the agent may take, the
    proof included; one that takes longer is not waited for, and counts as not fenced.

    Return None for a ``type`` this plugin does not serve. Otherwise a dict: ``fenced`` (bool),
    ``action`` (what was done, such as ``ForceOff``; None when nothing had to be), ``evidence``
    (what proves it) and ``reason`` (when not fenced: why, and what to do).

    ``fenced`` True means **proven off**: after its action, the agent read from the power
    control itself (the BMC's power state, not the hypervisor's silence) that the hypervisor is
    powered off, or, for an agent that cuts storage instead, that the storage refuses it. An
    agent that cannot prove it (no answer, refused credentials, an untrusted certificate, a
    power state still on or unknown when ``timeout`` runs out) answers ``fenced`` False with
    the reason; a hypervisor that is not fenced is never recovered automatically. Never put a
    credential in the answer. An exception raised here is taken as "not fenced", its message as
    the reason. firstresult: the agent of the type answers.
    """
