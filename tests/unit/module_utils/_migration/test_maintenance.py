"""The marks of hypervisors in maintenance in a state store (a real SQLite file), and what they
refuse: a VM created on the provider that is that one host, or on the host named."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._migration import maintenance
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict


@pytest.fixture
def store(tmp_path):
    opened = open_store("sqlite://%s" % (tmp_path / "s.db"))
    yield opened
    opened.close()


def test_a_mark_is_made_once_and_ended_once(store):
    assert maintenance.mark(store, "libvirt:hv1", "hv1", True) is True
    assert maintenance.mark(store, "libvirt:hv1", "hv1", True) is False
    marks = maintenance.read_marks(store)
    assert maintenance.is_marked(marks, "libvirt:hv1", "hv1")
    assert not maintenance.is_marked(marks, "libvirt:hv2", "hv1")
    hvs = maintenance.with_marks([{"name": "hv1", "state": "up"}], "libvirt:hv1", marks)
    assert hvs == [{"name": "hv1", "state": "maintenance"}]
    assert maintenance.unmark(store, "libvirt:hv1", "hv1") is True
    assert maintenance.unmark(store, "libvirt:hv1", "hv1") is False
    assert maintenance.read_marks(store) == {}


def test_placing_a_vm_is_refused_on_a_marked_hypervisor_only(store):
    maintenance.mark(store, "libvirt:hv1", "hv1", True)
    maintenance.mark(store, "vsphere:vc", "H2", False)
    warnings = []
    with pytest.raises(Conflict, match="hypervisor hv1 of libvirt:hv1 is in maintenance"):
        maintenance.refuse_placement(lambda: store, "libvirt:hv1", {}, warnings)
    with pytest.raises(Conflict, match="choose another host"):
        maintenance.refuse_placement(lambda: store, "vsphere:vc", {"placement": {"host": "H2"}},
                                     warnings)
    maintenance.refuse_placement(lambda: store, "vsphere:vc", {"placement": {"host": "H1"}},
                                 warnings)
    maintenance.refuse_placement(lambda: store, "vsphere:vc", {}, warnings)
    maintenance.refuse_placement(lambda: store, "libvirt:hv2", {}, warnings)
    assert warnings == []
