"""The hypervisor task's options: every problem named at once, with its field, before any
provider is opened."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._migration.task import run_hypervisor
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec


def _never(*_args, **_kwargs):
    raise AssertionError("nothing is opened for bad options")


class _Context:
    open_provider = open_store = staticmethod(_never)


def test_bad_options_are_named_together():
    params = {"parallel": 0, "name": "", "targets": "hv2", "timeout": "soon",
              "bandwidth_mib": None, "state": "maintenance"}
    with pytest.raises(InvalidSpec) as caught:
        run_hypervisor(params, _Context())
    paths = sorted(e["path"] for e in caught.value.details["errors"])
    assert paths == ["name", "parallel", "targets"]
    params.update(parallel=2, name=None, targets=None)
    with pytest.raises(InvalidSpec, match="timeout"):
        run_hypervisor(params, _Context())
