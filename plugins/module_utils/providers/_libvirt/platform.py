# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a libvirt hypervisor offers a new domain, read from its capabilities: the domain type
(KVM where it is offered; emulation only when chosen, or with a warning that says so) and the
CPU mode (host-model where the hypervisor supports it). Imported on the create path only.
"""
import xml.etree.ElementTree as ET

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    is_error)

__all__ = ("CPU_MODES", "domain_types", "choose_domain_type", "cpu_modes", "choose_cpu_mode",
           "offered")

CPU_MODES = ("host-model", "host-passthrough", "maximum", "default")  # default: no <cpu>
_PREFERRED = ("kvm", "qemu")


def domain_types(capabilities_xml):
    """(host architecture, domain types offered for hvm guests of that architecture, in the
    order the hypervisor lists them); a hypervisor with no guest of the host's architecture
    (libvirt's test driver) gives the types of its first hvm guest."""
    root = ET.fromstring(capabilities_xml)
    arch = (root.findtext("host/cpu/arch") or "").strip()
    offered = {}
    for guest in root.findall("guest"):
        if (guest.findtext("os_type") or "").strip() != "hvm":
            continue
        node = guest.find("arch")
        if node is None:
            continue
        types = [d.get("type") for d in node.findall("domain") if d.get("type")]
        offered.setdefault(node.get("name"), types)
    if arch in offered:
        return arch, offered[arch]
    return arch, next(iter(offered.values()), [])


def choose_domain_type(capabilities_xml, wanted, where):
    """(domain type, warning or None) for a new domain on the hypervisor ``where``.

    ``wanted`` (provider.domain_type) must be offered; unset, KVM is taken where offered, and
    emulation (qemu) only with a warning naming the fix.
    """
    arch, offered = domain_types(capabilities_xml)
    if wanted:
        if wanted not in offered:
            raise field_error("provider.domain_type", "%s is not offered by %s for %s guests "
                              "(it offers: %s); choose one of those" % (
                                  wanted, where, arch or "its", ", ".join(offered) or "none"))
        return wanted, None
    for kind in _PREFERRED:
        if kind in offered:
            if kind == "qemu":
                return kind, ("%s offers no KVM: new VMs run emulated (qemu, TCG), many times "
                              "slower; enable KVM on the host, or set provider.domain_type: qemu "
                              "to choose emulation (then without this warning)" % where)
            return kind, None
    if not offered:
        raise field_error("provider.domain_type", "%s offers no domain type for hvm guests; "
                          "check the hypervisor's capabilities (virsh capabilities)" % where)
    return offered[0], None


def cpu_modes(domain_capabilities_xml):
    """The CPU modes the domain capabilities say are supported."""
    root = ET.fromstring(domain_capabilities_xml)
    return [mode.get("name") for mode in root.findall("cpu/mode") if mode.get("supported") == "yes"]


def choose_cpu_mode(supported, wanted, where):
    """The CPU mode of a new domain, None for the hypervisor's default (no ``<cpu>``).

    ``supported``: the modes the hypervisor supports, None when it cannot say (an explicit
    ``wanted`` is then used as it is). Unset, host-model where supported.
    """
    if wanted == "default":
        return None
    if wanted:
        if supported is not None and wanted not in supported:
            raise field_error("libvirt.cpu_mode", "%s is not supported by %s (supported: %s)" % (
                wanted, where, ", ".join([mode for mode in supported if mode in CPU_MODES]
                                         + ["default"])))
        return wanted
    return "host-model" if supported and "host-model" in supported else None


def offered(conn, wanted, where):
    """(domain type, its warning or None, CPU modes or None) the hypervisor of ``conn`` offers a
    new domain: ``wanted`` (provider.domain_type) or the best it has (``choose_domain_type``),
    and the CPU modes of its domain capabilities (None for a driver without them)."""
    capabilities = conn.getCapabilities()
    domain_type, warning = choose_domain_type(capabilities, wanted, where)
    try:
        supported = cpu_modes(conn.getDomainCapabilities(
            None, domain_types(capabilities)[0] or None, None, domain_type, 0))
    except Exception as exc:  # noqa: BLE001 - a driver without domain capabilities
        if not is_error(exc, "NO_SUPPORT"):
            raise
        supported = None
    return domain_type, warning, supported
