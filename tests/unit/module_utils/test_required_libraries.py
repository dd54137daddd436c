"""Which libraries a task needs, and the one failure that names every missing one."""
import sys

from ansible_collections.resilient.virt.plugins.module_utils import _required_libraries as libraries
from ansible_collections.resilient.virt.plugins.module_utils.errors import Internal, NotFound


def test_a_task_needs_the_core_its_backends_and_its_store():
    args = {"providers": {"a": {"type": "libvirt"}, "b": "junk"},
            "vms": [{"provider": {"type": "vsphere"}}, "junk"], "provider": None}
    assert libraries.needed(args, {}) == {"pluggy", "tenacity", "jsonschema", "libvirt", "pyVmomi",
                                          "requests"}
    assert libraries.needed({}, {"RESILIENT_VIRT_STATE_STORE": "rediss://h:6380/0"}) == {
        "pluggy", "tenacity", "jsonschema", "redis"}
    for url in ("redis+sentinel://s1,s2/svc", "REDISS+SENTINEL://s1/svc", "redis+cluster://n1",
                "rediss+cluster://n1"):
        assert libraries.needed({"state_store": url}, {}) == {"pluggy", "tenacity", "jsonschema", "redis"}
    assert libraries.needed({"provider": {"type": "thirdparty"}, "state_store": "sqlite:///x"},
                            {}) == {"pluggy", "tenacity", "jsonschema"}


def test_missing_lists_what_does_not_import():
    assert libraries.missing(["json", "no_such_library_here", "also_missing_here"]) == [
        "also_missing_here", "no_such_library_here"]


def test_the_error_names_every_library_with_why_and_the_pip_command():
    err = libraries.missing_error(["tenacity", "libvirt"])
    assert err.type == "MissingLibrary" and err.retryable is False
    assert err.details == {"libraries": ["libvirt-python", "tenacity"]}
    assert err.message.startswith("Failed to import the required Python library "
                                  "(libvirt-python, tenacity) on ")
    assert "%s -m pip install libvirt-python tenacity" % sys.executable in err.message
    assert "libvirt-python for libvirt providers" in err.message and "tenacity for retries" in err.message
    assert "ansible_python_interpreter" in err.message


def test_only_an_import_failure_behind_the_error_is_explained(monkeypatch):
    plain = NotFound("vm x")
    assert libraries.explain(plain, {}, {}) is plain
    behind = Internal("boom", cause=ImportError("no module named tenacity"))
    # every library this task needs imports here: nothing to explain, the error stays
    assert libraries.explain(behind, {"provider": {"type": "libvirt"}}, {}) is behind
    monkeypatch.setitem(libraries.BACKENDS, "ghost", ("no_such_backend_library",))
    behind.result = {"conditions": ["kept"]}
    found = libraries.explain(behind, {"provider": {"type": "ghost"}}, {})
    assert found.type == "MissingLibrary" and found.result == {"conditions": ["kept"]}
    assert found.details == {"libraries": ["no_such_backend_library"]}
    assert found.cause is behind


def test_cloud_init_needs_pycdlib_and_yaml_only_when_given():
    core = libraries.needed({"provider": {"type": "libvirt"}}, {})
    assert libraries.needed({"provider": {"type": "libvirt"}, "cloud_init": None}, {}) == core
    assert libraries.needed({"provider": {"type": "libvirt"}, "cloud_init": {}}, {}) == core | {
        "pycdlib", "yaml"}
    err = libraries.missing_error(["pycdlib", "yaml"])
    assert "pip install pycdlib PyYAML" in err.message and "cloud_init" in err.message
