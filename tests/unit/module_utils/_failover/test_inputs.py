"""Input shapes and their errors: model dicts, settings, requirement patterns, names."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import (
    VM, Hypervisor, Reservation)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import NameAllocator
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    required_count, validate_requirements)
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import resource_error
from ansible_collections.resilient.virt.plugins.module_utils._failover.settings import (
    FailoverSettings)


def test_models_round_trip_through_dicts():
    hv = Hypervisor("h1", "az-a", 8, 16384, frozenset(["B", "A"]), 2, 4096)
    vm = VM("u1", "h1", "az-a", "m1.large", 2, 4096, {"trait:A": "required"})
    res = Reservation("r1", "h2", "az-a", {"cpu": 2, "memory_mb": 4096}, {"u1": "h1"}, "me",
                      "2027-01-15T08:00:00Z", None, [{"type": "Ready", "status": "True"}])
    assert hv.to_dict()["traits"] == ["A", "B"]
    assert Hypervisor.from_dict(hv.to_dict()) == hv
    assert VM.from_dict(vm.to_dict()) == vm
    assert Reservation.from_dict(res.to_dict()) == res


def test_vm_dict_from_a_provider_uses_hypervisor_and_ignores_extra_keys():
    vm = VM.from_dict({"uuid": "u1", "hypervisor": "h1", "name": "web", "state": "running",
                       "vcpus": 2, "memory_mb": 2048, "disks": []})
    assert (vm.host, vm.vcpus, vm.memory_mb, vm.flavor) == ("h1", 2, 2048, "")


@pytest.mark.parametrize("cls, data, path", [
    (VM, {"uuid": "u1"}, "vms[0].host"),
    (VM, {"uuid": "u1", "host": "h", "vcpus": -1}, "vms[0].vcpus"),
    (VM, {"uuid": "u1", "host": "h", "memory_mb": True}, "vms[0].memory_mb"),
    (VM, {"uuid": "u1", "host": "h", "extra_specs": {"trait:A": 1}}, "vms[0].extra_specs"),
    (Hypervisor, {"name": "h", "traits": "CUSTOM_A"}, "vms[0].traits"),
    (Reservation, {"name": "r", "host": "h", "allocations": {"u": ""}}, "vms[0].allocations"),
    (Reservation, {"name": "r", "host": "h", "resources": {"cpu": "2"}}, "vms[0].resources"),
    (Reservation, {"name": "r", "host": "h", "last_changed": 5}, "vms[0].last_changed"),
])
def test_bad_fields_are_named(cls, data, path):
    with pytest.raises(InvalidSpec) as caught:
        cls.from_dict(data, "vms[0]")
    assert str(caught.value).startswith(path)
    assert caught.value.details["errors"][0]["path"].startswith(path)


def test_only_cpu_and_memory_mb_are_resource_keys():
    assert resource_error({"cpu": 1, "memory_mb": 2}) is None
    assert "'memory'" in resource_error({"cpu": 1, "memory": 2})


@pytest.mark.parametrize("pattern, flavor, expected", [
    ("hana_*", "hana_large", 2), ("hana_*", "hana/large", 0), ("m?.large", "m1.large", 2),
    ("m[0-9].*", "m7.x", 2), ("m[^0-9].*", "m7.x", 0), ("a\\*b", "a*b", 2), ("*", "", 0),
])
def test_requirement_patterns(pattern, flavor, expected):
    assert required_count(flavor, validate_requirements({pattern: 2})) == expected


@pytest.mark.parametrize("requirements, message", [
    ({"m[1": 1}, "unclosed"), ({"m\\": 1}, "backslash"), ({"m[]": 1}, "character class"),
    ({"*": -1}, "whole number"), ({"*": True}, "whole number"), ({"": 1}, "non-empty"),
    (["*"], "mapping"),
])
def test_bad_requirements_are_explained(requirements, message):
    with pytest.raises(InvalidSpec, match=message):
        validate_requirements(requirements, "failover.requirements")


def test_settings_from_options():
    settings = FailoverSettings.from_dict({"requirements": {"*": 1}, "revalidation_interval": "15m",
                                           "max_vms_to_process": 30})
    assert settings.revalidation_interval == 900.0 and settings.max_vms_to_process == 30
    assert settings.limit_one_new_per_hypervisor is True
    with pytest.raises(InvalidSpec, match="failover.max_vm.*not a setting"):
        FailoverSettings.from_dict({"max_vm": 1})
    with pytest.raises(InvalidSpec, match="revalidation_interval"):
        FailoverSettings.from_dict({"revalidation_interval": "soon"})
    with pytest.raises(InvalidSpec, match="limit_one_new_per_hypervisor"):
        FailoverSettings.from_dict({"limit_one_new_per_hypervisor": "yes"})
    assert settings.max_changes == 500
    assert FailoverSettings.from_dict({"max_changes": 0}).max_changes == 0
    for bad in (-1, True, "5"):
        with pytest.raises(InvalidSpec, match=r"failover.max_changes.*0 = no consolidation"):
            FailoverSettings.from_dict({"max_changes": bad})


def test_name_allocator_is_reproducible_and_skips_taken_names():
    first = NameAllocator().new_name("AZ_1", "vm/h2")
    assert first.startswith("failover-az1-") and len(first) == len("failover-az1-") + 5
    assert NameAllocator().new_name("AZ_1", "vm/h2") == first
    other = NameAllocator([first]).new_name("AZ_1", "vm/h2")
    assert other != first and other.startswith("failover-az1-")
