"""The inventory source file: every mistake fails the source naming the option, before any
provider is asked (the observer plugin records every attempt); a refused port is Unavailable;
a provider that is down keeps its last good answer, stale, whatever the cache timeout."""
import os
import socket
import time

import pytest
import yaml
from inventory_runner import run_inventory
from observer_plugin import ATTEMPTS_ENV, read_attempts
from playbook_runner import plugin_env

P = "resilient_virt_"
PASSWORD_ENV = "TEST_VCSIM_PASSWORD"


def _source(lab, tmp_path, **options):
    with open(lab.inventory_file) as handle:
        providers = yaml.safe_load(handle)["all"]["vars"]["resilient_virt_providers"]
    password = providers["vcsim"]["password"]
    providers["vcsim"]["password"] = "{{ lookup('ansible.builtin.env', '%s') }}" % PASSWORD_ENV
    source = {"providers": providers, "timeout": "10s",
              "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    source.update(options)
    return source, {PASSWORD_ENV: password}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


BAD = [
    ({"bogus_option": 1}, "bogus_option: not an option of resilient.virt.hypervisors"),
    ({"include_vms": "maybe"}, "include_vms: 'maybe' is not a boolean"),
    ({"vm_details": "sometimes"}, "vm_details: 'sometimes' is not a boolean"),
    ({"prefix": "rv\x01_"}, "prefix: 'rv\\x01_' cannot start a variable name"),
    ({"prefix": "my-vars."}, "prefix: 'my-vars.' cannot start a variable name"),
    ({"group_prefix": "g\u202e"}, "group_prefix: "),
    ({"state_store": "mongodb://:Store-Pa55@db:27017/x"},
     "state_store 'mongodb://***@db:27017/x' is not a supported URL"),
    ({"state_store": "redis+sentinel://:Store-Pa55@h1"}, "state_store redis+sentinel://***@h1"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[sorted(c)[0] + str(i) for i, (c, m) in enumerate(BAD)])
def test_a_mistake_in_the_source_fails_it_naming_the_option_before_any_call(lab, tmp_path, change, message):
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import ACCEPTED_FORMS

    source, env = _source(lab, tmp_path, **change)
    attempts = str(tmp_path / "attempts.jsonl")
    env.update(plugin_env("observer_plugin"), **{ATTEMPTS_ENV: attempts})
    run = run_inventory(tmp_path, source, env=env)
    assert run.rc != 0 and message in run.output, run
    assert "InvalidSpec: " in run.output, run
    assert "providers." not in run.output.split(message)[0][-200:], run  # not a provider's error
    assert read_attempts(attempts) == [], "a provider was asked"
    assert "Traceback" not in run.output and "Store-Pa55" not in run.output
    assert env[PASSWORD_ENV] not in run.output
    if "state_store" in change:
        assert ACCEPTED_FORMS in run.output.replace("\n", " ").replace("  ", " ") or "accepted forms" not in run.output
        assert "***@]" not in run.output  # the list of forms is not mangled by the redaction


def test_another_prefix_keeps_every_host_named(lab, tmp_path):
    source, env = _source(lab, tmp_path, prefix="rv_", include_vms=False)
    run = run_inventory(tmp_path, source, env=env)
    assert run.rc == 0 and "WARNING" not in run.stderr, run
    assert {"hv1", "hv2", "hv3"} <= set(run.hosts("hypervisors")), run
    assert run.hostvars["hv1"]["rv_name"] == "hv1"


def test_a_refused_vsphere_port_is_unavailable_not_a_timeout(lab, tmp_path):
    providers = {"vc": {"type": "vsphere", "host": "127.0.0.1", "port": _free_port(),
                        "username": "u", "password": "Vc-Pa55word", "validate_certs": False}}
    source = {"providers": providers, "timeout": "4s",
              "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    run = run_inventory(tmp_path, source)
    assert run.rc == 0, run
    assert "provider vc gave no answer (Unavailable: cannot reach vSphere endpoint" in run.stderr, run
    assert "Timeout" not in run.stderr and "Vc-Pa55word" not in run.output


def test_a_provider_down_keeps_its_last_answer_stale_whatever_the_cache_timeout(lab, outage, tmp_path):
    cache = {"cache": True, "cache_plugin": "ansible.builtin.jsonfile",
             "cache_connection": str(tmp_path / "cache"), "cache_timeout": 2}
    source, env = _source(lab, tmp_path, **cache)
    warm = run_inventory(tmp_path, source, env=env)
    assert warm.rc == 0 and "hv2" in warm.hosts("hypervisors"), warm
    outage.stop("hv2")
    time.sleep(2.5)  # the cache has expired
    later = run_inventory(tmp_path, source, env=env)
    assert later.rc == 0, later
    assert "provider hv2 gave no answer (Unavailable" in later.stderr, later
    hv2 = later.hostvars.get("hv2")
    assert hv2 and hv2[P + "stale"] is True and hv2[P + "age_seconds"] >= 2, later  # was: dropped
    assert hv2[P + "scanned_at"] == warm.hostvars["hv2"][P + "scanned_at"]
    assert later.hostvars["hv1"][P + "stale"] is False

    time.sleep(2.5)
    capped = run_inventory(tmp_path, dict(source, max_stale_age="1s"), env=env)
    assert capped.rc == 0, capped
    assert "hv2" not in capped.hosts("hypervisors") and "its hosts are missing" in capped.stderr
    assert os.path.exists(str(tmp_path / "state.db"))
