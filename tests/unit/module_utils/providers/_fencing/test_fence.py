"""fence_hypervisor: one answer whatever the agent does, fenced only when it says proven off."""
import os
import subprocess
import sys

import yaml
from paths import COLLECTIONS

from ansible_collections.resilient.virt.plugins.module_utils.providers._fencing.fence import (
    BUILTIN_AGENTS, fence_hypervisor)
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl

SECRET = "ipmi-Secret-2024"


class Agent:
    """A fence agent of type ``test`` whose answer (or exception) the test sets."""

    def __init__(self, answer=None, error=None):
        self.answer, self.error, self.asked = answer, error, []

    @hookimpl
    def resilient_virt_fence_hypervisor(self, hypervisor, fencing, timeout):
        if fencing["type"] != "test":
            return None
        self.asked.append((hypervisor, dict(fencing), timeout))
        if self.error:
            raise self.error
        return self.answer


def fence(agent, **settings):
    return fence_hypervisor("hv1", dict({"type": "test", "password": SECRET}, **settings),
                            timeout=7, plugins=[agent], environ={})


def test_a_proof_is_passed_on_with_the_secrets_masked():
    agent = Agent({"fenced": True, "action": "off", "evidence": "read off with " + SECRET})
    answer = fence(agent)
    assert (answer["hypervisor"], answer["agent"], answer["fenced"]) == ("hv1", "test", True)
    assert answer["evidence"] == "read off with ********" and answer["reason"] is None
    assert agent.asked == [("hv1", {"type": "test", "password": SECRET}, 7.0)]


def test_anything_but_a_proof_is_not_fenced_with_a_reason():
    raised = fence(Agent(error=RuntimeError("login as admin:%s refused" % SECRET)))
    assert raised["fenced"] is False and "RuntimeError" in raised["reason"]
    assert SECRET not in raised["reason"]
    odd = fence(Agent("off"))
    assert odd["fenced"] is False and "not a dict with fenced" in odd["reason"]
    vague = fence(Agent({"fenced": "yes"}))
    assert vague["fenced"] is False
    silent = fence(Agent({"fenced": False}))
    assert silent["fenced"] is False and "did not say why" in silent["reason"]
    nobody = fence(Agent(), type="apc_pdu")
    assert nobody["fenced"] is False and "built in: ipmi, redfish" in nobody["reason"]
    assert fence_hypervisor("hv1", {})["fenced"] is False
    assert "fencing.type is required" in fence_hypervisor("hv1", {"address": "x"})["reason"]


def test_the_redfish_agent_refuses_bad_settings_before_any_connection():
    answer = fence_hypervisor("hv1", {"type": "redfish", "address": "bmc.example.com"})
    assert answer["fenced"] is False and "fencing.address is required" in answer["reason"]
    answer = fence_hypervisor("hv1", {"type": "redfish", "address": "https://bmc",
                                      "validate_certs": "no"})
    assert "fencing.validate_certs must be true or false" in answer["reason"]


def test_the_ipmi_agent_refuses_bad_settings_before_any_connection():
    def reason(**settings):
        answer = fence_hypervisor("hv1", dict({"type": "ipmi", "address": "bmc"}, **settings))
        assert answer["fenced"] is False
        return answer["reason"]

    assert "fencing.address is required" in reason(address="https://bmc") and "no URL" in reason(address="")
    assert "fencing.port must be the BMC's UDP port" in reason(port=True)
    assert "fencing.port must be the BMC's UDP port" in reason(port=70000)
    assert "fencing.kg must be a string" in reason(kg=1234)
    assert "fencing.user is not a setting of the ipmi agent" in reason(user="admin")


def test_no_fence_library_is_imported_before_its_agent_is_used():
    code = ("import sys\n"
            "from ansible_collections.resilient.virt.plugins.module_utils.providers._fencing import fence\n"
            "fence.fence_hypervisor('hv1', {'type': 'ipmi', 'address': 'https://bmc'})\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pyghmi', 'sushy')]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True,
                   env=dict(os.environ, PYTHONPATH=os.path.abspath(COLLECTIONS)))


def test_the_hypervisor_module_documents_every_setting_of_the_built_in_agents():
    from ansible_collections.resilient.virt.plugins.modules import hypervisor

    text = " ".join(yaml.safe_load(hypervisor.DOCUMENTATION)["options"]["fencing"]["description"])
    for agent, module in BUILTIN_AGENTS.items():
        assert "V(%s)" % agent in text
        assert [s for s in module.SETTINGS if s != "type" and "C(%s)" % s not in text] == [], agent
