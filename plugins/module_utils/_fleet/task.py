# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vm_fleet task: its options checked, the desired fleet built, one run, its result.

:func:`run_vm_fleet` takes the module's options (a dict) and a :class:`TaskContext`.

The last full run of an owner is kept in the state store (namespace :data:`RUNS`) so that
``full_interval`` can make a run full when the last one is too old.
"""
from ansible_collections.resilient.virt.plugins.module_utils._convert import parse_duration
from ansible_collections.resilient.virt.plugins.module_utils._input import BOUNDS, int_problem
from ansible_collections.resilient.virt.plugins.module_utils._fleet import report
from ansible_collections.resilient.virt.plugins.module_utils._fleet import status as statuses
from ansible_collections.resilient.virt.plugins.module_utils._fleet.desired import (
    check_owner, desired_fleet)
from ansible_collections.resilient.virt.plugins.module_utils._fleet.prune import PruneLimit
from ansible_collections.resilient.virt.plugins.module_utils._fleet.fleet_run import (
    FleetRun, Options)
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, field_errors)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import provider_key

__all__ = ("RUNS", "options_from", "run_vm_fleet")

RUNS = "vm_fleet_runs"
_POSITIVE = ("max_attempts", "concurrency", "provider_concurrency", "round_size")


def options_from(params, check_mode):
    """Options from the module's parameters; one InvalidSpec naming every bad one."""
    problems = []
    for name in _POSITIVE:
        problem = int_problem(params[name], name)[1]
        if problem:
            problems.append({"path": name, "message": problem})
    durations = {}
    for name in ("backoff_min", "backoff_max", "full_interval", "shutdown_timeout"):
        try:
            durations[name] = parse_duration(params[name], name)
        except InvalidSpec as err:
            problems.extend(err.details["errors"])
    limit = None
    try:
        limit = PruneLimit(params["max_prune"])
        if not limit.percent and limit.number > BOUNDS["max_prune"][1]:
            problems.append({"path": "max_prune", "message": "%s VMs: give at most %d, or a "
                             "percentage ('10%%')" % (limit.text[:20], BOUNDS["max_prune"][1])})
        check_owner(params["owner"])
    except InvalidSpec as err:
        problems.extend(err.details["errors"])
    if not problems and durations["backoff_min"] > durations["backoff_max"]:
        problems.append({"path": "backoff_min", "message": "is longer than backoff_max; lower "
                         "it or raise backoff_max"})
    if problems:
        raise field_errors(problems)
    options = Options(
        params["owner"], full=params["full"], retry_now=params["retry_now"],
        prune=params["prune"], max_prune=limit,
        backoff=statuses.Backoff(durations["backoff_min"], durations["backoff_max"],
                                 params["max_attempts"]),
        concurrency=params["concurrency"], per_provider=params["provider_concurrency"],
        round_size=params["round_size"], force=params["force"],
        shutdown_timeout=durations["shutdown_timeout"], check_mode=check_mode)
    return options, durations["full_interval"]


def _resolver(provider_config):
    """``resolve_ref(name)``: the provider dict of a ``providers`` entry, or None."""
    def resolve_ref(name):
        try:
            return provider_config(name)
        except InvalidSpec:
            return None
    return resolve_ref


def run_vm_fleet(params, ctx):
    """Run the fleet of a vm_fleet task; return its result, or raise the error that fails the
    task with the result attached (``err.result``)."""
    options, full_interval = options_from(params, ctx.check_mode)
    fleet = desired_fleet(params["vms"], params.get("provider"), ctx.provider_config,
                          lambda config: provider_key(config, environ=ctx.environ))
    store = ctx.store
    last_full = (store.get(RUNS, options.owner) or {}).get("last_full_at")
    now = store.now()
    options.full = options.full or bool(full_interval and (
        last_full is None or now - last_full >= full_interval))
    run = FleetRun(fleet, options, store, ctx.open_provider,
                   resolve_ref=_resolver(ctx.provider_config), clock=store.now)
    outcomes = run.run()
    records = run.read
    ctx.warnings.extend(run.warnings)
    if options.full and not ctx.check_mode:
        store.update(RUNS, options.owner, lambda old, at: (dict(old or {}, last_full_at=at), None))
    summary = report.summarize(outcomes)
    result = dict(
        changed=any(o.actions and o.error is None for o in outcomes),
        summary=summary,
        full=options.full,
        vms=report.vm_results(outcomes, records, options.owner, options.backoff.max_attempts,
                              ctx.check_mode, now),
    )
    if ctx.diff_mode and result["changed"]:
        result["diff"] = report.diff(outcomes)
    err = run.store_error  # the run stopped: the result holds the VMs it reached
    if err is None:
        err = report.failure(outcomes)
        if err is not None and not params["fail_on_error"]:
            ctx.warnings.append("%s (fail_on_error=false: the task does not fail)" % err.message)
            err = None
    if err is not None:
        err.result = result
        raise err
    return result
