"""Secrets never appear in ``ansible-playbook -vvv`` output, in results or in the state store.

Every module runs through real ansible-playbook with secrets in every place a user puts them:
a vSphere password in a ``provider`` dict and in a ``providers`` catalog given through
``module_defaults`` (so every task receives every password), a Proxmox VE password and API token
secret (the token's id is no secret: it is shown), a password inside a libvirt URI,
a Redis ``state_store`` URL with a password (as an option and as an environment variable), a
secret-named key that is not an option of the backend, and credentials written into a vSphere
host. Each scenario fails in a different place: Ansible's own argument validation, the
collection's checks before a provider opens, the provider or the store being unreachable; and
one succeeds against the lab's real hypervisor, simulators (vSphere, and a Proxmox VE simulator
of the test's own, fakepve) and a real password-protected Redis.

The secrets reach the plays as extra variables, as vault or AWX credentials would: the plays
name them by template, so what Ansible prints of the playbook file itself holds no secret.
Each play runs with ``-vvv`` and two callbacks: the default one prints what a user sees, and the
JSON callback's document (each task's result) goes to a file; the secrets are searched in both.
"""
import os
import uuid

import pytest

from ansible_collections.resilient.virt.plugins.plugin_utils._module_list import MODULES

from playbook_runner import play, run_playbook


TOKEN_ID = "root@pam!ci"  # an API token's id: no secret, shown as it is


def _secret(kind):
    return "%s-S3cret-%s" % (kind, uuid.uuid4().hex[:10])


@pytest.fixture(scope="module")
def secrets():
    return {name: _secret(name) for name in ("vc", "libvirt", "redis", "token", "host", "pve",
                                             "pve_token")}


def _run_both(tmp_path, plays, secrets, env=None, name="play"):
    """Run ``plays`` with -vvv under both callbacks at once: the run's ``output`` is what the
    default callback shows, its ``document`` the JSON callback's, its tasks read from that."""
    return run_playbook(tmp_path, plays, extra_vars=secrets, args=("-vvv",), name=name, env=env,
                        shown_with="default")


def _assert_hidden(secrets, *texts):
    for text in texts:
        for name, value in secrets.items():
            assert value not in text, "the %s secret %r is shown:\n%s" % (
                name, value, text[max(0, text.find(value) - 1500):text.find(value) + 300])


def _catalog(lab):
    hv = lab.hypervisor("hv1")
    return {
        "vc": {"type": "vsphere", "host": "127.0.0.1", "port": 1, "username": "u",
               "password": "{{ vc }}"},
        "kvm": {"type": "libvirt", "uri": "qemu+tcp://bob:{{ libvirt }}@127.0.0.1:1/system"},
        "hv1": {"type": "libvirt", "name": "hv1", "domain_type": "qemu",
                "uri": hv.uri.replace("qemu+unix:///", "qemu+unix://bob:{{ libvirt }}@/")},
        "pve": {"type": "proxmox", "host": "127.0.0.1", "port": 1, "username": "root@pam",
                "password": "{{ pve }}"},
        "pvet": {"type": "proxmox", "host": "127.0.0.1", "port": 1, "token_id": TOKEN_ID,
                 "token_secret": "{{ pve_token }}"},
    }


def _task(module, title, **args):
    return {"name": title, "resilient.virt." + module: args, "ignore_errors": True}


def test_argument_errors_of_every_module_show_no_secret(lab, tmp_path, secrets):
    """Ansible rejects the arguments before the module runs any of its own code."""
    tasks = [
        _task("vm", "vm", provider="vc", name="x", state="started"),
        _task("vm_info", "vm_info", provider="kvm", bogus_option=1),
        _task("provider", "provider", provider="vc", list_hypervisors="maybe"),
        _task("circuit_breaker", "circuit_breaker", state="bogus"),
        _task("failover_reservation", "failover_reservation", requirements={"*": 1},
              max_vms_to_process="many"),
        _task("vm_fleet", "vm_fleet", owner="sec", vms=[], max_attempts="many"),
        _task("backup", "backup", provider="vc", vm="x", keep_last="many"),
        _task("backup_status", "backup_status", mode="bogus"),
        _task("vm_snapshot", "vm_snapshot", provider="vc", vm="x", name="s", keep_last="many"),
        _task("vm_migrate", "vm_migrate", provider="kvm", vm="x", target="hv1", live="maybe"),
        _task("hypervisor", "hypervisor", provider="kvm", state="bogus"),
    ]
    defaults = {"providers": _catalog(lab), "state_store": "redis://:{{ redis }}@127.0.0.1:1/0"}
    run = _run_both(tmp_path, [play(tasks, module_defaults=defaults)], secrets)
    _assert_hidden(secrets, run.output, run.document)
    # the masked values are still there for the user, as Ansible shows no_log values; an API
    # token's id is no secret
    shown = run.task("vm")["invocation"]["module_args"]["providers"]
    assert shown["vc"]["password"] == shown["pvet"]["token_secret"] == \
        "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
    assert shown["pvet"]["token_id"] == TOKEN_ID
    for module in MODULES:
        result = run.task(module)
        assert result.failed, result
        assert result["error"]["type"] == "InvalidSpec", result
        assert result["msg"].startswith("InvalidSpec: "), result


def test_errors_after_the_arguments_show_no_secret(lab, tmp_path, secrets):
    """The collection's own checks, unreachable providers and an unreachable store."""
    fast = {"retry_preset": "none", "timeout_validate": "2s", "timeout_describe": "2s"}
    tasks = [
        _task("vm", "vm", provider="vc", name="x", vcpus=1, memory_mb=64, state="running"),
        _task("vm_info", "vm_info", provider="kvm"),
        _task("provider", "provider", provider="vc"),
        _task("circuit_breaker", "circuit_breaker", provider="vc", state="open"),
        _task("failover_reservation", "failover_reservation", provider="kvm",
              requirements={"*": 1}),
        _task("vm_fleet", "vm_fleet", owner="sec", vms=[
            {"name": "x", "provider": "vc", "vcpus": 1, "memory_mb": 64},
            {"name": "x", "provider": "kvm", "vcpus": 1, "memory_mb": 64}]),
        _task("vm_info", "unknown secret option", provider={
            "type": "libvirt", "uri": "test:///default", "api_token": "{{ token }}"}),
        _task("vm_info", "credentials in the host", provider={
            "type": "vsphere", "host": "admin:{{ host }}@127.0.0.1", "username": "u",
            "password": "{{ vc }}"}),
        _task("vm_info", "store unreachable", provider="hv1", store_failure="closed",
              state_store="redis://:{{ redis }}@127.0.0.1:1/0"),
        _task("backup", "backup", provider="kvm", vm="x"),
        _task("backup_status", "backup_status", mode="reconcile"),
        _task("vm_snapshot", "vm_snapshot", provider="kvm", vm="x", name="s"),
        _task("vm", "proxmox password", provider="pve", name="x", state="absent"),
        _task("vm_info", "proxmox token", provider="pvet"),
    ]
    # as AWX injects a credential: into the environment of ansible-playbook itself (a task's
    # own `environment:` keyword is printed by Ansible at -vvv, whatever the module does)
    from_environment = _task("vm_info", "store from the environment unreachable", provider="hv1")
    environ = {"RESILIENT_VIRT_STATE_STORE": "redis://:%s@127.0.0.1:1/0" % secrets["redis"]}
    defaults = {"providers": _catalog(lab), "resilience": fast}
    store = "sqlite:///%s/state.db" % tmp_path
    plays = [play(tasks, module_defaults=dict(defaults, state_store=store)),
             play([from_environment], module_defaults=defaults)]
    run = _run_both(tmp_path, plays, secrets, env=environ)
    _assert_hidden(secrets, run.output, run.document)
    expected = {"vm": "Unavailable", "vm_info": "Unavailable", "provider": "Unavailable",
                "failover_reservation": "Unavailable", "vm_fleet": "Unavailable",
                "unknown secret option": "InvalidSpec",
                "credentials in the host": "InvalidSpec", "store unreachable": "Unavailable",
                "backup": "Unavailable", "vm_snapshot": "Unavailable",
                "proxmox password": "Unavailable",
                "proxmox token": "Unavailable"}
    for title, kind in expected.items():
        result = run.task(title)
        assert result.failed and result["error"]["type"] == kind, result
    # store_failure open (the default): the task runs on, and its warning names the store
    from_env = run.task("store from the environment unreachable")
    assert not from_env.failed, from_env
    assert any("state store redis://***@127.0.0.1:1/0" in w for w in from_env["warnings"]), from_env
    assert "provider.api_token is not an option" in run.task("unknown secret option")["msg"]
    assert "provider.host" in run.task("credentials in the host")["msg"]
    assert "state store redis://***@127.0.0.1:1/0" in run.task("store unreachable")["msg"]
    assert run.task("circuit_breaker")["changed"] is True
    assert run.task("backup")["record"]["phase"] == "Failed"  # the record is in the store file
    assert not run.task("backup_status").failed
    # the store file holds the breaker of vc and of the failed calls: no secret in it
    path = str(tmp_path / "state.db")
    stored = b""
    for name in (path, path + "-wal"):
        if os.path.exists(name):
            with open(name, "rb") as f:
                stored += f.read()
    assert b"breaker" in stored
    _assert_hidden(secrets, stored.decode("utf-8", "replace"))


def test_a_successful_play_shows_no_secret(lab, vsphere, vsphere_plain_http, simulated_pve,
                                           start_redis, tmp_path, secrets):
    """Real hypervisor (password in its URI), real simulators (the lab's over HTTPS, one over
    plain HTTP, which warns; a Proxmox VE simulator with a password and with an API token),
    real password-protected Redis."""
    server = start_redis(password=secrets["redis"])
    name = "sec-%s" % uuid.uuid4().hex[:6]
    catalog = _catalog(lab)
    catalog["vcsim"] = dict(vsphere, password="{{ vcsim }}")
    catalog["vcsim-http"] = dict(vsphere_plain_http, name="vcsim-http", password="{{ vcsim_http }}")
    catalog["pve"] = dict(simulated_pve.provider, password="{{ pve_sim }}")
    catalog["pvet"] = dict(simulated_pve.token_provider, token_secret="{{ pve_sim_token }}")
    all_secrets = dict(secrets, vcsim=vsphere["password"], vcsim_http=vsphere_plain_http["password"],
                       pve_sim=simulated_pve.password, pve_sim_token=simulated_pve.token_secret)
    tasks = [
        _task("provider", "provider hv1", provider="hv1"),
        _task("provider", "provider vcsim", provider="vcsim"),
        _task("provider", "provider vcsim-http", provider="vcsim-http"),
        _task("vm", "vm", provider="hv1", name=name, vcpus=1, memory_mb=64),
        _task("vm_info", "vm_info", provider="vcsim"),
        _task("circuit_breaker", "circuit_breaker"),
        _task("failover_reservation", "failover_reservation", provider="hv1",
              requirements={"*": 1}, creator=name),
        _task("failover_reservation", "failover_reservation absent", state="absent",
              creator=name),
        _task("vm", "vm absent", provider="hv1", name=name, state="absent"),
        _task("vm_fleet", "vm_fleet", owner=name, vms=[
            {"name": name + "-f", "provider": "hv1", "vcpus": 1, "memory_mb": 64},
            {"name": name + "-f", "provider": "vcsim", "vcpus": 1, "memory_mb": 64}]),
        _task("vm_fleet", "vm_fleet prune", owner=name, vms=[], prune=True, max_prune="100%"),
        _task("vm", "vm for backups", provider="vcsim", name=name + "-b", vcpus=1, memory_mb=64),
        _task("backup", "backup", provider="vcsim", vm=name + "-b", name=name + "-b1"),
        _task("backup_status", "backup_status", mode="reconcile"),
        _task("backup", "backup absent", provider="vcsim", name=name + "-b1", state="absent"),
        _task("vm", "vm for backups absent", provider="vcsim", name=name + "-b", state="absent"),
        _task("provider", "provider pve", provider="pve"),
        _task("vm", "vm on pve", provider="pvet", name=name + "-p", vcpus=1, memory_mb=64,
              state="running"),
        _task("vm_info", "vm_info pve", provider="pve", name=name + "-p"),
        _task("vm", "vm on pve absent", provider="pvet", name=name + "-p", state="absent"),
    ]
    defaults = {"providers": dict((k, v) for k, v in catalog.items() if k != "kvm"),
                "state_store": "redis://:{{ redis }}@127.0.0.1:%d/0" % server.port}
    run = _run_both(tmp_path, [play(tasks, module_defaults=defaults)], all_secrets)
    for task in run.tasks:
        assert not task.failed, task
    assert run.task("vm_fleet")["summary"]["created"] == 2
    assert run.task("vm_fleet prune")["summary"]["pruned"] == 2
    assert run.task("backup")["record"]["phase"] == "Completed"
    assert run.task("vm_info pve")["vms"][0]["state"] == "running"
    assert [r["name"] for r in simulated_pve.oracle.cluster.resources.get(type="vm")] == ["tpl"]
    assert "provider.protocol is http" in run.output  # the plain one's warning is shown...
    _assert_hidden(all_secrets, run.output, run.document)  # ...without its password
    _assert_hidden(all_secrets, server.keys_and_values())
    assert "breaker" in server.keys_and_values()  # the store was really used
