"""What a provider accepts as a VM name, checked before any call; secrets of its settings.

The libvirt rules are those libvirt enforces or mishandles (checked on a real hypervisor: it
refuses '/', writes files named after the VM so at most 247 bytes, and removes hypervisor
directories for '.' and '..'); vSphere refuses names of more than 80 characters.
"""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    Option, Provider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._guarded import (
    GuardedProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
    LibvirtProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import (
    VSphereProvider)

from provider_testing import TEST_URI, quick_settings

VSPHERE = {"type": "vsphere", "host": "vc.example.com", "username": "u", "password": "Vc-S3cret"}


class Counting(LibvirtProvider):
    """The libvirt provider on test:///default, counting the calls that reach it."""

    calls = 0

    def _connection(self):
        Counting.calls += 1
        return super()._connection()


@pytest.fixture
def guarded(store):
    Counting.calls = 0
    provider = Counting({"type": "libvirt", "uri": TEST_URI, "name": "unit"})
    yield GuardedProvider(provider, store, quick_settings())
    provider.close()


BAD_ANYWHERE = [(".", "path component"), ("..", "path component"), ("a/b", "'/'"),
                ("", "non-empty"), ("nul\x00x", "control character"),
                ("new\nline", "control character"), ("x" * 248, "at most 247"),
                ("\u00e9" * 124, "248 bytes long"), (None, "non-empty string|is required"),
                (7, "string")]


@pytest.mark.parametrize("name, why", BAD_ANYWHERE)
@pytest.mark.parametrize("operation", ["describe", "delete", "power", "reconfigure", "create"])
def test_libvirt_refuses_bad_names_before_any_call(guarded, operation, name, why):
    call = {"describe": lambda: guarded.describe(name), "delete": lambda: guarded.delete(name),
            "power": lambda: guarded.power(name, "on"),
            "reconfigure": lambda: guarded.reconfigure(name, vcpus=1),
            "create": lambda: guarded.create({"name": name, "vcpus": 1, "memory_mb": 64})}
    with pytest.raises(InvalidSpec, match=why) as info:
        call[operation]()
    assert info.value.details["errors"][0]["path"] == "name"
    assert Counting.calls == 0, "the name reached libvirt"


@pytest.mark.parametrize("name", ["   ", " web1", "web1 "])
def test_surrounding_whitespace_is_refused_for_a_new_vm_only(guarded, name):
    with pytest.raises(InvalidSpec, match="whitespace"):
        guarded.create({"name": name, "vcpus": 1, "memory_mb": 64})
    with pytest.raises(Exception) as info:  # looking one up is fine: there is none
        guarded.describe(name)
    assert info.value.type == "NotFound"


@pytest.mark.parametrize("name", ["x" * 247, "\u00e9" * 123, "a&b<c>", "web-01.example"])
def test_libvirt_accepts_what_it_handles(guarded, name):
    vm = guarded.create({"name": name, "vcpus": 1, "memory_mb": 64})
    assert vm["name"] == name
    guarded.delete(name)


def test_vsphere_name_length():
    provider = VSphereProvider(VSPHERE)
    provider.check_name("v" * 80, creating=True)
    with pytest.raises(InvalidSpec, match="at most 80"):
        provider.check_name("v" * 81)


@pytest.mark.parametrize("host", ["admin:pw@vc.example.com", "https://vc.example.com",
                                  "vc.example.com/sdk", "vc.example.com:443", "vc example"])
def test_vsphere_host_is_a_host_only_and_never_echoed(host):
    with pytest.raises(InvalidSpec) as info:
        VSphereProvider(dict(VSPHERE, host=host))
    assert info.value.details["errors"][0]["path"] == "provider.host"
    assert host not in info.value.message


@pytest.mark.parametrize("host", ["vc.example.com", "10.0.0.1", "::1", "[fe80::1]", "vc_1"])
def test_vsphere_host_forms_accepted(host):
    assert VSphereProvider(dict(VSPHERE, host=host)).config["host"] == host


def test_scrub_removes_the_providers_secrets():
    provider = VSphereProvider(VSPHERE)
    assert provider.scrub("login with Vc-S3cret failed") == "login with ******** failed"
    libvirt = LibvirtProvider({"type": "libvirt", "uri": "qemu+tcp://bob:Lv-S3cret@h/system"})
    assert "Lv-S3cret" not in libvirt.scrub("cannot open qemu+tcp://bob:Lv-S3cret@h/system")


def test_a_backend_must_name_its_secret_options_so_they_can_be_masked():
    with pytest.raises(TypeError, match="secret option.s. session under names"):
        class Leaky(Provider):  # noqa: F841 - the class statement itself must fail
            type_name = "leaky"
            options = dict(Provider.options, session=Option(secret=True))

    class Fine(Provider):
        type_name = "fine"
        options = dict(Provider.options, api_token=Option(secret=True))

    assert Fine({"type": "fine", "api_token": "T0ken-value"}).safe_config()["api_token"] == "********"


def test_an_unknown_secret_named_option_is_never_echoed():
    with pytest.raises(InvalidSpec) as info:
        LibvirtProvider({"type": "libvirt", "uri": TEST_URI, "pasword": ["Typo-S3cret"]})
    assert "provider.pasword is not an option" in info.value.message
    assert "Typo-S3cret" not in str(info.value.to_dict())
