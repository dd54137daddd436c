# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of modules that talk to a hypervisor provider."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  provider:
    description:
      - The provider to talk to, either a dict or the name of an entry of O(providers).
      - The dict names the backend C(type) (C(libvirt), C(vsphere), C(proxmox), or a type a
        third-party package registers) and its connection settings.
      - "libvirt: C(uri) (for example C(qemu:///system), C(qemu+ssh://root@kvm1/system),
        C(qemu+unix:///system?socket=/path/libvirt-sock)), C(name), C(az), C(traits),
        C(storage_pool), C(domain_type) (C(kvm) or C(qemu); unset, kvm where the hypervisor offers
        it, else qemu with a warning), and for SSH URIs C(ssh_key_file) (a private key file),
        C(ssh_known_hosts) (a known-hosts file that must list the host's key; a C(qemu+ssh://) URI
        is then opened with libvirt's libssh transport, which honours it) and
        C(ssh_verify_host_key) (default true; false accepts any host key, with a warning)."
      - "libvirt's SSH settings come from E(RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE),
        E(RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS) and E(RESILIENT_VIRT_LIBVIRT_SSH_VERIFY_HOST_KEY)
        when the dict leaves them unset (the collection's AWX credential type injects the first
        two as files of the job; such variables are ignored for a URI that is not SSH). See
        docs/execution-environment.md."
      - "vsphere: C(host), C(port), C(username), C(password), C(validate_certs) (default true),
        C(ca_path) (CA certificates to verify the server with instead of the system's: a PEM file,
        or a directory of them named by subject hash; for a vCenter behind a private CA),
        C(datacenter)."
      - "proxmox (Proxmox VE, a cluster whose nodes are the hypervisors): C(host) (a node),
        C(port) (default 8006), C(token_id) (C(user@realm!name)) and C(token_secret), or
        C(username) (C(root@pam)) and C(password) (the login ticket is renewed when it expires),
        C(validate_certs) (default true), C(ca_path), C(timeout), C(task_timeout), C(storage)
        (default C(local-lvm)), C(bridge) (default C(vmbr0)), C(backup_storage) (default
        C(local), where the backup module's vzdump archives go)."
      - Keys whose name contains C(pass), C(pwd), C(secret), C(token), C(api_key),
        C(private_key) or C(credential), and passwords inside URLs (C(qemu+ssh://user:PASSWORD@host/system)),
        are secrets - masked in results, C(-vvv) output and errors on every path (even when
        Ansible rejects the arguments), and never written to the state store. Values shorter than
        4 characters are not masked (Ansible masks by substring).
      - When omitted and O(providers) holds exactly one entry, that entry is used.
      - "Settings a provider dict leaves unset come from the task's environment, as AWX
        credentials inject them: vsphere C(host) from E(VMWARE_HOST), C(username) from
        E(VMWARE_USER), C(password) from E(VMWARE_PASSWORD), C(port) from E(VMWARE_PORT),
        C(validate_certs) from E(VMWARE_VALIDATE_CERTS), C(ca_path) from E(VMWARE_CA_PATH); libvirt C(uri) from
        E(LIBVIRT_DEFAULT_URI); proxmox from E(PROXMOX_HOST), E(PROXMOX_PORT), E(PROXMOX_USER),
        E(PROXMOX_PASSWORD), E(PROXMOX_TOKEN_ID), E(PROXMOX_TOKEN_SECRET),
        E(PROXMOX_VALIDATE_CERTS) and E(PROXMOX_CA_PATH). A value given in the dict wins; an empty
        variable counts as unset.
        Errors about such a value name the variable; secret ones are masked like option values."
      - When neither O(provider) nor O(providers) is given and the environment names exactly one
        provider (E(VMWARE_HOST) set - vsphere; E(LIBVIRT_DEFAULT_URI) set - libvirt;
        E(PROXMOX_HOST) set - proxmox), that
        provider is used, its settings all from the environment; with both set the task fails,
        naming O(provider). See the AWX guide (docs/awx.md).
    type: raw
  providers:
    description:
      - Named provider dicts, so a play can set them once with C(module_defaults) and tasks refer
        to one by name in O(provider). Every entry must be a dict; the secrets of every entry are
        masked, whichever provider the task uses.
    type: dict
"""
