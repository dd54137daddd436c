"""The VM dict: :class:`contract.VM` types it, ``VM_FIELDS`` lists its keys, ``new_vm`` makes one."""
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    VM, VM_FIELDS, Provider, new_vm)


class Bare(Provider):
    type_name = "bare"


def test_every_key_but_changed_is_required_and_listed_in_vm_fields():
    assert VM.__required_keys__ == frozenset(VM_FIELDS)
    assert VM.__optional_keys__ == frozenset(("changed",))


def test_new_vm_gives_every_field_in_order():
    vm = new_vm(Bare({"type": "bare", "name": "lab"}), "web1", vcpus=2)
    assert tuple(vm) == VM_FIELDS
    assert (vm["name"], vm["vcpus"], vm["state"], vm["provider"]) == ("web1", 2, "unknown", "lab")
