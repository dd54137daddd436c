"""Evacuating a fenced hypervisor that the last plan no longer knows: without the fenced mark the
name is refused as unknown (a typo must not read as a complete evacuation of nothing); with it,
the evacuation finds nothing on it and changes nothing, so a recovery run twice stays quiet."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover.task import (
    run_failover_reservation)
from ansible_collections.resilient.virt.plugins.module_utils._migration.maintenance import FENCED, mark
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
    resolve_settings)
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils._task_context import TaskContext
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec

PARAMS = {"state": "evacuated", "creator": "unit", "requirements": None, "max_vms_to_process": 0,
          "revalidation_interval": "30m", "limit_one_new_per_hypervisor": True,
          "all_providers": False, "hypervisors": None, "vms": None, "failed_hosts": ["h1"],
          "priorities": None, "execute": True, "allow_partial": False, "max_changes": 500,
          "vm_status": "short", "provider": None}


def _evacuate(store):
    ctx = TaskContext(open_store=lambda: store, open_provider=None,
                      provider_config=lambda *a, **k: {}, provider_references=lambda: [],
                      read_settings=lambda: resolve_settings({}, environ={}), environ={},
                      warnings=[])
    return run_failover_reservation(dict(PARAMS), ctx)


def test_a_fenced_hypervisor_the_plan_forgot_is_evacuated_without_change():
    with pytest.raises(InvalidSpec) as info:
        _evacuate(MemoryStore("unmarked"))
    assert "'h1' is not a hypervisor of this fleet" in str(info.value)
    store = MemoryStore("fenced")
    mark(store, "libvirt:h1", "h1", True, kind=FENCED)
    result = _evacuate(store)
    assert result["changed"] is False
    assert result["evacuation"]["affected"] == 0 and result["evacuation"]["complete"] is True
