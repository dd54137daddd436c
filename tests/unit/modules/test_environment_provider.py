"""A task that names no provider uses the one its environment names (AWX credentials inject it).

Runs the module as a module process would (``main()`` reads this process's environment); the
libvirt provider is libvirt's in-process test driver, whose one domain is called ``test``.
"""
import pytest

from ansible_collections.resilient.virt.plugins.modules import vm_info

from tests.unit.modules.test_fuzz import run_module

SECRET = "Env-S3cret-pw"


@pytest.fixture
def environ(monkeypatch):
    for name in ("VMWARE_HOST", "VMWARE_USER", "VMWARE_PASSWORD", "VMWARE_PORT",
                 "VMWARE_VALIDATE_CERTS", "LIBVIRT_DEFAULT_URI"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _vm_info(tmp_path, **args):
    return run_module(vm_info.VmInfoModule, dict(args, state_store="sqlite://%s" % (tmp_path / "s.db")))


def test_the_provider_comes_from_libvirt_default_uri(tmp_path, environ):
    environ.setenv("LIBVIRT_DEFAULT_URI", "test:///default")
    result, printed = _vm_info(tmp_path, name="test")
    assert not result.get("failed"), printed
    assert [(vm["name"], vm["provider_key"]) for vm in result["vms"]] == [("test", "libvirt:test:///default")]


def test_two_providers_in_the_environment_fail_naming_provider(tmp_path, environ):
    environ.setenv("LIBVIRT_DEFAULT_URI", "test:///default")
    environ.setenv("VMWARE_HOST", "vc.example.com")
    result, printed = _vm_info(tmp_path)
    assert result["failed"] and result["error"]["type"] == "InvalidSpec", printed
    assert [e["path"] for e in result["error"]["details"]["errors"]] == ["provider"]
    assert "VMWARE_HOST" in result["msg"] and "LIBVIRT_DEFAULT_URI" in result["msg"]
    assert "Traceback" not in printed


def test_no_provider_anywhere_still_asks_for_one(tmp_path, environ):
    result, printed = _vm_info(tmp_path)
    assert result["failed"] and "provider: is required" in result["msg"], printed


def test_a_secret_of_the_environment_is_masked_wherever_it_appears(tmp_path, environ):
    environ.setenv("LIBVIRT_DEFAULT_URI", "test:///default")
    environ.setenv("VMWARE_PASSWORD", SECRET)
    # the secret appears in an ordinary argument, which the result echoes back
    result, printed = _vm_info(tmp_path, name=SECRET)
    assert not result.get("failed"), printed
    assert SECRET not in printed
    assert result["invocation"]["module_args"]["name"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"  # Ansible's mask


def test_an_environment_value_of_the_wrong_kind_names_the_variable(tmp_path, environ):
    environ.setenv("VMWARE_HOST", "vc.example.com")
    environ.setenv("VMWARE_USER", "awx")
    environ.setenv("VMWARE_PASSWORD", SECRET)
    environ.setenv("VMWARE_PORT", "sdk")
    result, printed = _vm_info(tmp_path)
    assert result["failed"] and result["error"]["type"] == "InvalidSpec", printed
    assert [e["path"] for e in result["error"]["details"]["errors"]] == ["VMWARE_PORT"]
    assert SECRET not in printed and "Traceback" not in printed
