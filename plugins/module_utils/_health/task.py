# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provider and circuit_breaker tasks: one provider validated (its capabilities, whether it
answers, its breaker), and the circuit breakers of every provider listed or changed.

Each takes the module's options (a dict) and a :class:`TaskContext`.
"""
from ansible_collections.resilient.virt.plugins.module_utils import _conditions as conditions
from ansible_collections.resilient.virt.plugins.module_utils._input import text_problem
from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    BREAKER_FACT, NAMESPACE, fact, list_breakers, shown)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    NotFound, VirtError, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import provider_key

__all__ = ("run_provider", "run_circuit_breaker")


# -- provider -----------------------------------------------------------------------------------
def run_provider(params, ctx):
    """Validate the provider of ``params`` (or reset its breaker); the provider task's result."""
    try:
        provider = ctx.open_provider()
    except VirtError as err:
        err.result = dict(conditions=[conditions.provider_runtime_ready(False)])
        raise
    runtime = conditions.provider_runtime_ready(True, "%s backend loaded" % provider.type_name)
    summary = dict(key=provider.key, type=provider.type_name, capabilities=sorted(provider.capabilities))
    result = dict(changed=False, provider=summary)
    if params["state"] == "reset":
        result["changed"], before, after = provider.policy.breaker.set_state("closed", ctx.check_mode)
        if result["changed"] and ctx.diff_mode:
            result["diff"] = dict(before=shown(before), after=shown(after))
        result.update(breaker=shown(after), conditions=[runtime])
        return result
    try:
        summary["info"] = provider.validate()
        if params["list_hypervisors"] and "list_hypervisors" in provider.capabilities:
            result["hypervisors"] = provider.list_hypervisors()
    except VirtError as err:
        breaker = shown(provider.policy.breaker.snapshot())
        if (breaker.get("last_error") or {}).get("message") == err.message:  # the message once
            breaker["last_error"] = dict(type=breaker["last_error"]["type"])
        err.result = dict(
            provider=summary,
            available=False,
            conditions=[runtime, conditions.provider_available(False)],
            breaker=breaker,
        )
        raise
    result["available"] = True
    result["conditions"] = [runtime, conditions.provider_available(True, "%s answered" % provider.key)]
    result["breaker"] = shown(provider.policy.breaker.snapshot())
    return result


# -- circuit_breaker ----------------------------------------------------------------------------
def run_circuit_breaker(params, ctx):
    """List the breakers, or change the one ``params`` names; the circuit_breaker task's result.
    Its ``ansible_facts`` hold every breaker as the change left them."""
    if params["name"] is not None:
        problem = text_problem(params["name"], what="a circuit breaker name")
        if problem:
            raise field_error("name", problem)
    name, state = _breaker_name(params, ctx), params["state"]
    known = dict((snap["name"], snap) for snap in list_breakers(ctx.store))
    result = dict(changed=False)
    after = known.get(name)
    if state != "query":
        result["changed"], before, after = _change(params, ctx, name, state, known)
        if result["changed"] and ctx.diff_mode:
            result["diff"] = dict(before=shown(before) if before else {},
                                  after=shown(after) if after else {})
        if result["changed"] and not ctx.check_mode:  # the store as the change left it
            known.pop(name, None)
            if after is not None:
                known[name] = after
    elif name is not None and name not in known:
        raise _missing(name, known, "list them with this module without 'name'")
    result["breakers"] = [shown(snap) for key, snap in sorted(known.items())
                          if name is None or key == name]
    if name is not None:
        result["breaker"] = shown(after) if after else None
    result["ansible_facts"] = {BREAKER_FACT: dict((key, fact(snap)) for key, snap in known.items())}
    return result


def _breaker_name(params, ctx):
    if params["provider"] is None:
        return params["name"]
    return provider_key(ctx.provider_config(), environ=ctx.environ)


def _missing(name, known, action):
    return NotFound("no circuit breaker named %r (known: %s); %s" % (
        name, ", ".join(sorted(known)) or "none", action))


def _change(params, ctx, name, state, known):
    """(changed, before, after) snapshots of the change ``state`` asks of breaker ``name``
    (``known``: the snapshots of the store by name); ``after`` is None once removed."""
    if state == "absent":
        if name not in known:
            return False, None, None
        if not ctx.check_mode:
            ctx.store.delete(NAMESPACE, name)
        return True, known[name], None
    if name not in known and params["provider"] is None:
        raise _missing(name, known, "a breaker comes into being with the first call to "
                       "its provider: check the name, or give 'provider' instead of "
                       "'name' to %s the breaker of a provider not called yet" % state)
    breaker = Policy(ctx.store, name, ctx.settings).breaker
    return breaker.set_state("closed" if state == "reset" else "open", ctx.check_mode)
