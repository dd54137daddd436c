"""resilient.virt.provider through real ansible-playbook runs against the lab's hypervisors.

Every play has its own SQLite state store in tmp_path, so breaker counts start from zero.
"""
from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    list_breakers)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

from playbook_runner import play, run_playbook

PROVIDER = "resilient.virt.provider"
CB = "resilient.virt.circuit_breaker"
ONCE = {"retry_preset": "none"}


def _snapshot(store, name):
    return next((snap for snap in list_breakers(store) if snap["name"] == name), None)


def _store_url(tmp_path):
    return "sqlite:///%s" % (tmp_path / "state.db")


def _conditions(result):
    return dict((c["type"], c) for c in result["conditions"])


def _check_condition(condition, status, reason):
    assert (condition["status"], condition["reason"]) == (status, reason), condition
    assert condition["lastTransitionTime"].endswith("Z") and "T" in condition["lastTransitionTime"], condition


def test_validate_reports_capabilities_health_hypervisors_and_breaker(lab, lab_module, tmp_path):
    hv1 = lab_module.provider_config(lab.hypervisor("hv1"))
    tasks = [
        {"name": "validate", PROVIDER: {"provider": hv1}},
        {"name": "without hypervisors", PROVIDER: {"provider": hv1, "list_hypervisors": False}},
        {"name": "validate by name", PROVIDER: {"provider": "hv1", "providers": {"hv1": hv1}}},
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": _store_url(tmp_path)})])
    assert run.rc == 0, run
    assert "Traceback" not in run.output

    result = run.task("validate")
    assert result["changed"] is False
    provider = result["provider"]
    assert provider["key"] == "libvirt:hv1" and provider["type"] == "libvirt"
    assert {"create", "describe", "validate", "list_vms"} <= set(provider["capabilities"])
    assert provider["capabilities"] == sorted(provider["capabilities"])
    assert provider["info"]["hostname"] and provider["info"]["driver"] == "QEMU"
    conditions = _conditions(result)
    assert sorted(conditions) == ["ProviderAvailable", "ProviderRuntimeReady"]
    _check_condition(conditions["ProviderRuntimeReady"], True, "DeploymentReady")
    _check_condition(conditions["ProviderAvailable"], True, "HealthCheckPassed")
    assert result["available"] is True
    (hypervisor,) = result["hypervisors"]
    assert (hypervisor["name"], hypervisor["az"]) == ("hv1", "az1")
    assert hypervisor["cpu"] > 0 and hypervisor["memory_mb"] > 0
    breaker = result["breaker"]
    assert (breaker["name"], breaker["state"], breaker["consecutive_failures"]) == ("libvirt:hv1", "closed", 0)
    facts = result["ansible_facts"]["resilient_virt_breakers"]
    assert facts["libvirt:hv1"]["state"] == "closed"

    bare = run.task("without hypervisors")
    assert not bare.failed and "hypervisors" not in bare.result
    assert _conditions(bare)["ProviderAvailable"]["status"] is True
    assert run.task("validate by name")["provider"]["key"] == "libvirt:hv1"


def test_an_unknown_provider_type_fails_cleanly(tmp_path):
    tasks = [{"name": "unknown type", PROVIDER: {"provider": {"type": "hyperv-nonexistent", "name": "x"}},
              "ignore_errors": True}]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": _store_url(tmp_path)})])
    assert "Traceback" not in run.output
    result = run.task("unknown type")
    assert result.failed and result["error"]["type"] == "InvalidSpec"
    assert "provider.type" in result["msg"] and "hyperv-nonexistent" in result["msg"]
    assert "libvirt" in result["msg"], "the message does not list the known types"
    (runtime,) = result["conditions"]
    assert runtime["type"] == "ProviderRuntimeReady"
    _check_condition(runtime, False, "DeploymentError")
    assert runtime["message"] == "", "the failure's message belongs in msg, once"


def test_a_stopped_hypervisor_fails_the_health_check_and_counts_on_the_breaker(lab, lab_module, outage, tmp_path):
    hv3 = lab_module.provider_config(lab.hypervisor("hv3"))
    outage.stop("hv3")
    tasks = [{"name": "validate down", PROVIDER: {"provider": hv3, "resilience": ONCE}, "ignore_errors": True}]
    url = _store_url(tmp_path)
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": url})])
    assert "Traceback" not in run.output
    result = run.task("validate down")
    assert result.failed and result["error"]["type"] == "Unavailable", result
    assert result["provider"]["key"] == "libvirt:hv3"
    assert "hypervisors" not in result.result
    conditions = _conditions(result)
    _check_condition(conditions["ProviderRuntimeReady"], True, "DeploymentReady")
    _check_condition(conditions["ProviderAvailable"], False, "HealthCheckFailed")
    assert conditions["ProviderAvailable"]["message"] == "" and result["available"] is False
    breaker = result["breaker"]
    assert (breaker["name"], breaker["state"]) == ("libvirt:hv3", "closed")
    assert (breaker["consecutive_failures"], breaker["failures_total"]) == (1, 1), breaker
    assert breaker["last_error"]["type"] == "Unavailable"
    assert "ansible_facts" not in result.result, "Ansible keeps no facts of a failed task"
    store = open_store(url)
    try:
        assert _snapshot(store, "libvirt:hv3")["failures_total"] == 1
    finally:
        store.close()


def test_reset_closes_an_open_breaker_with_check_mode_and_diff(lab, lab_module, tmp_path):
    hv1 = lab_module.provider_config(lab.hypervisor("hv1"))
    reset = {PROVIDER: {"provider": hv1, "state": "reset"}}
    tasks = [
        {"name": "force open", CB: {"provider": hv1, "state": "open"}},
        {"name": "validate while open", PROVIDER: {"provider": hv1}, "ignore_errors": True},
        dict(reset, name="reset in check mode", check_mode=True),
        {"name": "query after check mode", CB: {"name": "libvirt:hv1"}},
        dict(reset, name="reset"),
        dict(reset, name="reset again"),
        dict(reset, name="reset again in check mode", check_mode=True),
        {"name": "validate after reset", PROVIDER: {"provider": hv1}},
    ]
    url = _store_url(tmp_path)
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": url})], diff=True)
    assert run.rc == 0, run
    assert "Traceback" not in run.output

    refused = run.task("validate while open")
    assert refused.failed and refused["error"]["type"] == "BreakerOpen", refused

    planned = run.task("reset in check mode")
    assert planned["changed"] is True and planned["breaker"]["state"] == "closed"
    assert planned["diff"]["before"]["state"] == "open" and planned["diff"]["after"]["state"] == "closed"
    assert run.task("query after check mode")["breaker"]["state"] == "open", "check mode closed the breaker"

    done = run.task("reset")
    assert done["changed"] is True
    assert done["diff"]["before"]["state"] == "open" and done["diff"]["after"]["state"] == "closed"
    assert done["breaker"]["state"] == "closed" and done["breaker"]["opened_total"] == 1
    assert done["provider"]["key"] == "libvirt:hv1" and "info" not in done["provider"]
    assert done["ansible_facts"]["resilient_virt_breakers"]["libvirt:hv1"]["state"] == "closed"
    assert [c["type"] for c in done["conditions"]] == ["ProviderRuntimeReady"]

    for title in ("reset again", "reset again in check mode"):
        again = run.task(title)
        assert again["changed"] is False and "diff" not in again.result, again
    assert run.task("validate after reset")["breaker"]["state"] == "closed"
    store = open_store(url)
    try:
        snapshot = _snapshot(store, "libvirt:hv1")
        assert (snapshot["state"], snapshot["opened_total"]) == ("closed", 1)
    finally:
        store.close()
