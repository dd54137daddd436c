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


def test_every_domain_the_spec_builds_validates_against_libvirts_schema():
    """The create path skips libvirt's schema check when no XML of the user's is given: what
    the spec builds, with every field it knows, must validate."""
    from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import (
        build_domain_xml, validate_spec)

    specs = [
        {"name": 'a&b<c>"', "vcpus": 1, "memory_mb": 64},
        {"name": "full", "vcpus": 2, "memory_mb": 128, "boot": ["network", "hd"],
         "disks": [{"path": "/var/lib/x.qcow2"}, {"path": "/isos/i.iso", "device": "cdrom"},
                   {"path": "/var/lib/y.raw", "bus": "scsi", "format": "raw"}],
         "interfaces": [{"network": "default", "mac": "52:54:00:12:34:56"},
                        {"bridge": "br0", "model": "e1000"}],
         "metadata": {"owner": "team", "n": 1}, "tags": ["web", "db"],
         "libvirt": {"cpu_mode": "host-model", "graphics": "spice"}},
        {"name": "bare", "vcpus": 1, "memory_mb": 64,
         "libvirt": {"console": False, "guest_agent": False, "graphics": "vnc",
                     "cpu_mode": "maximum"}},
    ]
    conn = libvirt.open(TEST_URI)
    try:
        for spec in specs:
            for domain_type, cpu_mode in (("test", None), ("test", "host-model"), ("test", "maximum")):
                xml = build_domain_xml(validate_spec(spec), domain_type, None, None, cpu_mode)
                dom = conn.defineXMLFlags(xml, libvirt.VIR_DOMAIN_DEFINE_VALIDATE)
                dom.undefine()
    finally:
        conn.close()
