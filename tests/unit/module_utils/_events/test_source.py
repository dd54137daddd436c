"""The hypervisor_events source's arguments: defaults, and every bad one named with its fix."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._events.source import check_args
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec

KVM = {"type": "libvirt", "uri": "qemu:///system"}


def test_defaults_fill_what_is_not_given():
    args = check_args({"providers": {"kvm1": KVM}, "state_store": "sqlite:///tmp/x.db"})
    assert args["group"] == "hypervisor_events" and args["lease_seconds"] == 15.0
    assert (args["keepalive_interval"], args["keepalive_count"]) == (5, 3)
    # null (a rulebook's optional variable left out) takes the default too
    given = check_args({"providers": {"kvm1": KVM}, "keepalive_interval": None,
                        "keepalive_count": 2, "resilience": None})
    assert (given["keepalive_interval"], given["keepalive_count"]) == (5, 2)


def test_every_bad_argument_is_named_at_once():
    with pytest.raises(InvalidSpec) as caught:
        check_args({"providers": {"kvm1": KVM, "pve": {"type": "proxmox"}, "bad": "x"},
                    "lease_seconds": 0, "keepalive_count": 1.5, "group": "", "provider": {}})
    paths = sorted(e["path"] for e in caught.value.details["errors"])
    assert paths == ["group", "keepalive_count", "lease_seconds", "provider", "providers.bad",
                     "providers.pve.type"]
    assert "the events of libvirt, vsphere providers are watched" in caught.value.message


def test_providers_are_required_and_the_store_url_is_checked():
    with pytest.raises(InvalidSpec, match="providers is required"):
        check_args({})
    with pytest.raises(InvalidSpec, match="state_store"):
        check_args({"providers": {"kvm1": KVM}, "state_store": "sqlite://relative.db"})
