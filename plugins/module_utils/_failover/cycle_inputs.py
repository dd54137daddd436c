# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet a reconcile cycle plans over: hypervisors and VMs, given or listed from providers."""
import math

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import VM, Hypervisor, sizes_by_host

FLAVOR_KEY = "flavor"
CAPACITY_KEYS = ("cpu", "memory_mb", "used_cpu", "used_memory_mb")


def _whole(hypervisor):
    """A provider's hypervisor dict with whole capacity numbers: usage rounded up, capacity down
    (vSphere reports CPU use as a fraction of cores)."""
    out = dict(hypervisor)
    for key in CAPACITY_KEYS:
        if isinstance(out.get(key), float):
            out[key] = int(math.ceil(out[key]) if key.startswith("used_") else math.floor(out[key]))
    return out


class Fleet:
    """Hypervisors and VMs (model objects), VMs reported running ({uuid: host}), the provider
    reference of each hypervisor and the VM dicts a provider returned, by uuid."""

    def __init__(self, hypervisors, vms, running=None, owners=None, definitions=None,
                 states=None):
        self.hypervisors = hypervisors
        self.vms = vms
        self.running = running
        self.owners = owners or {}
        self.definitions = definitions or {}
        self.states = states or {}  # hypervisor name -> its state as its provider reports it

    @classmethod
    def given(cls, hypervisors, vms, check_hosts=True):
        """A fleet from the module's ``hypervisors`` and ``vms`` options.

        With ``check_hosts``, a VM whose host is not one of ``hypervisors`` is an error: it could
        be neither protected nor counted on its host.
        """
        if vms is None:
            raise field_error("vms", "is required with hypervisors: list the VMs (an empty list "
                              "when there are none)")
        fleet = cls(
            [Hypervisor.from_dict(item, "hypervisors[%d]" % index) for index, item in enumerate(hypervisors)],
            [VM.from_dict(item, "vms[%d]" % index) for index, item in enumerate(vms)],
        )
        if check_hosts:
            known = set(hv.name for hv in fleet.hypervisors)
            for index, vm in enumerate(fleet.vms):
                if vm.host not in known:
                    raise field_error(
                        "vms[%d].host" % index,
                        "%r is not one of the hypervisors given in 'hypervisors'; add it there or fix "
                        "the VM's host" % vm.host,
                    )
        return fleet

    @classmethod
    def listed(cls, providers):
        """A fleet listed from ``providers``, pairs of (reference, provider).

        A VM's zone is its hypervisor's, its flavor the ``flavor`` key of its metadata (a VM
        without one needs no reservation), and a running VM counts as running on its hypervisor.
        """
        hypervisors, vms, running, owners, definitions, states = [], [], {}, {}, {}, {}
        for reference, provider in providers:
            zones = {}
            for index, item in enumerate(provider.list_hypervisors()):
                hypervisors.append(Hypervisor.from_dict(_whole(item), "%s hypervisors[%d]" % (provider.key, index)))
                zones[item["name"]] = item.get("az") or ""
                owners[item["name"]] = reference
                states[item["name"]] = item.get("state")
            for item in provider.list_vms():
                if not item.get("uuid") or not item.get("hypervisor"):
                    continue
                host = item["hypervisor"]
                vms.append(VM(
                    uuid=item["uuid"], host=host, az=item.get("az") or zones.get(host, ""),
                    flavor=(item.get("metadata") or {}).get(FLAVOR_KEY, ""),
                    vcpus=item.get("vcpus"), memory_mb=item.get("memory_mb"),
                ))
                if item.get("state") == "running":
                    running[item["uuid"]] = host
                definitions[item["uuid"]] = dict(item, provider=reference)
        return cls(hypervisors, vms, running, owners, definitions, states)

    def with_capacity_held_by(self, reservations):
        """The hypervisors with ``reservations`` (of other creators) counted as used."""
        held = sizes_by_host(reservations)
        if not held:
            return self.hypervisors
        by_host = sizes_by_host(self.vms)
        adjusted = []
        for hv in self.hypervisors:
            cpu, memory = held.get(hv.name, (0, 0))
            if cpu or memory:
                used_cpu, used_memory = hv.used(by_host)
                hv = Hypervisor(hv.name, hv.az, hv.cpu, hv.memory_mb, hv.traits, used_cpu + cpu, used_memory + memory)
            adjusted.append(hv)
        return adjusted
