# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of modules that talk to a hypervisor provider."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  provider:
    description:
      - The provider to talk to, either a dict or the name of an entry of O(providers).
      - The dict names the backend C(type) (C(libvirt), C(vsphere), or a type a third-party
        package registers) and its connection settings.
      - "libvirt: C(uri) (for example C(qemu:///system), C(qemu+ssh://root@kvm1/system),
        C(qemu+unix:///system?socket=/path/libvirt-sock)), C(name), C(az), C(traits),
        C(storage_pool), C(domain_type) (C(kvm) or C(qemu); unset, kvm where the hypervisor offers
        it, else qemu with a warning)."
      - "vsphere: C(host), C(port), C(username), C(password), C(validate_certs) (default true),
        C(datacenter)."
      - Keys whose name contains C(pass), C(pwd), C(secret), C(token), C(api_key),
        C(private_key) or C(credential), and passwords inside URLs (C(qemu+ssh://user:PASSWORD@host/system)),
        are secrets - masked in results, C(-vvv) output and errors on every path (even when
        Ansible rejects the arguments), and never written to the state store. Values shorter than
        4 characters are not masked (Ansible masks by substring).
      - When omitted and O(providers) holds exactly one entry, that entry is used.
    type: raw
  providers:
    description:
      - Named provider dicts, so a play can set them once with C(module_defaults) and tasks refer
        to one by name in O(provider). Every entry must be a dict; the secrets of every entry are
        masked, whichever provider the task uses.
    type: dict
"""
