"""Choosing a new domain's type and CPU mode from what a hypervisor's capabilities offer."""
import libvirt
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import platform

from provider_testing import TEST_URI


def _capabilities(arch, guests):
    """Capabilities XML of a host of ``arch`` with hvm guests {arch: [domain types]}."""
    parts = ["<capabilities><host><cpu><arch>%s</arch></cpu></host>" % arch]
    for guest_arch, types in guests.items():
        parts.append("<guest><os_type>hvm</os_type><arch name='%s'>%s</arch></guest>" % (
            guest_arch, "".join("<domain type='%s'/>" % t for t in types)))
    parts.append("<guest><os_type>xen</os_type><arch name='%s'><domain type='xen'/></arch></guest>"
                 % arch)
    return "".join(parts) + "</capabilities>"


KVM_HOST = _capabilities("x86_64", {"i686": ["qemu"], "x86_64": ["qemu", "kvm"]})
TCG_HOST = _capabilities("x86_64", {"x86_64": ["qemu"], "aarch64": ["qemu", "kvm"]})


def test_kvm_is_taken_where_offered_and_emulation_only_with_a_warning():
    assert platform.choose_domain_type(KVM_HOST, None, "libvirt:a") == ("kvm", None)
    kind, warning = platform.choose_domain_type(TCG_HOST, None, "libvirt:b")
    assert kind == "qemu" and "libvirt:b offers no KVM" in warning
    assert "provider.domain_type: qemu" in warning
    assert platform.choose_domain_type(TCG_HOST, "qemu", "libvirt:b") == ("qemu", None)
    assert platform.choose_domain_type(KVM_HOST, "qemu", "libvirt:a") == ("qemu", None)


def test_a_type_the_hypervisor_does_not_offer_is_refused_by_its_field():
    with pytest.raises(InvalidSpec) as info:
        platform.choose_domain_type(TCG_HOST, "kvm", "libvirt:b")
    assert info.value.details["errors"][0]["path"] == "provider.domain_type"
    assert "kvm is not offered by libvirt:b for x86_64 guests (it offers: qemu)" in info.value.message


def test_libvirts_test_driver_offers_its_own_type():
    conn = libvirt.open(TEST_URI)
    try:
        capabilities = conn.getCapabilities()
    finally:
        conn.close()
    assert platform.domain_types(capabilities)[1] == ["test"]
    assert platform.choose_domain_type(capabilities, None, "libvirt:t") == ("test", None)


def test_cpu_mode_host_model_where_supported_and_unsupported_modes_refused():
    domcaps = ("<domainCapabilities><cpu><mode name='host-passthrough' supported='no'/>"
               "<mode name='maximum' supported='yes'/><mode name='host-model' supported='yes'/>"
               "</cpu></domainCapabilities>")
    supported = platform.cpu_modes(domcaps)
    assert supported == ["maximum", "host-model"]
    assert platform.choose_cpu_mode(supported, None, "h") == "host-model"
    assert platform.choose_cpu_mode(["maximum"], None, "h") is None
    assert platform.choose_cpu_mode(None, None, "h") is None
    assert platform.choose_cpu_mode(supported, "default", "h") is None
    assert platform.choose_cpu_mode(None, "host-passthrough", "h") == "host-passthrough"
    with pytest.raises(InvalidSpec) as info:
        platform.choose_cpu_mode(supported, "host-passthrough", "libvirt:h")
    assert info.value.details["errors"][0]["path"] == "libvirt.cpu_mode"
    assert "supported: maximum, host-model, default" in info.value.message
