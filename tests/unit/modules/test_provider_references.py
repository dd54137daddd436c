"""A provider is named in results the way the user named it, and either form is accepted back."""
from ansible_collections.resilient.virt.plugins.modules import vm_info

from tests.unit.modules.test_fuzz import run_module

CATALOG = {"hv1": {"type": "libvirt", "uri": "test:///default"},
           "named": {"type": "libvirt", "uri": "test:///default", "name": "other"}}


def _vm_info(tmp_path, **args):
    return run_module(vm_info.VmInfoModule, dict(args, providers=CATALOG,
                                                 state_store="sqlite://%s" % (tmp_path / "s.db")))


def test_results_give_the_name_and_the_key_and_both_are_accepted(tmp_path):
    by_name, printed = _vm_info(tmp_path, provider="hv1", name="test")
    assert not by_name.get("failed"), printed
    (vm,) = by_name["vms"]
    assert (vm["provider"], vm["provider_key"]) == ("hv1", "libvirt:hv1")
    for reference in (vm["provider"], vm["provider_key"]):
        again, printed = _vm_info(tmp_path, provider=reference, name="test")
        assert [(v["provider"], v["provider_key"]) for v in again["vms"]] == [("hv1", "libvirt:hv1")], printed
    # an entry with a name of its own is known by that name in its key
    other, printed = _vm_info(tmp_path, provider="libvirt:other", name="test")
    assert [(v["provider"], v["provider_key"]) for v in other["vms"]] == [("other", "libvirt:other")], printed


def test_a_key_that_matches_no_entry_names_the_known_ones(tmp_path):
    result, printed = _vm_info(tmp_path, provider="libvirt:nowhere", name="test")
    assert result["failed"] and result["error"]["type"] == "InvalidSpec", printed
    assert "'libvirt:nowhere' names no entry of 'providers' (known: hv1, named)" in result["msg"]
