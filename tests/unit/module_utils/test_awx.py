"""AWX jobs and execution environments are told when their state store dies with the job.

The environments below are written from what AWX (awx/main/tasks/jobs.py: AWX_HOST, JOB_ID,
AD_HOC_COMMAND_ID) and ansible-runner (config/_base.py: AWX_ISOLATED_DATA_DIR under
/runner/artifacts/ in a container, the local artifact directory otherwise) set.
"""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._awx import job_platform, store_warning
from ansible_collections.resilient.virt.plugins.modules import vm_info

from tests.unit.modules.test_fuzz import run_module

AWX_JOB = {"AWX_HOST": "https://awx.example.com", "JOB_ID": "42", "INVENTORY_ID": "3"}
RUNNER_IN_CONTAINER = {"AWX_ISOLATED_DATA_DIR": "/runner/artifacts/7f1c"}


@pytest.mark.parametrize("environ, sign", [
    (AWX_JOB, "AWX_HOST and JOB_ID"),
    ({"AWX_HOST": "https://awx.example.com", "AD_HOC_COMMAND_ID": "9"}, "AWX_HOST and AD_HOC_COMMAND_ID"),
    (RUNNER_IN_CONTAINER, "AWX_ISOLATED_DATA_DIR"),
    ({"LAUNCHED_BY_RUNNER": "1"}, "LAUNCHED_BY_RUNNER=1"),
])
def test_awx_jobs_and_execution_environments_are_recognised(environ, sign):
    assert sign in job_platform(environ)


@pytest.mark.parametrize("environ", [
    {}, {"AWX_HOST": "https://awx.example.com"}, {"JOB_ID": "42"},
    {"AWX_ISOLATED_DATA_DIR": "/home/me/project/artifacts/7f1c"},  # ansible-runner, no container
])
def test_other_runs_are_not(environ):
    assert job_platform(environ) is None


def test_the_warning_names_the_fix_and_only_comes_without_a_store():
    warning = store_warning(None, AWX_JOB)
    for words in ("thrown away after every job", "circuit breakers", "Redis",
                  "extensions/awx/credential_types/state_store.yml", "RESILIENT_VIRT_STATE_STORE"):
        assert words in warning
    assert store_warning("redis://cache:6379/0", AWX_JOB) is None
    assert store_warning(None, dict(AWX_JOB, RESILIENT_VIRT_STATE_STORE="redis://cache:6379/0")) is None
    assert store_warning(None, {}) is None


@pytest.fixture
def awx_job(monkeypatch, tmp_path):
    for name in ("RESILIENT_VIRT_STATE_STORE", "VMWARE_HOST", "AWX_ISOLATED_DATA_DIR", "LAUNCHED_BY_RUNNER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # the default SQLite store goes under ~/.ansible
    monkeypatch.setenv("LIBVIRT_DEFAULT_URI", "test:///default")
    for name, value in AWX_JOB.items():
        monkeypatch.setenv(name, value)


def _store_warnings(result):
    """The module's warnings about the store (ansible-core 2.19 gives each as a summary dict)."""
    texts = [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings", [])]
    return [text for text in texts if "thrown away" in text]


def test_a_task_of_an_awx_job_without_a_store_warns_once(awx_job):
    result, printed = run_module(vm_info.VmInfoModule, {"name": "test"})
    assert not result.get("failed"), printed
    assert _store_warnings(result) == [store_warning(None, AWX_JOB)], printed


def test_a_task_with_a_store_does_not_warn(awx_job, tmp_path):
    result, printed = run_module(vm_info.VmInfoModule, {"name": "test",
                                                        "state_store": "sqlite://%s" % (tmp_path / "s.db")})
    assert not result.get("failed"), printed
    assert not _store_warnings(result)
