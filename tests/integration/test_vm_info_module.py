"""resilient.virt.vm_info through real ansible-playbook runs across two lab hypervisors.

Two tiny diskless VMs are created once for the module with resilient.virt.vm: one running on
hv1, one stopped on hv2, both carrying a tag unique to this run (other tests share the lab, so
every listing is narrowed to that tag). They are removed through libvirt at the end.
"""
import uuid

import pytest

from lab_domains import remove_domain
from playbook_runner import play, run_playbook

INFO = "resilient.virt.vm_info"
RUN_TAG = "vminfo-%s" % uuid.uuid4().hex[:8]
VMS = {  # name -> (hypervisor, state, tags)
    RUN_TAG + "-web": ("hv1", "running", [RUN_TAG, "web"]),
    RUN_TAG + "-db": ("hv2", "stopped", [RUN_TAG, "db"]),
}


def _defaults(lab, lab_module, tmp_path):
    providers = dict((name, lab_module.provider_config(lab.hypervisor(name))) for name in ("hv1", "hv2"))
    return {"providers": providers, "state_store": "sqlite:///%s" % (tmp_path / "state.db")}


def _info(title, **args):
    return {"name": title, INFO: args}


def _names(result):
    return [vm["name"] for vm in result["vms"]]


def _remove(lab, name, hypervisor):
    remove_domain(lab.hypervisor(hypervisor).uri, name)


@pytest.fixture(scope="module")
def vms(lab, lab_module, tmp_path_factory):
    """The two VMs, created through resilient.virt.vm; yields {name: vm dict}."""
    tmp_path = tmp_path_factory.mktemp("vm-info-setup")
    tasks = [
        {"name": name, "resilient.virt.vm": {
            "provider": hypervisor, "name": name, "state": state, "tags": tags,
            "vcpus": 1, "memory_mb": 64}}
        for name, (hypervisor, state, tags) in VMS.items()]
    try:
        run = run_playbook(tmp_path, [play(tasks, module_defaults=_defaults(lab, lab_module, tmp_path))])
        assert run.rc == 0, run
        yield dict((name, run.task(name)["vm"]) for name in VMS)
    finally:
        for name, (hypervisor, _dummy, _dummy_tags) in VMS.items():
            _remove(lab, name, hypervisor)


def test_lists_and_filters_across_providers(lab, lab_module, vms, tmp_path):
    web, db = RUN_TAG + "-web", RUN_TAG + "-db"
    tasks = [
        _info("all", all_providers=True),
        _info("tagged", all_providers=True, filters={"tags": [RUN_TAG]}),
        _info("tagged web", all_providers=True, filters={"tags": [RUN_TAG, "web"]}),
        _info("tag nobody has", all_providers=True, filters={"tags": [RUN_TAG, "web", "db"]}),
        _info("running", all_providers=True, filters={"tags": [RUN_TAG], "state": "running"}),
        _info("stopped", all_providers=True, filters={"tags": [RUN_TAG], "state": "stopped"}),
        _info("on hv2", all_providers=True, filters={"tags": [RUN_TAG], "hypervisor": "hv2"}),
        _info("one provider", provider="hv1", filters={"tags": [RUN_TAG]}),
        _info("by name", all_providers=True, name=db),
        _info("missing name", provider="hv1", name=RUN_TAG + "-nothing"),
        _info("missing name everywhere", all_providers=True, name=RUN_TAG + "-nothing"),
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults=_defaults(lab, lab_module, tmp_path))])
    assert run.rc == 0, run
    assert "Traceback" not in run.output

    everything = run.task("all")
    assert everything["changed"] is False and everything["provider_errors"] == []
    listed = everything["vms"]
    keys = [(vm["provider"], vm["name"]) for vm in listed]
    assert keys == sorted(keys), "vms are not sorted by provider, then name"
    assert {("hv1", "libvirt:hv1"), ("hv2", "libvirt:hv2")} == set(
        (vm["provider"], vm["provider_key"]) for vm in listed)
    for vm in listed:
        assert vm["hypervisor"] == vm["provider"], vm
    mine = [vm for vm in listed if RUN_TAG in vm["tags"]]
    assert [(vm["name"], vm["provider"], vm["state"], vm["vcpus"], vm["memory_mb"]) for vm in mine] == [
        (web, "hv1", "running", 1, 64), (db, "hv2", "stopped", 1, 64)]
    assert mine[0]["uuid"] == vms[web]["uuid"] and mine[1]["uuid"] == vms[db]["uuid"]

    expected = {
        "tagged": [web, db],
        "tagged web": [web],
        "tag nobody has": [],
        "running": [web],
        "stopped": [db],
        "on hv2": [db],
        "one provider": [web],
        "by name": [db],
        "missing name": [],
        "missing name everywhere": [],
    }
    for title, names in expected.items():
        result = run.task(title)
        assert not result.failed and _names(result) == names, result
        assert result["provider_errors"] == []
    assert run.task("by name")["vms"][0]["provider"] == "hv2"


def test_a_stopped_provider_warns_or_fails(lab, lab_module, vms, outage, tmp_path):
    outage.stop("hv2")
    once = {"retry_preset": "none"}
    tagged = {"tags": [RUN_TAG]}
    tasks = [
        _info("warn", all_providers=True, filters=tagged, on_provider_error="warn", resilience=once),
        dict(_info("fail", all_providers=True, filters=tagged, resilience=once), ignore_errors=True),
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults=_defaults(lab, lab_module, tmp_path))])
    assert "Traceback" not in run.output

    warned = run.task("warn")
    assert not warned.failed, warned
    assert _names(warned) == [RUN_TAG + "-web"]
    (error,) = warned["provider_errors"]
    assert error["provider"] == "hv2" and error["error"]["type"] == "Unavailable", error
    assert error["error"]["retryable"] is True
    assert any("hv2" in w and "Unavailable" in w for w in warned.get("warnings", [])), warned

    failed = run.task("fail")
    assert failed.failed and failed["error"]["type"] == "Unavailable", failed
    assert "libvirt:hv2" in failed["msg"]


def test_provider_and_all_providers_together_is_invalid(lab, lab_module, tmp_path):
    tasks = [
        dict(_info("both", provider="hv1", all_providers=True), ignore_errors=True),
        dict(_info("all without catalog", all_providers=True, providers={}), ignore_errors=True),
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults=_defaults(lab, lab_module, tmp_path))])
    assert "Traceback" not in run.output
    both = run.task("both")
    assert both.failed and both["error"]["type"] == "InvalidSpec"
    assert "provider" in both["msg"] and "all_providers" in both["msg"]
    empty = run.task("all without catalog")
    assert empty.failed and empty["error"]["type"] == "InvalidSpec" and "providers" in empty["msg"]
