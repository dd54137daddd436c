# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the ``vm_migrate`` and ``hypervisor`` modules do: :func:`run_vm_migrate` and
:func:`run_hypervisor` take the module's options (a dict) and a :class:`TaskContext`.

Where the VM is decides first: a VM already on its target is left alone (``changed`` false),
also when an earlier run moved it and this provider no longer has it. Then the prechecks
(``prechecks.py``) run on what the providers report, and only when all pass does the VM move:
between two providers of a backend with ``migrate_to`` (libvirt: one provider per host), or
between the hosts of one provider with ``migrate`` (vSphere). Check mode stops before the move
and shows the plan. A drain (``hypervisor``, ``state: maintenance``) plans every VM's move
(``drain_plan.py``), makes each one as ``vm_migrate`` does (``drain.py``) and marks the
hypervisor (``maintenance.py``) only when none is left; ``state: fenced`` is ``fence_step.py``.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._convert import parse_duration
from ansible_collections.resilient.virt.plugins.module_utils._failover.storage import (
    ReservationBook)
from ansible_collections.resilient.virt.plugins.module_utils._input import Problems, check_int, check_text
from ansible_collections.resilient.virt.plugins.module_utils._migration import maintenance
from ansible_collections.resilient.virt.plugins.module_utils._migration.drain import (
    run_moves, shown_move)
from ansible_collections.resilient.virt.plugins.module_utils._migration.drain_plan import (
    Candidate, plan_drain)
from ansible_collections.resilient.virt.plugins.module_utils._migration.fence_step import (
    run_fenced)
from ansible_collections.resilient.virt.plugins.module_utils._migration.prechecks import (
    fleet_check, prechecks, refusal)
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, field_error, field_errors)

__all__ = ("run_vm_migrate", "run_hypervisor", "check_params", "planned_mode")

DEFAULT_TIMEOUT_SHARE = 0.8  # of resilience.timeout_mutating, when ``timeout`` is not given
MAX_BANDWIDTH_MIB = 1024 * 1024
MAX_PARALLEL = 16  # moves of one drain at a time


def check_params(params):
    """The options as the task uses them; one InvalidSpec listing every problem."""
    problems, checked = Problems(), dict(params)
    check = problems.check
    check("vm", lambda: check_text(params.get("vm"), "vm", what="a VM name"))
    target = params.get("target")
    if not isinstance(target, dict):
        check("target", lambda: check_text(target, "target", what="a provider or host name"))
    for key in ("resource_pool", "datastore"):
        if params.get(key) is not None:
            check(key, lambda key=key: check_text(params[key], key))
    if params.get("timeout") is not None:
        checked["timeout"] = check("timeout", lambda: parse_duration(
            params["timeout"], "timeout", minimum=1.0))
    if params.get("bandwidth_mib") is not None:
        checked["bandwidth_mib"] = check("bandwidth_mib", lambda: check_int(
            params["bandwidth_mib"], "bandwidth_mib", minimum=1, maximum=MAX_BANDWIDTH_MIB))
    problems.raise_any()
    return checked


def planned_mode(state, live):
    """How a VM in ``state`` moves: ``live``, ``paused`` (memory copied while it is paused) or
    ``cold`` (stopped)."""
    if state in ("running", "paused"):
        return "live" if live else "paused"
    return "cold"


def _reservations(store):
    """The failover reservations of every creator (a creator of None is none of them)."""
    return ReservationBook(store, None).foreign()


def _shown_name(provider):
    """The name VM dicts show for a provider: the name the user gave it, else its key."""
    return provider.provider.config.get("name") or provider.key


def _where(vm):
    return {"provider": vm["provider"], "hypervisor": vm["hypervisor"]}


def _result(changed, vm, source, target, mode, checks, live):
    migration = {"source": source, "target": target, "mode": mode, "live": live,
                 "prechecks": checks, "started_at": None, "ended_at": None,
                 "duration_seconds": None, "downtime_ms": None, "copied_disks": [],
                 "shared_disks": []}
    return {"changed": changed, "vm": vm, "migration": migration}


def _move(result, run):
    """Run the move ``run()`` (its answer: the moved VM dict, and what the backend measured),
    filling the result's times."""
    migration = result["migration"]
    began = time.time()
    migration["started_at"] = format_time(began)
    moved = run()
    ended = time.time()
    migration.update(ended_at=format_time(ended, round_up=True),
                     duration_seconds=round(ended - began, 3))
    return moved


def run_vm_migrate(params, ctx):
    """The vm_migrate task's result."""
    params = check_params(params)
    source = ctx.open_provider()
    if "migrate_to" in source.capabilities:
        return _to_provider(params, ctx, source)
    if "migrate" in source.capabilities:
        return _to_host(params, ctx, source)
    raise NotSupported("the %s provider %s cannot move VMs (its backend implements neither "
                       "migrate nor migrate_to)" % (source.type_name, source.key))


def _to_provider(params, ctx, source):
    """Move to another provider (``migrate_to``)."""
    name, live = params["vm"], params["live"]
    unused = [key for key in ("resource_pool", "datastore") if params.get(key) is not None]
    if unused:
        raise field_errors([{"path": key, "message": "the %s provider moves a VM to another "
                             "provider, whose storage pool of the same name gets its disks; "
                             "remove %s" % (source.type_name, key)} for key in unused])
    target = ctx.open_provider(params["target"], "target")
    try:
        vm = source.describe(name)
    except NotFound:
        try:
            there = target.describe(name)
        except NotFound:
            raise NotFound("VM %r is on neither %s nor the target %s" % (
                name, source.key, target.key)) from None
        return _result(False, there, None, _where(there), "none", [], live)
    if target.key == source.key:
        return _result(False, vm, _where(vm), _where(vm), "none", [], live)
    try:
        target.describe(name)
    except NotFound:
        pass
    else:
        raise Conflict("the target %s already has a VM named %r, and %s has one too; a VM is "
                       "never moved onto another one: remove the one that should not be there "
                       "(on the target, a leftover of an earlier move)" % (
                           target.key, name, source.key))
    hypervisor = target.list_hypervisors()[0]
    checks = prechecks(vm, hypervisor, _reservations(ctx.store), params["allow_zone_change"])
    error = refusal(name, target.key, checks)
    if error:
        raise error
    kept = fleet_check(vm, target.key)
    if kept:
        checks.append(kept)
        ctx.warnings.append("VM %r: %s" % (name, kept["detail"]))
    mode = planned_mode(vm["state"], live)
    result = _result(True, dict(vm, hypervisor=hypervisor["name"], az=hypervisor.get("az"),
                                provider=_shown_name(target), provider_key=target.key),
                     _where(vm), {"provider": _shown_name(target),
                                  "hypervisor": hypervisor["name"]}, mode, checks, live)
    if ctx.check_mode:
        return result
    timeout = params.get("timeout") or DEFAULT_TIMEOUT_SHARE * ctx.settings.timeout_for("mutating")
    moved = _move(result, lambda: source.migrate_to(name, target, live, timeout,
                                                    params.get("bandwidth_mib")))
    result["vm"] = moved["vm"]
    result["migration"].update(downtime_ms=moved["downtime_ms"],
                               copied_disks=moved["copied_disks"],
                               shared_disks=moved.get("shared_disks") or [],
                               mode=moved["mode"] or mode)
    return result


def _to_host(params, ctx, source):
    """Move to another host of the same provider (``migrate``)."""
    name, live, host = params["vm"], params["live"], params["target"]
    if not isinstance(host, str):
        raise field_error("target", "the %s provider moves a VM between its own hosts: give "
                          "the host's name" % source.type_name)
    vm = source.describe(name)
    hypervisors = source.list_hypervisors()
    found = [h for h in hypervisors if h["name"] == host]
    if not found:
        raise field_error("target", "no host named %r on %s (hosts: %s)" % (
            host, source.key, ", ".join(sorted(h["name"] for h in hypervisors))))
    if vm["state"] == "running" and not live:
        raise field_error("live", "the %s provider moves a running VM live only; set live: "
                          "true, or stop the VM first" % source.type_name)
    placement = vm.get("placement") or {}
    wanted = dict((key, params[key]) for key in ("resource_pool", "datastore")
                  if params.get(key) is not None)
    there = vm["hypervisor"] == host and all(
        placement.get(key) == value or str(placement.get(key) or "").endswith("/" + value)
        for key, value in wanted.items())
    if there:
        return _result(False, vm, _where(vm), _where(vm), "none", [], live)
    checks = prechecks(vm, found[0], _reservations(ctx.store), params["allow_zone_change"]) \
        if vm["hypervisor"] != host else []
    error = refusal(name, host, checks)
    if error:
        raise error
    mode = planned_mode(vm["state"], live)
    result = _result(True, dict(vm, hypervisor=host, az=found[0].get("az")), _where(vm),
                     {"provider": vm["provider"], "hypervisor": host}, mode, checks, live)
    if ctx.check_mode:
        return result
    moved = _move(result, lambda: source.migrate(name, host, **wanted))
    result["changed"] = moved.pop("changed", True)
    result["vm"] = moved
    return result


# -- hypervisor ---------------------------------------------------------------------------------
def _hypervisor_params(params):
    """The hypervisor task's options as it uses them; one InvalidSpec listing every problem."""
    problems, checked = Problems(), dict(params)
    checks = [("parallel", lambda: check_int(params["parallel"], "parallel", minimum=1,
                                             maximum=MAX_PARALLEL))]
    if params.get("name") is not None:
        checks.append(("name", lambda: check_text(params["name"], "name",
                                                  what="a hypervisor name")))
    for path, check in checks:
        problems.check(path, check)
    targets = params.get("targets")
    if targets is not None and not isinstance(targets, list):
        problems.append({"path": "targets", "message": "must be a list of providers (libvirt) "
                         "or host names (vSphere)"})
    problems.raise_any()
    move = dict((key, params.get(key)) for key in ("timeout", "bandwidth_mib"))
    check_params(dict(move, vm="-", target="-"))  # the options each move takes, checked once
    return checked


def _drained(source, name):
    """The hypervisor dict of ``source`` to drain: the one named ``name``, or its only one."""
    hypervisors = source.list_hypervisors()
    if name is None:
        if len(hypervisors) == 1:
            return hypervisors[0], True
        raise field_error("name", "%s has %d hosts: name the one to drain (%s)" % (
            source.key, len(hypervisors), ", ".join(sorted(h["name"] for h in hypervisors))))
    found = [h for h in hypervisors if h["name"] == name]
    if not found:
        raise field_error("name", "no hypervisor named %r on %s (hypervisors: %s)" % (
            name, source.key, ", ".join(sorted(h["name"] for h in hypervisors))))
    return found[0], len(hypervisors) == 1


def _candidates(params, ctx, source, drained, marks):
    """Where the VMs may go: other providers of the same type (``migrate_to``; ``targets``,
    else every other entry of ``providers`` of that type), or other hosts of ``source``."""
    targets = params.get("targets")
    if "migrate_to" in source.capabilities:
        if targets is None:
            catalog = params.get("providers") or {}
            targets = [ref for ref in sorted(catalog, key=str)
                       if isinstance(catalog[ref], dict) and
                       catalog[ref].get("type") == source.type_name]
        found = []
        for index, ref in enumerate(targets):
            target = ctx.open_provider(ref, "targets[%d]" % index)
            if target.key == source.key:
                continue
            if target.type_name != source.type_name:
                raise field_error("targets[%d]" % index, "%s is a %s provider; the VMs of a %s "
                                  "provider move to another %s provider" % (
                                      target.key, target.type_name, source.type_name,
                                      source.type_name))
            hypervisor = maintenance.with_marks(target.list_hypervisors(), target.key, marks)[0]
            found.append(Candidate(ref, target.key, hypervisor))
        return found
    if "migrate" in source.capabilities:
        hosts = maintenance.with_marks(source.list_hypervisors(), source.key, marks)
        named = set(h["name"] for h in hosts)
        unknown = [t for t in targets or () if t not in named]
        if unknown:
            raise field_error("targets", "no host named %s on %s (hosts: %s)" % (
                ", ".join(map(repr, unknown)), source.key, ", ".join(sorted(named))))
        return [Candidate(h["name"], h["name"], h) for h in hosts if h["name"] != drained["name"]
                and (targets is None or h["name"] in targets)]
    raise NotSupported("the %s provider %s cannot move VMs (its backend implements neither "
                       "migrate nor migrate_to), so it cannot drain a hypervisor" % (
                           source.type_name, source.key))


def run_hypervisor(params, ctx):
    """The hypervisor task's result: drain and mark (``state: maintenance``), end the
    maintenance and the fenced mark (``state: active``), or confirm, fence and mark
    (``state: fenced``, ``fence_step.py``)."""
    params = _hypervisor_params(params)
    if params["state"] == "fenced":
        return run_fenced(params, ctx)
    source = ctx.open_provider()
    drained, whole = _drained(source, params.get("name"))
    name = drained["name"]
    platform = "maintenance" in source.capabilities  # the platform has a maintenance mode
    marks = maintenance.read_marks(ctx.store)
    marked = maintenance.is_marked(marks, source.key, name) and (
        not platform or drained["state"] == maintenance.MAINTENANCE)
    result = {"changed": False, "hypervisor": {"provider": source.key, "name": name,
                                               "state": params["state"]}}
    if params["state"] == "active":
        result["changed"] = maintenance.is_marked(marks, source.key, name) or (
            platform and drained["state"] == maintenance.MAINTENANCE)
        if result["changed"] and not ctx.check_mode:
            if platform:
                source.set_maintenance(name, False)
            maintenance.unmark(ctx.store, source.key, name)
        return result
    vms = [vm for vm in source.list_vms() if vm.get("hypervisor") == name]
    plan = plan_drain(vms, _candidates(params, ctx, source, drained, marks),
                      _reservations(ctx.store), params["allow_zone_change"],
                      params["stopped_vms"] == "move")
    drain = {"planned": [shown_move(move) for move in plan["moves"]], "moved": [],
             "stays": [{"vm": s["vm"]["name"], "why": s["why"]} for s in plan["stays"]],
             "left": [{"vm": s["vm"]["name"], "why": s["why"]} for s in plan["left"]]}
    result.update(changed=bool(plan["moves"]) or not marked, drain=drain)
    if ctx.check_mode:
        return result
    common = dict((key, params.get(key)) for key in ("timeout", "bandwidth_mib"))

    def move_one(move):
        return run_vm_migrate(dict(common, vm=move["vm"]["name"], target=move["candidate"].target,
                                   live=True, allow_zone_change=params["allow_zone_change"],
                                   resource_pool=None, datastore=None), ctx)

    drain["moved"], failed = run_moves(plan["moves"], params["parallel"], move_one)
    drain["left"].extend(failed)
    if drain["left"]:
        err = Conflict("hypervisor %s of %s is not drained, so it is not in maintenance; "
                       "%d VM(s) left: %s. Make room or fix what each names, and run the task "
                       "again (it moves only what is left)" % (
                           name, source.key, len(drain["left"]), "; ".join(
                               "%s (%s)" % (item["vm"], item["why"]) for item in drain["left"])),
                       details={"left": drain["left"]})
        err.result = {"changed": bool(drain["moved"]), "drain": drain,
                      "hypervisor": result["hypervisor"]}
        raise err
    if not marked:
        if platform:
            source.set_maintenance(name, True)
        maintenance.mark(ctx.store, source.key, name, whole)
    return result
