"""reconcile() reports the VM a create made, whatever the VM dict the create returns says of
itself: a vSphere clone ends with the change of what the spec sets, which says ``changed:
False`` when the clone already has it all."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound
from ansible_collections.resilient.virt.plugins.module_utils._vm.converge import reconcile


class CloningProvider:
    """A FAKE provider whose create, like the vSphere backend's clone, returns the VM dict of its
    last step: ``changed`` False when that step found nothing to change."""

    def __init__(self):
        self.vms = {}
        self.calls = []

    def describe(self, name):
        if name not in self.vms:
            raise NotFound("VM %r not found" % name)
        return dict(self.vms[name])

    def create(self, spec):
        self.calls.append("create")
        self.vms[spec["name"]] = {"name": spec["name"], "state": "stopped", "vcpus": 2,
                                  "memory_mb": 256}
        return dict(self.vms[spec["name"]], changed=False)

    def power(self, name, action, timeout=None):
        self.calls.append(action)
        self.vms[name]["state"] = "running"
        return dict(self.vms[name])


@pytest.mark.parametrize("state, actions", [("present", ["create"]),
                                            ("running", ["create", "start"])])
def test_a_clone_is_reported_as_a_create_in_check_mode_and_when_done(state, actions):
    provider = CloningProvider()
    spec = {"template": "debian12", "customization": {"hostname": "web1"}}
    planned = reconcile(provider, "web1", state, spec, check_mode=True)
    assert planned["changed"] is True and planned["actions"] == actions
    assert provider.calls == []
    made = reconcile(provider, "web1", state, spec)
    assert made["changed"] is True and made["actions"] == actions, made
    assert provider.calls == [{"start": "on"}.get(verb, verb) for verb in actions]
    assert "changed" not in made["vm"]
    again = reconcile(provider, "web1", state, spec)
    assert again["changed"] is False and again["actions"] == []
