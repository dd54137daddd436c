# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``hypervisor`` task's ``state: fenced``: confirm that a hypervisor is unreachable, fence
it, and mark it fenced (docs/ha.md#confirm-and-fence-state-fenced).

:func:`run_fenced` looks first: a hypervisor already marked fenced is checked once and left
alone. Otherwise it waits out the grace, checking the hypervisor every ``confirm_interval``
seconds (``confirm.py``); a check that answers ends the task with nothing done (a flap). A
host of a manager (vSphere) is checked through its manager: unreachable when the manager
reports it so; a manager that does not answer decides nothing, and when the last check is one
the task fails with nothing fenced (its hosts may well run). A
hypervisor still unreachable after the grace is fenced (``fence_hypervisor()``, the hook
``resilient_virt_fence_hypervisor``); only an agent that proved it off leads to the mark (kind
``fenced`` of ``maintenance.py``), which the tasks that place VMs and reservations honour as
they honour maintenance. A fence that is not proven fails the task, and nothing is marked.

Each check opens a provider of its own, so a new connection, and calls it through the
resilience core (its time limit for ``validate``, classification, scrubbing, hooks) with one
attempt and a breaker and rate limit of its own: the provider's shared breaker, most likely
opened by the very outage, would refuse the check that must look, and the check's failures
are not counted against it.
"""
import dataclasses
import time

from ansible_collections.resilient.virt.plugins.module_utils._convert import parse_duration
from ansible_collections.resilient.virt.plugins.module_utils._input import Problems, check_text
from ansible_collections.resilient.virt.plugins.module_utils._migration import maintenance
from ansible_collections.resilient.virt.plugins.module_utils._migration.confirm import (
    Undecided, confirm_unreachable)
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time, parse_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, Unavailable, VirtError, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._fencing.fence import (
    fence_hypervisor)
from ansible_collections.resilient.virt.plugins.module_utils.providers._guarded import (
    GuardedProvider)

__all__ = ("run_fenced", "fenced_params")

UNANSWERED_STATES = ("disconnected", "offline", "unknown")  # a host its manager cannot reach
NEVER = ("a hypervisor that cannot be fenced is never recovered automatically")
_SHOWN = ("agent", "fenced", "action", "evidence", "reason", "at")  # of a fence answer


def fenced_params(params):
    """``fencing``, ``grace``, ``confirm_interval``, ``unreachable_since`` (epoch seconds or
    None) and ``fence_timeout`` as the task uses them; one InvalidSpec listing every problem."""
    problems, checked = Problems(), {}
    fencing = params.get("fencing")
    if not fencing:
        problems.append({"path": "fencing", "message": "state=fenced needs the fence agent's "
                         "settings: give fencing, such as {type: redfish, address: "
                         "'https://bmc.example.com', username: ..., password: ...}; " + NEVER})
    elif not isinstance(fencing.get("type"), str) or not fencing["type"]:
        problems.append({"path": "fencing.type", "message": "name the fence agent, such as "
                         "redfish or a plugin's type"})
    checked["fencing"] = fencing
    for key, minimum in (("grace", 0.0), ("confirm_interval", 0.1), ("fence_timeout", 1.0)):
        checked[key] = problems.check(key, lambda key=key, minimum=minimum: parse_duration(
            params.get(key), key, minimum=minimum))
    since = params.get("unreachable_since")
    checked["unreachable_since"] = None if since is None else problems.check(
        "unreachable_since", lambda: parse_time(since, "unreachable_since"))
    if params.get("name") is not None:
        problems.check("name", lambda: check_text(params["name"], "name", what="a hypervisor name"))
    problems.raise_any()
    return checked


def _fenced_name(source, name):
    """The hypervisor's name, and whether the provider is that one host, told without asking
    the provider (it may not answer)."""
    whole = "migrate_to" in source.capabilities  # one provider per host (libvirt)
    if name is None:
        name = source.provider.config.get("name") if whole else None
    if name is None:
        raise field_error("name", "an unreachable hypervisor cannot tell its name: give name "
                          "(the name %s gives the hypervisor in its VMs and reservations)"
                          % source.key)
    return name, whole


def _check(ctx, name, whole):
    """A check of ``name``: None when it answers on a new connection, else why not; Undecided
    when ``name`` is a host of a manager that did not answer."""

    def check():
        opened = ctx.open_provider()
        settings = dataclasses.replace(ctx.settings, max_attempts=1)
        fresh = GuardedProvider(opened.provider, MemoryStore("the check of %s" % opened.key),
                                settings, opened.hook)
        try:
            if whole:
                fresh.validate()
                return None
            try:
                listed = fresh.list_hypervisors()
            except VirtError as err:  # the manager, not the host, did not answer
                raise Undecided("%s could not be asked: %s: %s" % (opened.key, err.type,
                                                                   err.message)) from None
            hosts = [h for h in listed if h["name"] == name]
            if not hosts:
                return "%s lists no hypervisor %r" % (opened.key, name)
            if hosts[0].get("state") in UNANSWERED_STATES:
                return "%s reports hypervisor %s %s" % (opened.key, name, hosts[0]["state"])
            return None
        except VirtError as err:
            return "%s: %s" % (err.type, err.message)
        finally:
            opened.provider.close()

    return check


def _shown(answer):
    return dict((key, answer.get(key)) for key in _SHOWN)


def run_fenced(params, ctx, clock=time.time, sleep=time.sleep):
    """The result of ``state: fenced`` (see the module docstring)."""
    options = fenced_params(params)
    started = clock()
    source = ctx.open_provider()
    name, whole = _fenced_name(source, params.get("name"))
    since = options["unreachable_since"] if options["unreachable_since"] is not None else started
    hypervisor = {"provider": source.key, "name": name, "state": "fenced", "fenced": False,
                  "reachable": None, "reason": None, "unreachable_since": format_time(since),
                  "checked_at": None, "checks": 0}
    result = {"changed": False, "hypervisor": hypervisor, "fence": None}
    check = _check(ctx, name, whole)
    marked = maintenance.fenced_mark(maintenance.read_marks(ctx.store), source.key, name)
    if marked is not None:
        error = check()
        hypervisor.update(fenced=True, reachable=error is None, checked_at=format_time(clock()),
                          checks=1, reason="fenced already (since %s): nothing done again"
                          % marked.get("since"))
        result["fence"] = dict(_shown(marked.get("fence") or {}), fenced=True)
        if error is None:
            ctx.warnings.append("hypervisor %s of %s answers, yet it is marked fenced since %s: "
                                "find out why it runs; after repair, end the mark with state=active"
                                % (name, source.key, marked.get("since")))
        return result
    verdict = confirm_unreachable(check, since, options["grace"], options["confirm_interval"],
                                  clock, sleep)
    hypervisor.update(reachable=verdict.reachable, checked_at=format_time(verdict.at),
                      checks=verdict.checks)
    if verdict.reachable:
        hypervisor["reason"] = "reachable again at %s; a flap, nothing fenced" % format_time(verdict.at)
        return result
    if verdict.reachable is None:
        hypervisor["reason"] = "not confirmed at %s (%s); nothing fenced" % (
            format_time(verdict.at), verdict.error)
        err = Unavailable("hypervisor %s of %s is not confirmed unreachable: the last check, at "
                          "%s, could not ask (%s); nothing is fenced while its manager does not "
                          "answer: run the task again once it does" % (
                              name, source.key, format_time(verdict.at), verdict.error))
        err.result = result
        raise err
    confirmed = "unreachable since %s, and still at %s (%s)" % (
        format_time(since), format_time(verdict.at), verdict.error)
    agent = options["fencing"]["type"]
    if ctx.check_mode:
        hypervisor["reason"] = "%s: the %s agent would fence it (check mode: nothing fenced, " \
                               "nothing marked)" % (confirmed, agent)
        result["changed"] = True
        return result
    answer = fence_hypervisor(name, options["fencing"], options["fence_timeout"],
                              environ=ctx.environ)
    result["fence"] = _shown(answer)
    if not answer["fenced"]:
        hypervisor["reason"] = "%s; not fenced: %s" % (confirmed, answer["reason"])
        err = Conflict("hypervisor %s of %s is %s, but the %s agent did not prove it off: %s; "
                       "it is not marked fenced, and %s" % (
                           name, source.key, confirmed, agent, answer["reason"], NEVER),
                       details={"fence": result["fence"]})
        err.result = result
        raise err
    maintenance.mark(ctx.store, source.key, name, whole, kind=maintenance.FENCED,
                     details={"fence": dict((key, answer[key]) for key in (
                         "agent", "action", "evidence", "at"))})
    hypervisor.update(fenced=True, reason="%s; fenced by the %s agent" % (confirmed, agent))
    result["changed"] = True
    return result
