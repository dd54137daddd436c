"""Where a task runs (module_path_reason) and a module run inside this process (run_module)."""
import pytest

from ansible_collections.resilient.virt.plugins.plugin_utils import _in_process as ip

from provider_testing import TEST_URI

ALL = dict((name, True) for name in ("pluggy", "tenacity", "jsonschema", "libvirt", "pyVmomi",
                                     "requests", "redis"))
LIBVIRT = {"type": "libvirt", "uri": TEST_URI, "name": "t"}


def reason(args=None, local=True, become=False, async_val=0, option=None, task_env=None,
           environ=None, available=None, module="vm_info"):
    return ip.module_path_reason(module, local, become, async_val, option, task_env or {},
                                 environ or {}, args or {"provider": LIBVIRT},
                                 ALL if available is None else available)


def test_a_local_task_runs_in_the_worker():
    assert reason() is None
    assert reason(task_env={"RESILIENT_VIRT_STATE_STORE": "sqlite:///tmp/x.db"}) is None


@pytest.mark.parametrize("kwargs, why", [
    (dict(option=False), "in_process is false"),
    (dict(environ={ip.ENV_VAR: "false"}), "in_process is false"),
    (dict(environ={ip.ENV_VAR: "maybe"}), "is not true or false"),
    (dict(local=False), "another host"),
    (dict(become=True), "become"),
    (dict(async_val=30), "async"),
    (dict(task_env={"HTTPS_PROXY": "http://proxy:3128"}), "HTTPS_PROXY"),
    (dict(module="nonexistent"), "cannot be imported"),
    (dict(available=dict(ALL, libvirt=False)), "cannot import libvirt"),
    (dict(args={"providers": {"vc": {"type": "vsphere"}}}, available=dict(ALL, pyVmomi=False)),
     "cannot import pyVmomi"),
    (dict(args={"provider": LIBVIRT, "state_store": "redis://h:1/0"}, available=dict(ALL, redis=False)),
     "cannot import redis"),
    (dict(environ={"RESILIENT_VIRT_STATE_STORE": "rediss://h:1/0"}, available=dict(ALL, redis=False)),
     "cannot import redis"),
    (dict(args={"vms": [{"name": "a", "provider": {"type": "nobody-declares-this"}}]}),
     "nobody-declares-this"),
])
def test_a_module_process_runs_the_task_when(kwargs, why):
    found = reason(**kwargs)
    assert found is not None and why in found, found


def test_option_true_wins_over_the_environment_variable():
    assert reason(option=True, environ={ip.ENV_VAR: "false"}) is None


def test_needed_libraries_follow_the_providers_named():
    needed, unknown = ip.needed_libraries({"providers": {"a": {"type": "libvirt"}, "b": "junk"},
                                           "provider": {"type": "vsphere"}}, {})
    assert needed == {"pluggy", "tenacity", "jsonschema", "libvirt", "pyVmomi", "requests"} and not unknown


def test_run_module_returns_the_result_the_module_would_print(tmp_path):
    args = {"provider": LIBVIRT, "state_store": "sqlite://%s/state.db" % tmp_path,
            "_ansible_check_mode": False, "_ansible_diff": False, "_ansible_verbosity": 0}
    result = ip.run_module("vm_info", args, {})
    assert result["changed"] is False and [vm["name"] for vm in result["vms"]] == ["test"]
    assert result["invocation"]["module_args"]["provider"]["uri"] == TEST_URI


def test_run_module_masks_secrets_and_types_failures(tmp_path):
    args = {"provider": dict(LIBVIRT, api_token="hunter2-secret"), "state_store": "sqlite://%s/s.db" % tmp_path}
    result = ip.run_module("vm_info", args, {})
    assert result["failed"] and result["error"]["type"] == "InvalidSpec"
    assert "provider.api_token is not an option" in result["msg"]
    assert "hunter2-secret" not in repr(result)
    assert result["invocation"]["module_args"]["provider"]["api_token"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"


def test_the_task_environment_reaches_the_module_not_os_environ(tmp_path, monkeypatch):
    monkeypatch.delenv("RESILIENT_VIRT_STATE_STORE", raising=False)
    store = tmp_path / "from-env.db"
    result = ip.run_module("circuit_breaker", {}, {"RESILIENT_VIRT_STATE_STORE": "sqlite://%s" % store})
    assert not result.get("failed"), result
    assert store.exists()


def test_long_argument_lists_are_summed_up_in_the_invocation():
    from ansible_collections.resilient.virt.plugins.module_utils._module_base import ECHO_LIMIT, echo

    params = {"vms": [{"uuid": str(i)} for i in range(ECHO_LIMIT + 1)], "small": [1, 2], "x": "y"}
    assert echo(params) == {"vms": "(%d items, not echoed)" % (ECHO_LIMIT + 1), "small": [1, 2], "x": "y"}


def test_the_preloaded_code_is_frozen_out_of_the_garbage_collector_for_the_workers():
    """What load() brought in survives every worker forked after it, untraversed by the GC."""
    import gc

    assert ip.AVAILABLE and ip.CLASSES  # the controller preloaded the collection
    assert gc.get_freeze_count() > 10000
    assert set(ip.CLASSES) == set(ip.MODULES)


def test_the_workers_inherit_a_plugin_manager_per_built_in_type():
    """load() read the hookspecs and registered each built-in backend before any fork."""
    from ansible_collections.resilient.virt.plugins.module_utils.providers import _registry

    for kind in _registry.BUILTIN_BACKENDS:
        manager = _registry._SHARED[("", kind)]
        assert set(_registry._declared_types(manager)) == {kind}
