"""The inventory shows which hypervisors are in maintenance: marked by the hypervisor module in
the state store (its state then reads maintenance), or so reported by their provider; a store
that cannot be read leaves the providers' word."""
from ansible_collections.resilient.virt.plugins.module_utils._inventory.hosts import host_records
from ansible_collections.resilient.virt.plugins.module_utils._inventory.scan import (
    with_maintenance)
from ansible_collections.resilient.virt.plugins.module_utils._migration.maintenance import mark
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils.errors import StoreUnavailable


def _answers():
    return [{"name": "hv1", "type": "libvirt", "key": "libvirt:hv1", "ok": True, "breaker": None, "scanned_at": 0,
             "hypervisors": [{"name": "hv1", "state": "up"}], "vms": []},
            {"name": "vc", "type": "vsphere", "key": "vsphere:vc", "ok": True, "breaker": None, "scanned_at": 0,
             "hypervisors": [{"name": "H0", "state": "connected"},
                             {"name": "H1", "state": "maintenance"}], "vms": []}]


def _vars(answers):
    return dict((r["name"], (r["vars"]["resilient_virt_state"],
                             r["vars"]["resilient_virt_maintenance"], "state_maintenance" in
                             r["groups"])) for r in host_records(answers))


def test_marked_and_reported_hypervisors_show_maintenance():
    store = MemoryStore("inventory")
    mark(store, "libvirt:hv1", "hv1", True)
    assert _vars(with_maintenance(_answers(), store)) == {
        "hv1": ("maintenance", True, True), "H0": ("connected", False, False),
        "H1": ("maintenance", True, True)}


def test_a_store_that_cannot_be_read_leaves_the_providers_word():
    class Down(MemoryStore):
        def items(self, *args, **kwargs):
            raise StoreUnavailable("down", "no answer")

    assert _vars(with_maintenance(_answers(), Down("down")))["hv1"] == ("up", False, False)
