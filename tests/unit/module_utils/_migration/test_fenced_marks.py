"""A fenced mark in a state store (a real SQLite file): a kind of its own next to maintenance,
honoured where maintenance is (placement, failover reservations), ended by state=active; and the
options of state=fenced, refused with their field before anything is opened."""
import calendar

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover.task import (
    run_failover_reservation)
from ansible_collections.resilient.virt.plugins.module_utils._migration import maintenance
from ansible_collections.resilient.virt.plugins.module_utils._migration.fence_step import (
    fenced_params)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
    resolve_settings)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils._task_context import TaskContext
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, InvalidSpec

FENCE = {"agent": "redfish", "action": "ForceOff", "evidence": "PowerState Off",
         "at": "2026-11-29T13:00:00Z"}
HYPERVISORS = [{"name": "h1", "az": "a", "cpu": 8, "memory_mb": 8192},
               {"name": "h2", "az": "a", "cpu": 8, "memory_mb": 8192},
               {"name": "h3", "az": "a", "cpu": 8, "memory_mb": 4096}]
VMS = [{"uuid": "u1", "host": "h1", "az": "a", "flavor": "db", "vcpus": 1, "memory_mb": 1024}]
PARAMS = {"state": "present", "creator": "unit", "requirements": {"db": 1},
          "max_vms_to_process": 0, "revalidation_interval": "30m",
          "limit_one_new_per_hypervisor": True, "all_providers": False,
          "hypervisors": HYPERVISORS, "vms": VMS, "failed_hosts": None, "execute": True,
          "allow_partial": False, "max_changes": 500, "vm_status": "short", "provider": None}


@pytest.fixture
def store(tmp_path):
    opened = open_store("sqlite://%s" % (tmp_path / "s.db"))
    yield opened
    opened.close()


def test_a_fenced_mark_is_its_own_kind_and_state_active_ends_it(store):
    assert maintenance.mark(store, "libvirt:hv1", "hv1", True, kind=maintenance.FENCED,
                            details={"fence": FENCE}) is True
    assert maintenance.mark(store, "libvirt:hv1", "hv1", True, kind=maintenance.FENCED) is False
    assert store.items(maintenance.NAMESPACE) == {}  # not a maintenance mark
    marks = maintenance.read_marks(store)
    assert maintenance.is_marked(marks, "libvirt:hv1", "hv1")
    found = maintenance.fenced_mark(marks, "libvirt:hv1", "hv1")
    assert found["fence"] == FENCE and found["kind"] == "fenced" and found["since"].endswith("Z")
    assert maintenance.fenced_mark(marks, "libvirt:hv2", "hv1") is None
    assert maintenance.with_marks([{"name": "hv1", "state": "up"}], "libvirt:hv1", marks) == [
        {"name": "hv1", "state": "maintenance"}]
    with pytest.raises(Conflict, match="hypervisor hv1 of libvirt:hv1 is fenced"):
        maintenance.refuse_placement(lambda: store, "libvirt:hv1", {}, [])
    maintenance.mark(store, "libvirt:hv1", "hv1", True)  # in maintenance as well
    assert maintenance.unmark(store, "libvirt:hv1", "hv1") is True
    assert maintenance.read_marks(store) == {}
    assert maintenance.unmark(store, "libvirt:hv1", "hv1") is False


def _reserved_on(store):
    ctx = TaskContext(open_store=lambda: store, open_provider=None,
                      provider_config=lambda *a, **k: {}, provider_references=lambda: [],
                      read_settings=lambda: resolve_settings({}, environ={}), environ={},
                      warnings=[])
    return sorted(res["host"] for res in run_failover_reservation(dict(PARAMS), ctx)["reservations"])


def test_a_fenced_hypervisor_takes_no_failover_reservation(tmp_path):
    free = open_store("sqlite://%s" % (tmp_path / "free.db"))
    fenced = open_store("sqlite://%s" % (tmp_path / "fenced.db"))
    try:
        assert _reserved_on(free) == ["h2"]
        maintenance.mark(fenced, "libvirt:h2", "h2", True, kind=maintenance.FENCED,
                         details={"fence": FENCE})
        assert _reserved_on(fenced) == ["h3"]
    finally:
        free.close()
        fenced.close()


def _problems(**params):
    base = {"fencing": {"type": "redfish"}, "grace": 30, "confirm_interval": 5,
            "fence_timeout": 60, "unreachable_since": None, "name": None}
    base.update(params)
    with pytest.raises(InvalidSpec) as caught:
        fenced_params(base)
    return dict((e["path"], e["message"]) for e in caught.value.details["errors"])


def test_the_options_of_state_fenced_are_named_with_their_fix():
    missing = _problems(fencing=None)
    assert list(missing) == ["fencing"]
    assert "give fencing, such as {type: redfish" in missing["fencing"]
    assert "never recovered automatically" in missing["fencing"]
    assert list(_problems(fencing={"address": "https://bmc"})) == ["fencing.type"]
    found = _problems(grace=-1, confirm_interval="often", fence_timeout=0,
                      unreachable_since="yesterday")
    assert sorted(found) == ["confirm_interval", "fence_timeout", "grace", "unreachable_since"]
    assert "RFC 3339" in found["unreachable_since"]
    checked = fenced_params({"fencing": {"type": "redfish"}, "grace": 0, "confirm_interval": "2s",
                             "fence_timeout": "1m", "unreachable_since": "2026-11-29T13:00:00Z"})
    assert (checked["grace"], checked["confirm_interval"], checked["fence_timeout"]) == (0.0, 2.0, 60.0)
    assert checked["unreachable_since"] == calendar.timegm((2026, 11, 29, 13, 0, 0))
