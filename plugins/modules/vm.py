#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: vm
short_description: Create, delete, start, stop and restart virtual machines on any provider
version_added: 0.1.0
description:
  - Brings one VM to the wanted O(state) on a provider (libvirt, vSphere or a third-party backend),
    and an existing VM to its spec - vCPUs, memory, disks, interfaces, boot order, metadata, tags
    and autostart, as far as the backend can change them (a field it cannot change and that
    differs is refused, naming the field, before anything changes).
  - A change the running VM cannot take live (more vCPUs than it booted with, a device the guest
    does not release) is made in its configuration once; the task then reports
    C(restart_required=true), and later runs report C(changed=false) and C(restart_required=true)
    until the VM restarts.
  - Idempotent; a second run reports C(changed=false). Check mode changes nothing and reports what
    would change; C(--diff) shows before and after.
  - Tasks may act on the same VM at once (forks, other controllers) - work that another task did
    meanwhile (the VM created, started, stopped or deleted) is not an error; the task plans the
    rest afresh and reports only what it did itself.
  - Every provider call goes through retries with backoff, the provider's circuit breaker and
    rate limit, and a per-operation timeout. A retried create or delete first looks whether the
    earlier attempt already did the work, so it never creates twice.
author:
  - resilient.virt developers (!UNKNOWN)
options:
  name:
    description:
      - Name of the VM on the provider. Required unless O(uuid) is given.
      - On vSphere, where names need not be unique, an existing VM can also be named by its
        inventory path (C(/DC0/vm/team-a/web1)); a name that several VMs share fails with
        V(Conflict) naming that fix and O(uuid).
      - Checked before any call - a non-empty string of at most 255 characters without control
        characters (NUL, tab, newline), invisible or direction-changing characters (such as
        U+200B or U+202E); a new VM's name must not start or end with whitespace. libvirt also
        refuses C(/), C(.) and C(..) and names longer than 247 bytes; vSphere names longer than 80 characters.
    type: str
  uuid:
    description:
      - Find an existing VM by its UUID (the C(uuid) that M(resilient.virt.vm_info) returns)
        instead of its name, where names are not unique. With O(name) too, the VM must have that
        name (a VM is not renamed). A UUID that names no VM fails, unless O(state=absent).
      - A new VM's UUID is chosen when it is created, so a task with O(uuid) never creates one.
    type: str
  state:
    description:
      - V(present) defines the VM (created stopped when new) and reconciles its spec.
      - V(absent) deletes it, with the disks this collection created for it.
      - V(running) and V(stopped) also set its power state; V(stopped) shuts it down gracefully
        and waits up to O(shutdown_timeout), then powers it off if O(force) is set.
      - V(restarted) reboots a running VM, or starts a stopped one; it always reports a change.
      - V(paused) stops its vCPUs and keeps its memory on the host (libvirt; vSphere has no
        pause). V(suspended) saves its memory to disk and stops it (libvirt managed save,
        vSphere suspend); a stopped VM cannot be suspended. V(running) resumes or restores
        either.
    type: str
    choices: [present, absent, running, stopped, restarted, paused, suspended]
    default: present
  vcpus:
    description:
      - Virtual CPUs, from 1 to 4096. Required to create a VM (not a clone of O(template));
        changed on an existing VM when different.
    type: int
  memory_mb:
    description:
      - Memory in MiB, from 1 to 16777216 (16 TiB). Required to create a VM (not a clone of
        O(template)); changed on an existing VM when different.
    type: int
  disks:
    description:
      - The VM's disks, in order. libvirt keys are C(size_gb) (a new empty volume), C(base_image)
        (a new volume made from an image) or C(path) (an existing image, used as it is), C(bus),
        C(format), C(device) and C(pool); vSphere keys C(size_gb) and C(thin).
      - libvirt C(base_image) names a volume of one of the host's storage pools - its path,
        C(<pool>/<volume>), or a volume of the disk's pool; its format (qcow2 or raw) is read
        from libvirt. C(clone=overlay) (the default) makes a qcow2 volume whose backing store is
        the base image, C(clone=copy) a full copy (in C(format), default qcow2). C(size_gb) with
        C(base_image) makes the volume larger than the image; it cannot be smaller. The base image
        is never changed or deleted; the new volume is deleted with the VM.
      - libvirt C(pool) is the storage pool of the volume made for the disk (C(size_gb) or
        C(base_image)); default the provider's C(storage_pool). A pool that does not exist or is
        not active is refused, naming the disk.
      - On an existing VM the list is matched to its disks by position, on the keys each item
        gives. An item beyond the VM's disks is added (hot-plugged into a running VM where the
        platform can); a VM disk beyond the list is removed from the VM, and its storage is kept,
        with a warning that names it. An item that differs from the VM's disk at its position is
        refused, naming the field - list new disks after the existing ones.
      - C(size_gb) is a whole number from 1 to 1048576.
      - The spec is validated before anything is created; every bad field is reported by its path.
    type: list
    elements: dict
  interfaces:
    description:
      - Network interfaces, in order, each with C(network) or C(bridge), and optional C(model) and
        C(mac).
      - On an existing VM matched by position like O(disks); an interface's network (or bridge)
        is changed in place, its model or MAC cannot be. An added interface without C(mac) gets
        one at once, so the running VM and its configuration agree.
    type: list
    elements: dict
  boot:
    description: Boot order, for example V([hd, network]); on a running VM it applies at the next start.
    type: list
    elements: str
  metadata:
    description:
      - Key/value metadata stored with the VM (libvirt - in the domain's metadata; vSphere -
        custom attributes). Values are stored as strings (numbers and booleans as JSON).
      - One level - at most 256 keys, each key a name as for O(name) (up to 255 characters),
        each value a string of at most 4096 characters, a number, a boolean or null; lists and
        dicts are refused.
      - Merged into an existing VM's metadata - keys not given are kept, a key given with a null
        value is removed.
    type: dict
  tags:
    description:
      - Tags stored with the VM, usable as a filter in M(resilient.virt.vm_info); on an existing
        VM, exactly these (order does not matter). Each is checked like O(name).
    type: list
    elements: str
  autostart:
    description: Start the VM when its host starts (libvirt autostart).
    type: bool
  placement:
    description:
      - Where the VM is (vSphere and Proxmox VE; libvirt refuses it - there the hypervisor is the
        provider, and a disk's storage pool is C(disks[].pool)). Each key is optional; only the
        keys given are compared with the VM's C(placement).
      - On Proxmox VE, C(host) is a node of the cluster, C(datastore) the storage of a new VM's
        disks (and of a full clone), C(resource_pool) a PVE pool; the other keys are refused.
      - A new VM goes where the keys say, on the connected host with the most free memory when
        no host is given. On an existing VM a key that differs moves it - C(host), C(cluster),
        C(resource_pool) and C(datastore) by vMotion and storage vMotion (RelocateVM_Task),
        C(folder) by MoveIntoFolder_Task; the VM stays in its datacenter.
      - Names that do not exist are refused before anything is created or moved, each by its
        field (C(placement.cluster)), with what exists.
      - The VM's C(placement) shows C(folder) and C(resource_pool) as inventory paths. Give them
        in that form for check mode and C(--diff) to see that the VM is already there; another
        form moves nothing that is in place, but check mode reports a change.
    type: dict
    suboptions:
      datacenter:
        description: Datacenter name.
        type: str
      cluster:
        description: Cluster name.
        type: str
      host:
        description:
          - ESXi host name.
          - Alias C(esxi_hostname), the name community.vmware uses for the ESXi host a VM runs on.
        type: str
        aliases: [esxi_hostname]
      resource_pool:
        description:
          - Resource pool - its name (unique where the VM goes) or its inventory path, such as
            V(/DC0/host/C0/Resources/web).
        type: str
      folder:
        description:
          - VM folder - its inventory path, such as V(/DC0/vm/team-a), or its path under the
            datacenter's VM folder (V(team-a)).
        type: str
      datastore:
        description: Datastore of the VM's files (a new VM's disks are made there too).
        type: str
  template:
    description:
      - Create the VM as a clone of this VM or template (vSphere and Proxmox VE) - its name, or
        where the name is not unique its vSphere inventory path (V(/DC0/vm/templates/debian12))
        or its Proxmox V(/<node>/<vmid>). The clone
        is made where O(placement) says, stopped, then given the O(vcpus), O(memory_mb),
        O(disks), O(interfaces), O(metadata) and O(tags) the task sets (what it leaves out comes
        from the template). A clone that fails is deleted again.
      - Used only to create the VM; an existing VM is not compared with it.
      - The task reports the clone as one V(create) in RV(actions) (with C(changed=true)), the
        fields it sets on the clone and its O(customization) included, whether or not the clone
        needed any of them.
    type: str
  clone:
    description:
      - What a clone of O(template) is made of (Proxmox VE) - V(overlay), a linked clone whose
        disks are copy-on-write children of the template's (fast, and little space; the template
        must be a template, and the disks stay on its storage), or V(copy), a full clone with its
        own copy of every disk (on O(placement.datastore) when given). The words are those of a
        libvirt disk's C(clone).
      - Unset, a clone of a template is linked unless O(placement.datastore) names a storage to
        copy it to, and a clone of a VM is full.
      - vSphere clones are always full copies (vSphere refuses O(clone)); libvirt makes a disk
        from an image with its own C(disks[].clone).
      - Used only to create the VM.
    type: str
    choices: [overlay, copy]
  customization:
    description:
      - Guest customization of a clone (vSphere, with O(template)) - a Linux host name and
        domain, every NIC configured by DHCP; applied by the guest at its first start. vCenter
        refuses it for a guest OS it cannot customize. Used only to create the VM.
      - libvirt refuses it; give the guest its settings with O(cloud_init).
    type: dict
    suboptions:
      hostname:
        description: Host name of the guest (default - the VM's name, when it is a valid host name).
        type: str
      domain:
        description: DNS domain of the guest.
        type: str
  guest_id:
    description:
      - vSphere guest OS identifier of a new VM (default V(otherGuest64)); a clone keeps its
        template's. Used only to create the VM.
    type: str
  libvirt:
    description:
      - What only a libvirt domain has, for a new VM (libvirt providers only; another provider
        refuses the field). The domain type comes from the provider's C(domain_type), else from
        the hypervisor's capabilities - kvm where offered, otherwise qemu (emulation) with a
        warning that says so.
    type: dict
    suboptions:
      cpu_mode:
        description:
          - V(host-model) (the default where the hypervisor supports it), V(host-passthrough),
            V(maximum), or V(default) for the hypervisor's own default CPU. A mode the hypervisor
            does not support is refused, naming those it does.
        type: str
        choices: [host-model, host-passthrough, maximum, default]
      console:
        description: A serial console on a pty (C(virsh console)). Default V(true).
        type: bool
      guest_agent:
        description: The channel the qemu-guest-agent talks through. Default V(true).
        type: bool
      graphics:
        description: V(none) (the default), or a V(vnc) or V(spice) display listening on localhost.
        type: str
        choices: [none, vnc, spice]
      xml:
        description:
          - The escape hatch for what the spec does not cover - each item one XML element, such
            as C(<rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>). A
            device element (C(rng), C(watchdog), C(tpm), C(memballoon), C(video)...) is added to
            the domain's devices; another domain element (C(clock), C(features), C(cpu),
            C(cputune)...) replaces the element of that name. Elements the spec sets itself
            (C(name), C(memory), C(vcpu), C(os), C(metadata), C(devices)) are refused.
          - Each item is parsed with an XML parser (malformed XML is refused by its index), and
            the whole domain is validated against libvirt's schema when it is defined; nothing is
            created when it does not validate.
        type: list
        elements: str
  cloud_init:
    description:
      - A cloud-init NoCloud seed for a new libvirt VM - an ISO 9660 image labelled C(cidata)
        holding C(user-data), C(meta-data) and C(network-config), uploaded into the provider's
        C(storage_pool) and attached as a SATA cdrom. It is deleted with the VM, is not listed in
        the VM's C(disks), and is not compared on an existing VM.
      - The seed is stored unencrypted on the hypervisor, readable by whoever can read the
        storage pool or the guest's cdrom; the guest's cloud-init reads it on its first boot.
      - libvirt providers only; another provider refuses the field.
    type: dict
    suboptions:
      user_data:
        description:
          - The user data - a string is written as it is (a C(#cloud-config) document, a script),
            a dict as YAML after a C(#cloud-config) line.
          - It may hold secrets, so it is never shown - not in results, errors, warnings or
            logs. Ansible masks every value of it wherever it appears in the task's output (values
            shorter than 4 characters excepted); a string is masked as a whole, a dict value by
            value.
        type: raw
      meta_data:
        description: The meta data; C(instance-id) defaults to the VM's uuid and C(local-hostname) to its name.
        type: dict
      network_config:
        description: Network configuration (version 1 or 2) - a dict is written as YAML, a string as it is.
        type: raw
  wait_for_ip:
    description:
      - With O(state=running) or O(state=restarted), wait until the VM reports an IP address
        (from its guest agent, a DHCP lease or the ARP table on libvirt; VMware Tools on
        vSphere), at most O(wait_timeout); the task fails with V(Timeout) when none comes.
        Ignored in check mode.
      - Alias O(wait_for_ip_address), the name community.vmware's C(vmware_guest) uses.
    type: bool
    default: false
    aliases: [wait_for_ip_address]
  wait_timeout:
    description: How long O(wait_for_ip) waits (seconds, or C(30s), C(5m)).
    type: raw
    default: 5m
  force:
    description: With O(state=stopped), power the VM off when the graceful shutdown does not finish in time.
    type: bool
    default: false
  shutdown_timeout:
    description: How long O(state=stopped) waits for a graceful shutdown (seconds, or C(30s), C(2m)).
    type: raw
    default: 60s
extends_documentation_fragment:
  - resilient.virt.attributes
  - resilient.virt.provider
  - resilient.virt.resilience
attributes:
  check_mode:
    description: Returns the planned actions and the predicted VM; nothing is changed.
  diff_mode:
    description: Shows state, vCPUs, memory and every field the task sets, before and after.
"""

EXAMPLES = r"""
# Assumes providers hv1 (libvirt: networks default, storage; the image below) and vc in module_defaults, as set below.
- name: A small VM, running
  resilient.virt.vm:
    provider: hv1
    name: web1
    vcpus: 1
    memory_mb: 512
    tags: [web]
    state: running

- name: A production KVM guest - host-model CPU, console and guest agent (the defaults), VNC, a
    random number generator through the XML escape hatch (on the libvirt network default)
  resilient.virt.vm:
    provider: hv1
    name: app1
    vcpus: 2
    memory_mb: 2048
    disks:
      - {size_gb: 20}
    interfaces:
      - {network: default}
    libvirt:
      graphics: vnc
      xml:
        - "<rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>"
    state: running

- name: Set providers once - a catalog such as resilient_virt_providers in group_vars - then use their names
  # resilient_virt_providers:
  #   hv1: {type: libvirt, uri: "qemu+ssh://root@hv1.example.com/system"}
  #   vc: {type: vsphere, host: vcenter.example.com, username: automation, password: "{{ vault_vc_password }}"}
  module_defaults:
    group/resilient.virt.all:
      providers: "{{ resilient_virt_providers }}"
      resilience:
        retry_preset: conservative
        failure_threshold: 3
  block:
    - name: A database VM
      resilient.virt.vm:
        provider: hv1
        name: db1
        vcpus: 2
        memory_mb: 2048
        disks:
          - {size_gb: 20}
        interfaces:
          - {network: default}
        metadata: {owner: team-a, temporary: "yes"}
        tags: [db]
        state: running

    - name: Grow its memory (a running VM runs with it after its next start)
      resilient.virt.vm:
        provider: hv1
        name: db1
        memory_mb: 4096

    - name: Day 2 - a second disk and interface hot-plugged, an owner changed, a label removed
      resilient.virt.vm:
        provider: hv1
        name: db1
        disks:
          - {size_gb: 20}
          - {size_gb: 100}
        interfaces:
          - {network: default}
          - {network: storage}
        metadata: {owner: team-b, temporary: null}
        tags: [db, backup]
        autostart: true
      register: db1

    - name: Say when a change waits for a restart
      ansible.builtin.debug:
        msg: db1 must be restarted to run with its new configuration
      when: db1.restart_required

    - name: Stop it, forcing it off when it has not shut down after 20 seconds
      resilient.virt.vm:
        provider: hv1
        name: db1
        state: stopped
        shutdown_timeout: 20s
        force: true

- name: A guest from a cloud image - a 20 GiB overlay on the image, a full copy of it as a data
    disk, and cloud-init user data (kept out of every result and log)
  resilient.virt.vm:
    provider: hv1
    name: web2
    vcpus: 2
    memory_mb: 2048
    disks:
      - {base_image: /var/lib/libvirt/images/debian-12-genericcloud-amd64.qcow2, size_gb: 20}
      - {base_image: debian-12-genericcloud-amd64.qcow2, clone: copy, pool: default}
    interfaces:
      - {network: default}
    cloud_init:
      user_data:
        users:
          - name: deploy
            ssh_authorized_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly deploy@example.com"]
            sudo: "ALL=(ALL) NOPASSWD:ALL"
        packages: [nginx]
      network_config: {version: 2, ethernets: {eth0: {dhcp4: true}}}
    state: running

- name: A VM on vCenter, on a given ESXi host (esxi_hostname - community.vmware's name - is an alias of host)
  resilient.virt.vm:
    provider: vc
    name: vc-web1
    vcpus: 1
    memory_mb: 1024
    placement:
      esxi_hostname: DC0_C0_H0
    state: running

- name: Remove the VMs
  resilient.virt.vm:
    provider: "{{ item.provider }}"
    name: "{{ item.name }}"
    state: absent
  loop:
    - {provider: hv1, name: web1}
    - {provider: hv1, name: app1}
    - {provider: hv1, name: web2}
    - {provider: hv1, name: db1}
    - {provider: vc, name: vc-web1}
"""

RETURN = r"""
vm:
  description: The VM after the task, or null when it is absent (in check mode, the VM as it is now).
  returned: always
  type: dict
  contains:
    name:
      description: Name on the provider.
      type: str
    uuid:
      description: Provider's unique id.
      type: str
    hypervisor:
      description: Host the VM is on.
      type: str
    provider:
      description: The provider by the name it was given (its entry of O(providers), or its
        C(name)); its key when it has no name. O(provider) accepts it.
      type: str
    provider_key:
      description: The provider's key, C(<type>:<name>), which names its circuit breaker.
      type: str
    state:
      description: V(running), V(stopped), V(paused), V(suspended) or V(unknown).
      type: str
    vcpus:
      description: Virtual CPUs, as configured (what the VM runs with after its next start).
      type: int
    memory_mb:
      description: Memory in MiB, as configured.
      type: int
    disks:
      description: Disks, in order, as configured.
      type: list
      elements: dict
    interfaces:
      description: Network interfaces, in order, as configured.
      type: list
      elements: dict
    metadata:
      description: Metadata stored with the VM.
      type: dict
    tags:
      description: Tags stored with the VM.
      type: list
      elements: str
    autostart:
      description: Whether the VM starts with its host (null when the provider does not say).
      type: bool
    guest:
      description:
        - What the guest reports - C(agent) (true when the QEMU guest agent or VMware Tools
          answers), C(agent_state) (the platform's word for it, such as V(connected),
          V(disconnected), V(unresponsive) or V(guestToolsRunning); null without an agent
          channel), C(os) and C(hostname) (null when unknown).
      type: dict
    addresses:
      description:
        - IP addresses of the VM, interface by interface, the primary first. Each interface of
          C(interfaces) carries its own C(addresses) and C(address_source) - V(agent) (the guest
          agent), V(lease) (a DHCP lease of the libvirt network), V(arp) (the host's ARP table),
          V(tools) (VMware Tools), or null when it has none.
      type: list
      elements: str
    placement:
      description:
        - Where the VM is (vSphere) - C(datacenter), C(cluster) (null on a standalone host),
          C(host), C(resource_pool) and C(folder) (inventory paths) and C(datastore) (of its
          configuration file), in the form O(placement) takes. Absent
          on providers that have no placement.
      type: dict
    restart_required:
      description: True when the running VM still runs with something other than its configuration.
      type: bool
actions:
  description:
    - What the task did (or, in check mode, would do), in order - V(create), V(delete),
      V(reconfigure), V(start), V(shutdown), V(power_off), V(reboot), V(pause), V(suspend).
    - V(create) is a new VM, a clone of O(template) included (with what the task sets on the
      clone and its customization - no V(reconfigure) follows it).
  returned: always
  type: list
  elements: str
  sample: [create, start]
changes:
  description: State, vCPUs, memory and every field the task sets, before and after.
  returned: always
  type: dict
  contains:
    before:
      description: Before the task.
      type: dict
    after:
      description: After the task (predicted in check mode).
      type: dict
restart_required:
  description:
    - True when the VM runs with something other than its configuration, and a change (this
      task's or an earlier one's) takes effect only after it restarts.
  returned: always
  type: bool
conditions:
  description:
    - Kubernetes-style conditions of the VM, each with C(type), C(status) (a boolean, null when
      unknown), C(reason), C(message) and C(lastTransitionTime) (RFC 3339, UTC).
    - C(Ready) is V(true)/C(VMReady) when the VM is in the wanted state; on failure V(false) with
      C(ProviderError) or C(ValidationError), and C(Provisioning) V(false)/C(CreateFailed) when a
      create failed. A condition set by a failure has an empty C(message), as C(msg) says what failed.
  returned: always
  type: list
  elements: dict
ready:
  description:
    - True when the VM exists in the requested state (its C(Ready) condition is true); false on
      failure and after O(state=absent). Meant for C(when:).
  returned: always
  type: bool
diff:
  description: The VM before and after, with C(--diff), when the task changed it.
  returned: when changed and in diff mode
  type: dict
error:
  description:
    - On failure, what failed - C(type) (one of the error taxonomy, such as V(InvalidSpec),
      V(Unavailable), V(BreakerOpen) or V(MissingLibrary)), C(retryable), C(retry_after) (seconds,
      or null) and C(details). The message is in C(msg), once.
  returned: failure
  type: dict
  sample: {"type": "Unavailable", "retryable": true, "retry_after": null, "details": {"attempts": 3}}
ansible_facts:
  description: Facts for the fact cache and AWX.
  returned: success, unless the state store could not be read
  type: dict
  contains:
    resilient_virt_breakers:
      description:
        - Every circuit breaker of the state store by name (C(<type>:<name>)), in short form, not only
          those of the providers this task used; see M(resilient.virt.circuit_breaker).
      type: dict
      contains:
        state:
          description: V(closed), V(open) or V(half_open).
          type: str
        consecutive_failures:
          description: Failures in a row in the current episode.
          type: int
        half_open_at:
          description: When an open breaker lets a probe through (RFC 3339, UTC), or null.
          type: str
        last_error:
          description: The last failure that counted against it (C(type), C(message)), or null.
          type: dict
resilience_spans:
  description:
    - Each provider call of the task, for the traces of the callback plugin
      P(resilient.virt.resilience_summary#callback), which asks for them with its C(traces) option
      (it sets C(RESILIENT_VIRT_RECORD_SPANS=true)); see docs/observability.md.
    - Calls beyond the first 200 are only counted, in RV(resilience_spans.dropped).
  returned: when the task's environment sets C(RESILIENT_VIRT_RECORD_SPANS=true)
  type: dict
  contains:
    spans:
      description:
        - One dict per call - C(provider) (its key), C(operation), C(outcome) (C(ok) or the error
          type), C(start) and C(end) (nanoseconds since the epoch), C(timeout), C(attempts),
          C(retries), C(backoff_seconds), C(rate_limit_waits), C(rate_limit_seconds), C(refused),
          C(breaker_state) - and its C(events) (attempts, waits, breaker refusal and changes of
          state) as C([name, time, attributes]). No message, argument or URL.
      type: list
      elements: dict
    dropped:
      description: Calls left out beyond the first 200.
      type: int
resilience:
  description:
    - What the resilience layer did during the task, by provider key (C(<type>:<name>)), counted
      for failed tasks too; the callback plugin P(resilient.virt.resilience_summary#callback) adds
      them up for a play. Empty when the task called no provider.
    - Keys beyond the first 100 (sorted) are added up under C((others)).
  returned: always, except when Ansible itself refused the arguments
  type: dict
  sample: {"libvirt:hv1": {"calls": 2, "attempts": 4, "retries": 2, "backoff_seconds": 1.52,
           "rate_limit_waits": 0, "rate_limit_seconds": 0.0, "failures": 3, "refused": 1,
           "failed_calls": 2, "transitions": [{"from": "closed", "to": "open", "count": 1}]}}
  contains:
    calls:
      description: Calls made to the provider; each may make several attempts.
      type: int
    attempts:
      description: Attempts that reached the provider (its operation, or the look before a retry).
      type: int
    retries:
      description: Waits between two attempts of a call.
      type: int
    backoff_seconds:
      description: Seconds spent in those waits.
      type: float
    rate_limit_waits:
      description: Attempts that waited for their turn at the provider's rate limit.
      type: int
    rate_limit_seconds:
      description: Seconds spent waiting for the rate limit.
      type: float
    failures:
      description: Attempts the circuit breaker counted as failures (the provider unreachable or too slow).
      type: int
    refused:
      description: Calls refused at once because the provider's circuit breaker was open.
      type: int
    failed_calls:
      description: Calls that got no answer from the provider (unreachable or too slow after every
        attempt, refused by the breaker); an answer such as V(NotFound) is not counted.
      type: int
    transitions:
      description: Changes of the circuit breaker's state that this task made (C(from), C(to),
        C(count)), in the order first seen; states are V(closed), V(open) and V(half_open).
      type: list
      elements: dict
    operations:
      description:
        - Per provider operation (such as C(describe)) - C(outcomes), calls by how they ended
          (V(ok) or the error type), C(buckets), calls by duration in the bins of the
          C(resilient_virt_provider_call_duration_seconds) histogram (non-cumulative, the last for
          calls longer than 600 s), C(seconds), their total, and C(timeout), the time limit of
          one attempt. See docs/observability.md.
      type: dict
"""

from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule
from ansible_collections.resilient.virt.plugins.module_utils._vm.task import run_vm


class VmModule(ResilientModule):
    module_kwargs = dict(required_one_of=[("name", "uuid")])
    argument_spec = dict(
        name=dict(type="str"),
        uuid=dict(type="str"),
        state=dict(type="str", default="present",
                   choices=["present", "absent", "running", "stopped", "restarted", "paused", "suspended"]),
        vcpus=dict(type="int"),
        memory_mb=dict(type="int"),
        disks=dict(type="list", elements="dict"),
        interfaces=dict(type="list", elements="dict"),
        boot=dict(type="list", elements="str"),
        metadata=dict(type="dict"),
        tags=dict(type="list", elements="str"),
        autostart=dict(type="bool"),
        placement=dict(type="dict", options=dict(
            datacenter=dict(type="str"),
            cluster=dict(type="str"),
            host=dict(type="str", aliases=["esxi_hostname"]),
            resource_pool=dict(type="str"),
            folder=dict(type="str"),
            datastore=dict(type="str"),
        )),
        template=dict(type="str"),
        clone=dict(type="str", choices=["overlay", "copy"]),
        customization=dict(type="dict", options=dict(hostname=dict(type="str"),
                                                     domain=dict(type="str"))),
        guest_id=dict(type="str"),
        libvirt=dict(type="dict", options=dict(
            cpu_mode=dict(type="str", choices=["host-model", "host-passthrough", "maximum", "default"]),
            console=dict(type="bool"),
            guest_agent=dict(type="bool"),
            graphics=dict(type="str", choices=["none", "vnc", "spice"]),
            xml=dict(type="list", elements="str"),
        )),
        cloud_init=dict(type="dict", options=dict(
            user_data=dict(type="raw", no_log=True),
            meta_data=dict(type="dict"),
            network_config=dict(type="raw"),
        )),
        wait_for_ip=dict(type="bool", default=False, aliases=["wait_for_ip_address"]),
        wait_timeout=dict(type="raw", default="5m"),
        force=dict(type="bool", default=False),
        shutdown_timeout=dict(type="raw", default="60s"),
    )

    def run(self):
        return run_vm(self.params, self.context())


def main():
    VmModule.main()


if __name__ == "__main__":
    main()
