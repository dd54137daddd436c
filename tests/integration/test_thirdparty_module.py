"""resilient.virt.vm on a third-party backend found only through its entry point.

The example backend (tests/fixtures/thirdparty_provider, type ``memory_example``) keeps VMs in
a JSON file; ``make deps`` installs it. Nothing in the collection names it.
"""
import base64
import json

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
    installed_entry_points)

from playbook_runner import play, run_playbook

TYPE = "memory_example"


@pytest.fixture
def memory_example_installed():
    names = [ep.name for ep in installed_entry_points()]
    if TYPE not in names:
        pytest.fail("the example backend %r is not installed (entry points found: %s): run "
                    "`make deps`" % (TYPE, ", ".join(names) or "none"))


def test_vm_lifecycle_on_an_entry_point_backend(memory_example_installed, tmp_path):
    path = tmp_path / "vms.json"
    vm = {"name": "tp-web1", "vcpus": 2, "memory_mb": 256, "tags": ["web"]}
    tasks = [
        {"name": "create", "resilient.virt.vm": dict(vm, state="running")},
        {"name": "create again", "resilient.virt.vm": dict(vm, state="running")},
        {"name": "stored", "ansible.builtin.slurp": {"src": str(path)}},
        {"name": "delete", "resilient.virt.vm": {"name": vm["name"], "state": "absent"}},
        {"name": "delete again", "resilient.virt.vm": {"name": vm["name"], "state": "absent"}},
    ]
    defaults = {"provider": {"type": TYPE, "name": "mem", "path": str(path)},
                "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)])
    assert run.rc == 0, run

    created = run.task("create")
    assert created["changed"] is True and created["actions"] == ["create", "start"]
    assert created["vm"]["state"] == "running" and created["vm"]["provider_key"] == "memory_example:mem"
    again = run.task("create again")
    assert again["changed"] is False and again["actions"] == []
    stored = json.loads(base64.b64decode(run.task("stored")["content"]))
    record = stored[vm["name"]]
    assert (record["vcpus"], record["memory_mb"], record["state"]) == (2, 256, "running")

    assert run.task("delete")["changed"] is True
    assert run.task("delete again")["changed"] is False
    with open(path) as f:
        assert vm["name"] not in json.load(f)
