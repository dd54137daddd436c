# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fencing a hypervisor: the hook ``resilient_virt_fence_hypervisor`` asked, its answer checked.

:func:`fence_hypervisor` asks the fence agents (the built-in ones of :data:`BUILTIN_AGENTS`,
the plugins given and those of ``RESILIENT_VIRT_PLUGINS``) to fence one hypervisor, and turns
whatever happens into one answer: ``hypervisor``, ``agent`` (the fencing type), ``fenced``
(True only when the agent proved the hypervisor off), ``action``, ``evidence``, ``reason`` (why
it is not fenced, and what to do) and ``at``. Nothing raises: no settings, no agent for the
type, an agent that fails, hangs past the time limit or answers something else are each
"not fenced" with the reason. Every text of the answer has the settings' secrets masked.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._masking import scrub, secret_values
from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import run_with_timeout
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.providers._fencing import ipmi, redfish
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import plugin_manager

__all__ = ("fence_hypervisor", "BUILTIN_AGENTS", "GRACE")

BUILTIN_AGENTS = {"ipmi": ipmi, "redfish": redfish}
GRACE = 5.0  # seconds an agent may answer after its own time limit before it counts as hung
_TEXTS = ("action", "evidence", "reason")


def _answer(hypervisor, agent, fenced, reason=None, action=None, evidence=None):
    return {"hypervisor": hypervisor, "agent": agent, "fenced": fenced, "action": action,
            "evidence": evidence, "reason": reason, "at": format_time(time.time())}


def fence_hypervisor(hypervisor, fencing, timeout=60.0, plugins=(), environ=None):
    """The answer (see the module docstring) of fencing ``hypervisor`` with the settings
    ``fencing`` (``type`` and the agent's settings) within ``timeout`` seconds."""
    if not isinstance(fencing, dict) or not fencing:
        return _answer(hypervisor, None, False, "%s has no fencing settings: give its fencing, "
                       "such as {type: redfish, address: 'https://bmc.example.com', username: ..., "
                       "password: ...}; a hypervisor that cannot be fenced is never recovered "
                       "automatically" % hypervisor)
    agent = fencing.get("type")
    secrets = secret_values(fencing)
    if not isinstance(agent, str) or not agent:
        return _answer(hypervisor, None, False, "fencing.type is required: the fence agent, one "
                       "of %s or a plugin's" % ", ".join(sorted(BUILTIN_AGENTS)))
    manager = plugin_manager(list(plugins) + list(BUILTIN_AGENTS.values()), environ)

    def ask():
        return manager.hook.resilient_virt_fence_hypervisor(
            hypervisor=hypervisor, fencing=dict(fencing), timeout=float(timeout))

    try:
        found = run_with_timeout(ask, float(timeout) + GRACE, "fence %s" % hypervisor)
    except Exception as exc:  # noqa: BLE001 - a failed fence is an answer, never a crash
        text = getattr(exc, "message", None) or "%s: %s" % (type(exc).__name__, exc)
        return _answer(hypervisor, agent, False, scrub("the %s agent failed: %s" % (agent, text),
                                                       secrets))
    if found is None:
        return _answer(hypervisor, agent, False, "no fence agent serves fencing.type %r; built "
                       "in: %s (or install a plugin that does)"
                       % (agent, ", ".join(sorted(BUILTIN_AGENTS))))
    if not isinstance(found, dict) or not isinstance(found.get("fenced"), bool):
        return _answer(hypervisor, agent, False, "the %s agent answered %s, not a dict with "
                       "fenced true or false" % (agent, type(found).__name__))
    texts = {key: scrub(found[key], secrets) if found.get(key) is not None else None
             for key in _TEXTS}
    answer = _answer(hypervisor, agent, found["fenced"], **texts)
    if not answer["fenced"] and not answer["reason"]:
        answer["reason"] = "the %s agent did not say why" % agent
    return answer
