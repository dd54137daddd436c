"""The vm_migrate task on libvirt's in-process test driver: its options checked all at once,
the VM found already on its target, and a target that has a VM of that name refused before
anything moves (the driver cannot migrate, and its VMs are on every provider of one process:
moves, check mode's plan and the prechecks on real hosts are the lab's,
tests/integration/test_vm_migrate.py)."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._migration.task import (
    check_params, planned_mode, run_vm_migrate)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
    resolve_settings)
from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore
from ansible_collections.resilient.virt.plugins.module_utils._task_context import TaskContext
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
    open_provider)

PARAMS = {"vm": "test", "target": "other", "live": True, "resource_pool": None,
          "datastore": None, "allow_zone_change": False, "timeout": None, "bandwidth_mib": None}


@pytest.fixture
def run():
    store, settings, opened = MemoryStore("unit"), resolve_settings({}, environ={}), []

    def open_one(reference=None, field="provider"):
        name = "unit" if reference is None else reference
        opened.append(open_provider({"type": "libvirt", "name": name, "uri": "test:///default"},
                                    settings, store, environ={}))
        return opened[-1]

    def run_task(check=False, **given):
        ctx = TaskContext(open_store=lambda: store, open_provider=open_one,
                          provider_config=lambda *a, **k: {}, provider_references=lambda: [],
                          read_settings=lambda: settings, environ={}, warnings=[],
                          check_mode=check)
        return run_vm_migrate(dict(PARAMS, **given), ctx)

    yield run_task
    for provider in opened:
        provider.close()


def test_every_bad_option_is_named_at_once():
    with pytest.raises(InvalidSpec) as caught:
        check_params(dict(PARAMS, vm="", target=None, timeout="soon", bandwidth_mib=0))
    paths = sorted(e["path"] for e in caught.value.details["errors"])
    assert paths == ["bandwidth_mib", "target", "timeout", "vm"]


def test_how_a_vm_moves_depends_on_its_state():
    assert planned_mode("running", True) == "live"
    assert planned_mode("paused", False) == "paused"
    assert planned_mode("stopped", True) == "cold"


def test_a_vm_on_its_own_provider_is_there_already(run):
    result = run(target="unit")
    assert not result["changed"] and result["migration"]["mode"] == "none"


def test_a_target_with_a_vm_of_that_name_is_refused(run):
    with pytest.raises(Conflict) as caught:
        run()
    assert "libvirt:other already has a VM named 'test'" in caught.value.message


def test_vsphere_options_are_refused_for_libvirt(run):
    with pytest.raises(InvalidSpec) as caught:
        run(datastore="ds1", resource_pool="web")
    assert sorted(e["path"] for e in caught.value.details["errors"]) == [
        "datastore", "resource_pool"]
