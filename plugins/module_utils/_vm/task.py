# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The vm and vm_info tasks: their options checked, the work done, their result.

Each takes the module's options (a dict) and a :class:`TaskContext`.
"""
from ansible_collections.resilient.virt.plugins.module_utils import _conditions as conditions
from ansible_collections.resilient.virt.plugins.module_utils._convert import parse_duration
from ansible_collections.resilient.virt.plugins.module_utils._input import spec_problems, text_problem
from ansible_collections.resilient.virt.plugins.module_utils._vm.wait import wait_for_address
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, NotFound, NotSupported, VirtError, field_error, field_errors)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import provider_class
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import match_filters

__all__ = ("run_vm", "run_vm_info")


# -- vm -----------------------------------------------------------------------------------------
def run_vm(params, ctx):
    """Bring one VM to the state ``params`` asks for; the vm task's result."""
    # imported here, not above: vm_info's describe path does not load the planner and what it
    # imports, 13 ms in a module process by python3 -X importtime
    # (tests/unit/modules/test_describe_imports.py)
    from ansible_collections.resilient.virt.plugins.module_utils._vm.converge import (
        UNREAD, find_by_uuid, reconcile)
    from ansible_collections.resilient.virt.plugins.module_utils._migration.maintenance import (
        refuse_placement)

    if params.get("placement"):  # Ansible keeps an alias's key next to its option's
        params["placement"] = dict((key, value) for key, value in params["placement"].items()
                                   if key != "esxi_hostname")
    shutdown_timeout = parse_duration(params["shutdown_timeout"], "shutdown_timeout")
    wait = params["wait_for_ip"] and not ctx.check_mode
    if params["wait_for_ip"] and params["state"] not in ("running", "restarted"):
        raise field_error("wait_for_ip", "needs state=running or state=restarted (a VM in "
                          "state %s gets no address)" % params["state"])
    wait_timeout = parse_duration(params["wait_timeout"], "wait_timeout") if wait else None
    problems = spec_problems(params)
    if params["name"] is not None and text_problem(params["name"], what="a VM name"):
        problems.insert(0, ("name", text_problem(params["name"], what="a VM name")))
    if problems:
        raise field_errors(_with_backend_errors(params, ctx, problems))
    provider = ctx.open_provider()
    try:
        name, current = params["name"], UNREAD
        if params["uuid"]:
            name, current = find_by_uuid(provider, params["uuid"], name, params["state"])
        outcome = reconcile(
            provider, name, params["state"], params, check_mode=ctx.check_mode,
            force=params["force"], shutdown_timeout=shutdown_timeout, current=current,
            before_create=lambda spec: refuse_placement(lambda: ctx.store, provider.key, spec,
                                                        ctx.warnings),
        )
        if wait:
            outcome["vm"] = wait_for_address(provider, name, wait_timeout)
    except VirtError as err:
        err.result = dict(ready=False, conditions=_failure_conditions(params, ctx, err))
        raise
    result = dict(
        changed=outcome["changed"],
        vm=outcome["vm"],
        actions=outcome["actions"],
        changes=dict(before=outcome["before"], after=outcome["after"]),
        conditions=_conditions(params, ctx, outcome),
    )
    result["ready"] = any(c["type"] == conditions.READY and c["status"] is True
                          for c in result["conditions"])
    result["restart_required"] = outcome["restart_required"]
    if ctx.diff_mode and outcome["changed"]:
        result["diff"] = dict(before=outcome["before"], after=outcome["after"])
    return result


def _with_backend_errors(params, ctx, problems):
    """``problems`` and, so that every bad field is reported at once, what the provider's
    backend finds in the spec a create would send (nothing is contacted)."""
    from ansible_collections.resilient.virt.plugins.module_utils._vm.converge import SPEC_FIELDS  # here: as in run_vm

    errors = [dict(path=path, message=message) for path, message in problems]
    config = ctx.provider_config(None, "provider")
    spec = dict((field, params[field]) for field in SPEC_FIELDS + ("name",)
                if params.get(field) is not None)
    found = set(error["path"] for error in errors)
    backend = provider_class(config["type"])(config, environ=ctx.environ)
    return errors + [error for error in backend.spec_errors(spec)
                     if error["path"] not in found and error["message"] != "is required"]


def _conditions(params, ctx, outcome):
    after = outcome["after"]
    if after.get("state") == "absent":
        return []
    name = (outcome["vm"] or {}).get("name") or params["name"] or params["uuid"]
    message = "%s is %s" % (name, after.get("state"))
    if ctx.check_mode and outcome["changed"]:
        message = "check mode: %s would be %s" % (name, after.get("state"))
    return [conditions.vm_ready(message)]


def _failure_conditions(params, ctx, err):
    found = [conditions.vm_validation_error() if isinstance(err, InvalidSpec)
             else conditions.vm_provider_error()]
    if not ctx.check_mode and params["state"] != "absent" and err.operation == "create":
        found.append(conditions.vm_create_failed())
    return found


# -- vm_info ------------------------------------------------------------------------------------
def run_vm_info(params, ctx):
    """The VMs ``params`` asks for, from every provider it names; the vm_info task's result."""
    filters = dict((key, value) for key, value in (params.get("filters") or {}).items()
                   if value is not None)
    vms, errors = [], []
    for reference in ctx.provider_references():
        try:
            provider = ctx.open_provider(reference)
            found = _listed(params["name"], filters, provider)
            if params.get("snapshots"):
                _add_snapshots(found, provider, ctx.warnings)
            vms.extend(found)
        except VirtError as err:
            if params["on_provider_error"] == "fail":
                raise
            errors.append(dict(provider=reference, error=err.to_dict()))
            ctx.warnings.append("provider %s failed: %s: %s" % (reference, err.type, err.message))
    vms.sort(key=lambda vm: (vm.get("provider") or "", vm.get("name") or ""))
    return dict(changed=False, vms=vms, provider_errors=errors)


def _add_snapshots(vms, provider, warnings):
    """Give each VM dict its ``snapshots`` (as vm_snapshot shows them), one call per VM; None
    for the VMs of a provider that cannot take snapshots, with a warning."""
    # imported here: only vm_info with snapshots: true needs it (4 ms in a module process,
    # python3 -X importtime; tests/unit/modules/test_describe_imports.py)
    from ansible_collections.resilient.virt.plugins.module_utils._snapshot.task import list_shown

    for vm in vms:
        try:
            vm["snapshots"] = list_shown(provider, vm["name"])
        except NotSupported as err:
            warnings.append("provider %s: %s; its VMs show snapshots: null" % (provider.key,
                                                                               err.message))
            for other in vms:
                other["snapshots"] = None
            return
        except NotFound:  # deleted meanwhile
            vm["snapshots"] = []


def _listed(name, filters, provider):
    """The VMs of ``provider`` named ``name`` (or all of them) that match ``filters``."""
    if name:
        try:
            found = [provider.describe(name)]
        except NotFound:
            found = []
    else:
        found = provider.list_vms(filters or None)
    return [vm for vm in found if match_filters(vm, filters)]
