# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The failover_reservation task: hold reservations (state ``present``), remove them
(``absent``) or evacuate failed hosts (``evacuated``).

:func:`run_failover_reservation` takes the module's options (a dict) and a
:class:`TaskContext`. The reservations live in the state store (``storage.ReservationBook``);
backends that can hold capacity natively are kept in step with them.
"""
import dataclasses

from ansible_collections.resilient.virt.plugins.module_utils._failover import storage
from ansible_collections.resilient.virt.plugins.module_utils._failover.backup_restore import (
    restores_from_backup, validate_restore_from_backup)
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    check_requirements_met)
from ansible_collections.resilient.virt.plugins.module_utils._failover.cycle_inputs import Fleet
from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import (
    execute_move, lost_hosts, plan_evacuation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.priorities import (
    priority_of, validate_priorities)
from ansible_collections.resilient.virt.plugins.module_utils._failover.reconcile import run_cycle
from ansible_collections.resilient.virt.plugins.module_utils._failover.restore_handles import RestoreHandles
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import FailoverSettings
from ansible_collections.resilient.virt.plugins.module_utils._input import check_int, check_text
from ansible_collections.resilient.virt.plugins.module_utils._migration.maintenance import (
    FENCED, MAINTENANCE, read_marks)
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, QuotaExceeded, VirtError, field_error)

__all__ = ("run_failover_reservation",)


def run_failover_reservation(params, ctx):
    """The failover_reservation task's result."""
    check_text(params["creator"], "creator", what="a creator name")
    for name in ("max_vms_to_process", "max_changes"):
        check_int(params[name], name)
    given = _given(params)
    priorities = validate_priorities(params.get("priorities"))
    restores = validate_restore_from_backup(params.get("restore_from_backup"))
    book = storage.ReservationBook(ctx.store, params["creator"])
    if params["state"] == "absent":
        return _absent(ctx, book)
    if params["state"] == "evacuated":
        return _evacuated(params, ctx, book, given, priorities, restores)
    return _present(params, ctx, book, given)


def _given(params):
    """The fleet given in ``hypervisors`` and ``vms`` (None when the providers are listed
    instead, or nothing is planned), and the names in ``failed_hosts``, checked before the
    store is opened."""
    evacuating = params["state"] == "evacuated"
    if evacuating:
        for index, host in enumerate(params["failed_hosts"]):
            check_text(host, "failed_hosts[%d]" % index, what="a hypervisor name")
    if params["hypervisors"] is None or params["state"] == "absent":
        return None
    if params["all_providers"] or params.get("provider") is not None:
        raise InvalidSpec("give the fleet either with hypervisors and vms, or through "
                          "provider/all_providers, not both")
    # an evacuation's VMs may sit on hosts left out of the list: the failed ones
    return Fleet.given(params["hypervisors"], params["vms"], check_hosts=not evacuating)


def _incomplete(plan, failed):
    """What an evacuation left undone, in one sentence; None when it is complete."""
    parts = []
    if plan["unplaced"]:
        parts.append("%d of %d VMs on the failed hosts have no reservation of their own left on a "
                     "surviving hypervisor (see evacuation.unplaced)" % (len(plan["unplaced"]), plan["affected"]))
    if failed:
        parts.append("%d of %d moves failed (see evacuation.moves)" % (len(failed), len(plan["moves"])))
    return "; ".join(parts) or None


def _view(reservations):
    return dict((res.name, dict(host=res.host, allocations=dict(res.allocations))) for res in reservations)


def _fleet(ctx, given):
    """The fleet the task plans for (``given``, else listed from the providers), and the
    providers it opened to list it (by reference)."""
    if given is not None:
        return given, {}
    opened = dict((ref, ctx.open_provider(ref)) for ref in ctx.provider_references())
    return Fleet.listed(sorted(opened.items(), key=lambda pair: str(pair[0]))), opened


def _without_room_in_maintenance(hypervisors, fleet, opened, ctx):
    """``hypervisors`` with those in maintenance (their provider's state, or a mark of the
    ``hypervisor`` module) left without free room, each named in a warning: no reservation is
    made or grown there, and one there is dropped when it is next revalidated."""
    marks = read_marks(ctx.store).values()
    keys = dict((ref, provider.key) for ref, provider in opened.items())
    out = []
    for hv in hypervisors:
        key = keys.get(fleet.owners.get(hv.name))
        if fleet.states.get(hv.name) == MAINTENANCE or any(
                mark["hypervisor"] == hv.name and key in (None, mark["provider_key"])
                for mark in marks):
            ctx.warnings.append("hypervisor %s is in maintenance: it takes no failover "
                                "reservation, and one there is dropped when it is next "
                                "revalidated" % hv.name)
            hv = dataclasses.replace(hv, used_cpu=hv.cpu, used_memory_mb=hv.memory_mb)
        out.append(hv)
    return out


def _present(params, ctx, book, given):
    settings = FailoverSettings.from_dict(
        dict(
            requirements=params["requirements"], max_vms_to_process=params["max_vms_to_process"],
            revalidation_interval=params["revalidation_interval"],
            limit_one_new_per_hypervisor=params["limit_one_new_per_hypervisor"], creator=params["creator"],
            max_changes=params["max_changes"],
        ),
        path="",
    )
    fleet, opened = _fleet(ctx, given)
    # a count no VM could hold fails before the store is read or written
    check_requirements_met(settings.requirements, fleet.hypervisors, fleet.vms)
    hypervisors = _without_room_in_maintenance(fleet.with_capacity_held_by(book.foreign()),
                                               fleet, opened, ctx)
    deadline = ctx.settings.deadline or None  # planning stops with Timeout past it

    def cycle(reservations, counter, now, target=None):
        return run_cycle(hypervisors, fleet.vms, reservations, settings, now, counter, fleet.running,
                         deadline=deadline, stored=target)

    native = None
    if ctx.check_mode:
        stored = book.load()
        outcome = cycle(stored.reservations, stored.cycle, ctx.store.now(), stored.target)
        before = stored.reservations
    else:
        outcome, before, held = book.reconcile(cycle, fleet.definitions, fleet.owners, keeps_target=True)
        native = _sync_native(ctx, book, outcome, held, fleet.owners, opened)
    result = outcome.to_dict()
    result = dict(
        changed=outcome.changed_anything,
        reservations=result["reservations"],
        summary=result["summary"],
        vm_status=[status for status in result["vm_status"]
                   if params["vm_status"] == "all" or status["short_by"] > 0],
        deleted=result["deleted"],
    )
    if native:
        result["native_capacity"] = native
    if ctx.diff_mode and outcome.changed_anything:
        result["diff"] = dict(before=_view(before), after=_view(outcome.reservations))
    return result


def _sync_native(ctx, book, outcome, held, owners, opened):
    """Hold or release capacity natively where a backend can; the report, or None when nothing happened."""
    by_name = outcome.reservations_by_name()
    created = [by_name[name] for name in outcome.created if name in by_name]
    deleted = [deletion.reservation for deletion in outcome.deleted]
    new_held, report = storage.sync(created, deleted, opened, owners, held)
    if new_held != held:
        book.save_held(new_held)
    return _report_native(ctx, report)


def _report_native(ctx, report):
    """Warn about failed native holds or releases; the report, or None when nothing happened."""
    for error in report["errors"]:
        ctx.warnings.append("could not %s capacity natively for %s: %s"
                            % (error["action"], error["reservation"], error["error"]["message"]))
    return report if any(report.values()) else None


def _absent(ctx, book):
    native = None
    if ctx.check_mode:
        removed = book.load().reservations
    else:
        removed, held, owners = book.remove()
        if held:
            refs = set(owners.get(res.host, "") for res in removed if res.name in held) - {""}
            opened = dict((ref, ctx.open_provider(ref)) for ref in refs)
            dummy, report = storage.sync([], removed, opened, owners, held)
            native = _report_native(ctx, report)
    result = dict(changed=bool(removed), removed=sorted(res.name for res in removed), reservations=[])
    if native:
        result["native_capacity"] = native
    if ctx.diff_mode and removed:
        result["diff"] = dict(before=_view(removed), after={})
    return result


def _evacuated(params, ctx, book, given, priorities, restores):
    stored = book.load()
    if given is not None:
        fleet = given
        known = set(hv.name for hv in fleet.hypervisors) | set(vm.host for vm in fleet.vms)
        names = dict((item.get("uuid"), item.get("name")) for item in params["vms"])
    else:
        names = dict((uuid, vm.get("name")) for uuid, vm in stored.definitions.items())
        fleet = Fleet.given([], [dict(uuid=uuid, host=vm["hypervisor"], memory_mb=vm.get("memory_mb"),
                                      vcpus=vm.get("vcpus"))
                                 for uuid, vm in sorted(stored.definitions.items())], check_hosts=False)
        known = set(stored.owners) | set(vm.host for vm in fleet.vms)
    known |= set(res.host for res in stored.reservations)
    # a fenced hypervisor stays known once a plan without it forgot it: evacuating it again
    # finds nothing on it and changes nothing
    known |= set(mark["hypervisor"] for mark in read_marks(ctx.store).values() if mark["kind"] == FENCED)
    for index, host in enumerate(params["failed_hosts"]):
        if host not in known:
            raise field_error(
                "failed_hosts[%d]" % index,
                "%r is not a hypervisor of this fleet (known: %s); fix the name"
                % (host, ", ".join(sorted(known)) or "none"),
            )
    # a VM without a known name is matched by its uuid
    ranks = dict((vm.uuid, priority_of(names.get(vm.uuid) or vm.uuid, priorities)) for vm in fleet.vms)
    plan = plan_evacuation(params["failed_hosts"], fleet.vms, stored.reservations, ranks).to_dict()
    for entry in plan["moves"] + plan["unplaced"]:
        if names.get(entry["vm"]):
            entry["name"] = names[entry["vm"]]
    execute = params["execute"] and params["hypervisors"] is None
    if execute:
        lost = {}  # target provider key -> the hosts it reports disconnected, asked once
        plan["moves"] = [_move(ctx, move, stored, params["failed_hosts"], restores, lost) for move in plan["moves"]]
    failed = [move for move in plan["moves"] if move.get("action") == "failed"]
    changed = any(move.get("action") in ("recover", "migrate", "recreate", "restore") for move in plan["moves"])
    result = dict(changed=changed, evacuation=plan, reservations=[res.to_dict() for res in stored.reservations])
    problem = _incomplete(plan, failed)
    if problem and not params["allow_partial"]:
        err = VirtError(problem + "; set allow_partial: true to accept a partial evacuation")
        err.type = failed[0]["error"]["type"] if failed and not plan["unplaced"] else QuotaExceeded.type
        err.result = result
        raise err
    if problem:
        ctx.warnings.append(problem)
    return result


def _move(ctx, move, stored, failed_hosts, restores, lost):
    definition = stored.definitions[move["vm"]]
    if move["to_host"] not in stored.owners:
        message = "no provider is recorded for %s; run state=present from providers first" % move["to_host"]
        return dict(move, action="failed", error=dict(type="NotFound", message=message))
    target_ref, source_ref = stored.owners[move["to_host"]], definition.get("provider")
    target = ctx.open_provider(target_ref)
    source = target if source_ref == target_ref else None
    handles = RestoreHandles(ctx.store) if restores_from_backup(definition.get("name"), restores) else None
    try:
        if source is not None and target.key not in lost:
            lost[target.key] = lost_hosts(target)
    except VirtError as err:
        return dict(move, action="failed", name=definition["name"], error=err.to_dict())
    return execute_move(move, definition, source, target, ctx.check_mode,
                        _witnesses(ctx, stored.owners, target, failed_hosts), restores=handles,
                        lost=lost.get(target.key, frozenset()))


def _witnesses(ctx, owners, target, failed_hosts):
    """The providers of the other surviving hypervisors of the target's type: a marker made
    through the target and found through one of them proves a pool shared. Opening one
    contacts nothing; only the first that answers is used."""
    gone = set(failed_hosts) | set(mark["hypervisor"] for mark in read_marks(ctx.store).values()
                                   if mark["kind"] == FENCED)
    refs = sorted(set(ref for host, ref in owners.items() if host not in gone), key=str)
    providers = [ctx.open_provider(ref) for ref in refs]
    return [provider for provider in providers
            if provider.type_name == target.type_name and provider.key != target.key]
