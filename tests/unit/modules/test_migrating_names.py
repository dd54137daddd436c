"""The names a user of community.vmware types are accepted where they mean the same thing:
``hostname`` (the vSphere endpoint), ``esxi_hostname`` (the ESXi host of a VM) and
``wait_for_ip_address``."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import provider_class

from tests.unit.modules.test_fuzz import GOOD_PROVIDER, MODULES, run_module

VC = {"type": "vsphere", "username": "automation", "password": "Vc-Pa55word-1"}


def test_hostname_is_the_vsphere_endpoint_host():
    provider = provider_class("vsphere")(dict(VC, hostname="vc.example.com"), environ={})
    assert provider.config["host"] == "vc.example.com" and "hostname" not in provider.config
    assert provider.key == "vsphere:vc.example.com:443"
    # the environment's VMWARE_HOST does not override it, nor is it named as its source
    provider = provider_class("vsphere")(dict(VC, hostname="vc.example.com"),
                                         environ={"VMWARE_HOST": "other.example.com"})
    assert provider.config["host"] == "vc.example.com"
    assert provider.option_path("host") == "provider.host"


def test_host_and_hostname_together_are_refused_naming_the_alias():
    with pytest.raises(InvalidSpec) as caught:
        provider_class("vsphere")(dict(VC, host="a.example.com", hostname="b.example.com"),
                                  environ={})
    assert [e["path"] for e in caught.value.details["errors"]] == ["provider.hostname"]
    assert "Vc-Pa55word-1" not in str(caught.value)


def test_wait_for_ip_address_and_esxi_hostname_are_the_vm_module_options(tmp_path):
    result, printed = run_module(MODULES["vm"], {
        "provider": GOOD_PROVIDER, "name": "x", "state": "present", "wait_for_ip_address": True,
        "placement": {"esxi_hostname": "esx1"}, "state_store": "sqlite://%s" % (tmp_path / "s.db")})
    assert result["failed"] and "wait_for_ip: needs state=running" in result["msg"], printed
    args = result["invocation"]["module_args"]
    assert args["wait_for_ip"] is True and args["placement"]["host"] == "esx1", args


def test_a_fleet_entry_takes_esxi_hostname_as_its_placement_host():
    from ansible_collections.resilient.virt.plugins.module_utils._fleet.desired import desired_fleet

    config = dict(VC, host="vc.example.com")
    (vm,) = desired_fleet([{"name": "web1", "vcpus": 1, "memory_mb": 64,
                            "placement": {"esxi_hostname": "esx1"}}], config,
                          lambda reference, path: dict(reference), lambda c: "vsphere:vc")
    assert vm.spec["placement"] == {"host": "esx1"}
    with pytest.raises(InvalidSpec) as caught:
        desired_fleet([{"name": "web1", "placement": {"esxi_hostname": "a", "host": "b"}}], config,
                      lambda reference, path: dict(reference), lambda c: "vsphere:vc")
    assert [e["path"] for e in caught.value.details["errors"]] == ["vms[0].placement.esxi_hostname"]
