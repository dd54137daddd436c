#!/usr/bin/python
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: vm
short_description: Create, delete, start, stop and restart virtual machines on any provider
version_added: 0.1.0
description:
  - Brings one VM to the wanted O(state) on a provider (libvirt, vSphere or a third-party backend),
    reconciling its vCPUs and memory where the backend can.
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
      - Name of the VM on the provider.
      - Checked before any call - a non-empty string without control characters; a new VM's
        name must not start or end with whitespace. libvirt also refuses C(/), C(.) and C(..) and
        names longer than 247 bytes; vSphere names longer than 80 characters.
    type: str
    required: true
  state:
    description:
      - V(present) defines the VM (created stopped when new) and reconciles its spec.
      - V(absent) deletes it, with the disks this collection created for it.
      - V(running) and V(stopped) also set its power state; V(stopped) shuts it down gracefully
        and waits up to O(shutdown_timeout), then powers it off if O(force) is set.
      - V(restarted) reboots a running VM, or starts a stopped one; it always reports a change.
    type: str
    choices: [present, absent, running, stopped, restarted]
    default: present
  vcpus:
    description: Virtual CPUs. Required to create a VM; changed on an existing VM when different.
    type: int
  memory_mb:
    description: Memory in MiB. Required to create a VM; changed on an existing VM when different.
    type: int
  disks:
    description:
      - Disks of a new VM (ignored for an existing VM). libvirt keys are C(size_gb) (a new volume
        in the provider's C(storage_pool)) or C(path) (an existing image), C(bus), C(format) and C(device).
      - The spec is validated before anything is created; every bad field is reported by its path.
    type: list
    elements: dict
  interfaces:
    description: Network interfaces of a new VM, each with C(network) or C(bridge), and optional C(model) and C(mac).
    type: list
    elements: dict
  boot:
    description: Boot order of a new VM, for example V([hd, network]).
    type: list
    elements: str
  metadata:
    description: Key/value metadata stored with the VM.
    type: dict
  tags:
    description: Tags stored with the VM, usable as a filter in M(resilient.virt.vm_info).
    type: list
    elements: str
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
    description: Shows state, vCPUs and memory before and after.
"""

EXAMPLES = r"""
- name: A small VM, running, on a local libvirt host
  resilient.virt.vm:
    provider:
      type: libvirt
      uri: qemu:///system
    name: web1
    vcpus: 1
    memory_mb: 512
    tags: [web]
    state: running

- name: A production KVM guest - host-model CPU, console and guest agent (the defaults), VNC, a
    random number generator through the XML escape hatch
  resilient.virt.vm:
    provider: {type: libvirt, uri: "qemu+ssh://root@kvm1/system"}
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

- name: Set providers once, then refer to them by name
  module_defaults:
    group/resilient.virt.all:
      providers:
        kvm1: {type: libvirt, uri: "qemu+ssh://root@kvm1/system"}
        vc: {type: vsphere, host: vcenter.example.com, username: automation, password: "{{ vc_password }}"}
      resilience:
        retry_preset: conservative
        failure_threshold: 3
  block:
    - name: Grow a VM's memory
      resilient.virt.vm:
        provider: kvm1
        name: db1
        memory_mb: 8192

    - name: Stop a VM, forcing it off after two minutes
      resilient.virt.vm:
        provider: kvm1
        name: db1
        state: stopped
        shutdown_timeout: 2m
        force: true

- name: Remove a VM
  resilient.virt.vm:
    provider: kvm1
    name: web1
    state: absent
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
      description: V(running), V(stopped), V(paused) or V(unknown).
      type: str
    vcpus:
      description: Virtual CPUs.
      type: int
    memory_mb:
      description: Memory in MiB.
      type: int
    tags:
      description: Tags stored with the VM.
      type: list
      elements: str
actions:
  description: What the task did (or, in check mode, would do), in order.
  returned: always
  type: list
  elements: str
  sample: [create, start]
changes:
  description: State, vCPUs and memory before and after.
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
  description: True when a change to vCPUs or memory takes effect only after the VM restarts.
  returned: when true
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
  returned: success
  type: dict
  contains:
    resilient_virt_breakers:
      description: Every breaker of the state store by name, in short form (C(state),
        C(consecutive_failures), C(half_open_at), C(last_error)); see M(resilient.virt.circuit_breaker).
      type: dict
"""

from ansible_collections.resilient.virt.plugins.module_utils._module_base import ResilientModule
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, VirtError
from ansible_collections.resilient.virt.plugins.module_utils import _conditions as conditions


class VmModule(ResilientModule):
    argument_spec = dict(
        name=dict(type="str", required=True),
        state=dict(type="str", default="present", choices=["present", "absent", "running", "stopped", "restarted"]),
        vcpus=dict(type="int"),
        memory_mb=dict(type="int"),
        disks=dict(type="list", elements="dict"),
        interfaces=dict(type="list", elements="dict"),
        boot=dict(type="list", elements="str"),
        metadata=dict(type="dict"),
        tags=dict(type="list", elements="str"),
        libvirt=dict(type="dict", options=dict(
            cpu_mode=dict(type="str", choices=["host-model", "host-passthrough", "maximum", "default"]),
            console=dict(type="bool"),
            guest_agent=dict(type="bool"),
            graphics=dict(type="str", choices=["none", "vnc", "spice"]),
            xml=dict(type="list", elements="str"),
        )),
        force=dict(type="bool", default=False),
        shutdown_timeout=dict(type="raw", default="60s"),
    )

    def run(self):
        from ansible_collections.resilient.virt.plugins.module_utils._convert import parse_duration
        from ansible_collections.resilient.virt.plugins.module_utils._vm.reconcile import reconcile

        params = self.params
        shutdown_timeout = parse_duration(params["shutdown_timeout"], "shutdown_timeout")
        provider = self.open_provider()
        try:
            outcome = reconcile(
                provider, params["name"], params["state"], params, check_mode=self.check_mode,
                force=params["force"], shutdown_timeout=shutdown_timeout,
            )
        except VirtError as err:
            err.result = dict(ready=False, conditions=self._failure_conditions(err))
            raise
        result = dict(
            changed=outcome["changed"],
            vm=outcome["vm"],
            actions=outcome["actions"],
            changes=dict(before=outcome["before"], after=outcome["after"]),
            conditions=self._conditions(outcome),
        )
        result["ready"] = any(c["type"] == conditions.READY and c["status"] is True
                              for c in result["conditions"])
        if outcome.get("restart_required"):
            result["restart_required"] = True
        if self.diff_mode and outcome["changed"]:
            result["diff"] = dict(before=outcome["before"], after=outcome["after"])
        return result

    def _conditions(self, outcome):
        after = outcome["after"]
        if after.get("state") == "absent":
            return []
        message = "%s is %s" % (self.params["name"], after.get("state"))
        if self.check_mode and outcome["changed"]:
            message = "check mode: %s would be %s" % (self.params["name"], after.get("state"))
        return [conditions.vm_ready(message)]

    def _failure_conditions(self, err):
        found = [conditions.vm_validation_error() if isinstance(err, InvalidSpec)
                 else conditions.vm_provider_error()]
        if not self.check_mode and self.params["state"] != "absent" and err.operation == "create":
            found.append(conditions.vm_create_failed())
        return found


def main():
    VmModule.main()


if __name__ == "__main__":
    main()
