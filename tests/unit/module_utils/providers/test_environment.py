"""Provider settings from the task's environment (what AWX credentials inject).

The expected values are written out here from the variables' documented meaning (the names AWX's
VMware vCenter credential and libvirt use), not taken from the code under test.
"""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils import _required_libraries as libraries
from ansible_collections.resilient.virt.plugins.module_utils._masking import (
    environment_secrets, is_secret_variable)
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers._environment import (
    environment_catalog, environment_provider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
    LibvirtProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import provider_key
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import (
    VSphereProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import Option, Provider

AWX_VMWARE = {"VMWARE_HOST": "vc.example.com", "VMWARE_USER": "awx@vsphere.local",
              "VMWARE_PASSWORD": "Env-S3cret-pw", "VMWARE_PORT": "8443",
              "VMWARE_VALIDATE_CERTS": "False"}


def _invalid(make):
    with pytest.raises(InvalidSpec) as info:
        make()
    return info.value


def test_unset_keys_come_from_the_awx_vmware_variables():
    provider = VSphereProvider({"type": "vsphere"}, AWX_VMWARE)
    expected = {"host": "vc.example.com", "username": "awx@vsphere.local",
                "password": "Env-S3cret-pw", "port": 8443, "validate_certs": False}
    assert dict((key, provider.config[key]) for key in expected) == expected
    assert provider.option_path("port") == "VMWARE_PORT"
    assert provider.option_path("datacenter") == "provider.datacenter"
    assert provider.safe_config()["password"] == "********"
    assert provider.scrub("login failed for Env-S3cret-pw") == "login failed for ********"
    # the warning about certificates names where false came from
    assert any(w.startswith("VMWARE_VALIDATE_CERTS is false") for w in provider.warnings)


def test_given_keys_win_and_empty_variables_count_as_unset():
    provider = VSphereProvider({"type": "vsphere", "host": "other.example.com", "port": None},
                               dict(AWX_VMWARE, VMWARE_PORT="", VMWARE_VALIDATE_CERTS=""))
    assert provider.config["host"] == "other.example.com"
    assert provider.config["port"] == 443 and provider.config["validate_certs"] is True
    assert provider.option_path("host") == "provider.host"


def test_without_an_environment_no_variable_is_read(monkeypatch):
    for name, value in AWX_VMWARE.items():
        monkeypatch.setenv(name, value)
    err = _invalid(lambda: VSphereProvider({"type": "vsphere"}))
    assert "provider.host is required by the vsphere provider; give it, or set the environment " \
           "variable VMWARE_HOST" in err.message


def test_errors_about_environment_values_name_the_variable_and_hide_secrets():
    err = _invalid(lambda: VSphereProvider({"type": "vsphere"}, dict(AWX_VMWARE, VMWARE_PORT="https")))
    assert [e["path"] for e in err.details["errors"]] == ["VMWARE_PORT"]
    assert "VMWARE_PORT='https' (from the environment): must be a whole number" in err.message
    err = _invalid(lambda: VSphereProvider({"type": "vsphere"}, dict(AWX_VMWARE, VMWARE_PORT="70000")))
    assert err.details["errors"][0]["path"] == "VMWARE_PORT" and "not a TCP port" in err.message
    err = _invalid(lambda: VSphereProvider({"type": "vsphere"},
                                           dict(AWX_VMWARE, VMWARE_HOST="https://vc.example.com/sdk")))
    assert err.details["errors"][0]["path"] == "VMWARE_HOST"
    err = _invalid(lambda: LibvirtProvider({"type": "libvirt"}, {"LIBVIRT_DEFAULT_URI": "kvm1"}))
    assert err.details["errors"][0]["path"] == "LIBVIRT_DEFAULT_URI"
    # a secret option of the wrong kind: the variable is named, its value never shown
    err = _invalid(lambda: _Pin({"type": "pin"}, {"PIN_PASSWORD": "not-a-number-S3cret"}))
    assert err.details["errors"][0]["path"] == "PIN_PASSWORD"
    assert "not-a-number-S3cret" not in str(err.to_dict())


class _Pin(Provider):
    type_name = "pin"
    options = dict(Provider.options, password=Option("int", secret=True, env="PIN_PASSWORD"))


def test_libvirt_uri_from_libvirt_default_uri_and_the_key_follows_it():
    environ = {"LIBVIRT_DEFAULT_URI": "test:///default"}
    assert LibvirtProvider({"type": "libvirt"}, environ).config["uri"] == "test:///default"
    assert LibvirtProvider({"type": "libvirt"}, {}).config["uri"] == "qemu:///system"
    assert provider_key({"type": "libvirt"}, environ=environ) == "libvirt:test:///default"


def test_a_secret_option_needs_a_secret_variable_name():
    with pytest.raises(TypeError, match="VCENTER_PASS"):
        type("Leaky", (Provider,), {"options": dict(
            Provider.options, password=Option(secret=True, env="VCENTER_PASS"))})


@pytest.mark.parametrize("environ, expected", [
    ({}, None),
    ({"VMWARE_HOST": "vc"}, {"type": "vsphere"}),
    ({"LIBVIRT_DEFAULT_URI": "qemu:///system"}, {"type": "libvirt"}),
    ({"VMWARE_HOST": "", "LIBVIRT_DEFAULT_URI": "qemu:///system"}, {"type": "libvirt"}),
])
def test_the_environment_names_at_most_one_provider(environ, expected):
    assert environment_provider(environ) == expected


def test_two_providers_in_the_environment_are_refused_naming_the_field():
    err = _invalid(lambda: environment_provider({"VMWARE_HOST": "vc", "LIBVIRT_DEFAULT_URI": "test:///default"}))
    assert err.details["errors"][0]["path"] == "provider"
    assert "VMWARE_HOST" in err.message and "LIBVIRT_DEFAULT_URI" in err.message
    assert "give provider with the type to use (type: libvirt or type: vsphere)" in err.message


def test_an_inventory_source_without_providers_takes_the_one_the_environment_names():
    assert environment_catalog({"VMWARE_HOST": "vc"}) == {"vsphere": {"type": "vsphere"}}
    for environ in ({}, {"VMWARE_HOST": "vc", "LIBVIRT_DEFAULT_URI": "test:///default"}):
        err = _invalid(lambda environ=environ: environment_catalog(environ))
        assert err.details["errors"][0]["path"] == "providers"


def test_libraries_of_a_provider_from_the_environment():
    assert {"pyVmomi", "requests"} <= libraries.needed({}, {"VMWARE_HOST": "vc"})
    assert "pyVmomi" not in libraries.needed({"provider": {"type": "libvirt"}}, {"VMWARE_HOST": "vc"})


@pytest.mark.parametrize("name", ["VMWARE_PASSWORD", "OS_PASSWORD", "GITHUB_TOKEN", "AZURE_SECRET",
                                  "LIBVIRT_SSH_KEY_PASSPHRASE", "CONTROLLER_PASSWORD"])
def test_secret_variable_names(name):
    assert is_secret_variable(name)


@pytest.mark.parametrize("name", ["PWD", "OLDPWD", "ANSIBLE_BECOME_ASK_PASS", "VMWARE_USER",
                                  "PASSWORD_STORE_DIR", "SSH_ASKPASS"])
def test_ordinary_variable_names(name):
    assert not is_secret_variable(name)


def test_environment_secrets_are_the_secret_variables_and_url_passwords():
    environ = dict(AWX_VMWARE, PWD="/work/main", ANSIBLE_BECOME_ASK_PASS="False",
                   https_proxy="http://proxy-user:Pr0xy-pw@proxy:3128", SHORT_TOKEN="abc")
    assert environment_secrets(environ) == ["Env-S3cret-pw", "Pr0xy-pw"]
