"""A hypervisor in maintenance (marked by the hypervisor module) takes no failover reservation:
a cycle places the slot elsewhere and says why in a warning; without the mark, the same fleet's
slot goes to the hypervisor with the most room."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.task import (
    run_failover_reservation)
from ansible_collections.resilient.virt.plugins.module_utils._migration.maintenance import mark
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
    resolve_settings)
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils._task_context import TaskContext

HYPERVISORS = [{"name": "h1", "az": "a", "cpu": 8, "memory_mb": 8192},
               {"name": "h2", "az": "a", "cpu": 8, "memory_mb": 8192},
               {"name": "h3", "az": "a", "cpu": 8, "memory_mb": 4096}]
VMS = [{"uuid": "u1", "host": "h1", "az": "a", "flavor": "db", "vcpus": 1, "memory_mb": 1024}]
PARAMS = {"state": "present", "creator": "unit", "requirements": {"db": 1},
          "max_vms_to_process": 0, "revalidation_interval": "30m",
          "limit_one_new_per_hypervisor": True, "all_providers": False,
          "hypervisors": HYPERVISORS, "vms": VMS, "failed_hosts": None, "execute": True,
          "allow_partial": False, "max_changes": 500, "vm_status": "short", "provider": None}


def _cycle(store):
    warnings = []
    ctx = TaskContext(open_store=lambda: store, open_provider=None,
                      provider_config=lambda *a, **k: {}, provider_references=lambda: [],
                      read_settings=lambda: resolve_settings({}, environ={}), environ={},
                      warnings=warnings)
    result = run_failover_reservation(dict(PARAMS), ctx)
    return sorted(res["host"] for res in result["reservations"]), warnings


def test_a_hypervisor_in_maintenance_takes_no_reservation():
    assert _cycle(MemoryStore("free")) == (["h2"], [])
    store = MemoryStore("marked")
    mark(store, "libvirt:h2", "h2", True)
    hosts, warnings = _cycle(store)
    assert hosts == ["h3"]
    assert warnings == ["hypervisor h2 is in maintenance: it takes no failover reservation, "
                        "and one there is dropped when it is next revalidated"]
