# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Data shapes of failover reservations: hypervisors, VMs, reservations and what a cycle decided.

Memory is in MiB everywhere (``memory_mb``). ``from_dict`` checks every field it reads and raises
:class:`InvalidSpec` naming the field path and the fix; keys it does not know are ignored, so a
provider's full VM or hypervisor dict can be passed as it is. Also here: the resource keys of a
reservation and whether a VM fits in one, the names of new reservations, and the records of one
cycle (removals, deletions, each VM's coverage).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, NoReturn

from ansible_collections.resilient.virt.plugins.module_utils._failover.naming import (  # noqa: F401
    NameAllocator, sanitize_az_for_name)  # kept here for importers
from ansible_collections.resilient.virt.plugins.module_utils._input import text_problem
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error

__all__ = ("Hypervisor", "VM", "Reservation", "RESOURCE_KEYS", "resource_error", "vm_fits",
           "reservation_size", "sizes_by_host", "sanitize_az_for_name", "NameAllocator", "Removal", "Deletion",
           "VMStatus", "CycleResult")


def _fail(path: str, message: str) -> NoReturn:
    raise field_error(path, message)


def _text(data: Mapping[str, Any], key: str, path: str, required: bool = False) -> str:
    """The string at ``key`` ("" when missing and not ``required``), a name as
    :func:`_input.text_problem` accepts it."""
    value = data.get(key)
    if value is None:
        if required:
            _fail("%s.%s" % (path, key), "is required; give a non-empty string")
        return ""
    if not isinstance(value, str) or (required and not value):
        _fail("%s.%s" % (path, key), "must be a non-empty string, got %r" % (value,))
    problem = text_problem(value) if value else None
    if problem:
        _fail("%s.%s" % (path, key), problem)
    return value


def _count(data: Mapping[str, Any], key: str, path: str) -> int | None:
    """The whole number >= 0 at ``key``, None when missing."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _fail("%s.%s" % (path, key), "must be a whole number >= 0, got %r" % (value,))
    return value


def _mapping(data: Mapping[str, Any], key: str, path: str,
             value_check: Callable[[Any], bool]) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        _fail("%s.%s" % (path, key), "must be a mapping, got %s" % type(value).__name__)
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not value_check(v):
            _fail("%s.%s[%r]" % (path, key, k), "has an invalid value %r" % (v,))
        out[k] = v
    return out


TRAIT_VALUES = ("required", "forbidden")


def _extra_specs(data: Mapping[str, Any], path: str) -> dict[str, str]:
    """Flavor extra specs: strings; a ``trait:NAME`` spec is ``required`` or ``forbidden``."""
    specs = _mapping(data, "extra_specs", path, lambda v: isinstance(v, str))
    for key, value in specs.items():
        if key.startswith("trait:") and value.strip().lower() not in TRAIT_VALUES:
            _fail("%s.extra_specs[%r]" % (path, key),
                  "must be required or forbidden, got %r" % (value,))
    return specs


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _optional_time(data: Mapping[str, Any], key: str, path: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        _fail("%s.%s" % (path, key), "must be an RFC 3339 time string such as 2026-11-21T10:00:00Z")
    return value


@dataclass
class Hypervisor:
    """One hypervisor. ``used_*`` None means: sum of the VMs that run on it."""

    name: str
    az: str = ""
    cpu: int = 0
    memory_mb: int = 0
    traits: frozenset[str] = frozenset()
    used_cpu: int | None = None
    used_memory_mb: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "az": self.az, "cpu": self.cpu, "memory_mb": self.memory_mb,
                "traits": sorted(self.traits), "used_cpu": self.used_cpu,
                "used_memory_mb": self.used_memory_mb}

    def used(self, by_host: Mapping[str, tuple[int, int]]) -> tuple[int, int]:
        """(cpu, memory_mb) its VMs use: ``used_*`` when known, else ``by_host[name]``, the
        sums of :func:`sizes_by_host` over the VMs listed on it."""
        cpu, memory = by_host.get(self.name, (0, 0))
        return (cpu if self.used_cpu is None else self.used_cpu,
                memory if self.used_memory_mb is None else self.used_memory_mb)

    @classmethod
    def from_dict(cls, data: Any, path: str = "hypervisor") -> Hypervisor:
        if not isinstance(data, dict):
            _fail(path, "must be a mapping")
        traits = data.get("traits") or ()
        if not isinstance(traits, (list, tuple, set, frozenset)) or not all(_is_text(t) for t in traits):
            _fail(path + ".traits", "must be a list of trait names such as CUSTOM_HANA")
        return cls(name=_text(data, "name", path, required=True), az=_text(data, "az", path),
                   cpu=_count(data, "cpu", path) or 0,
                   memory_mb=_count(data, "memory_mb", path) or 0,
                   traits=frozenset(traits), used_cpu=_count(data, "used_cpu", path),
                   used_memory_mb=_count(data, "used_memory_mb", path))


@dataclass
class VM:
    """One VM. ``host`` is the hypervisor it runs on now (``hypervisor`` is accepted too)."""

    uuid: str
    host: str
    az: str = ""
    flavor: str = ""
    vcpus: int | None = None
    memory_mb: int | None = None
    extra_specs: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "host": self.host, "az": self.az, "flavor": self.flavor,
                "vcpus": self.vcpus, "memory_mb": self.memory_mb,
                "extra_specs": dict(self.extra_specs)}

    @classmethod
    def from_dict(cls, data: Any, path: str = "vm") -> VM:
        if not isinstance(data, dict):
            _fail(path, "must be a mapping")
        host_key = "hypervisor" if data.get("host") is None and "hypervisor" in data else "host"
        return cls(uuid=_text(data, "uuid", path, required=True),
                   host=_text(data, host_key, path, required=True),
                   az=_text(data, "az", path), flavor=_text(data, "flavor", path),
                   vcpus=_count(data, "vcpus", path), memory_mb=_count(data, "memory_mb", path),
                   extra_specs=_extra_specs(data, path))


@dataclass
class Reservation:
    """A failover slot on ``host``; ``allocations`` maps VM uuid to the host it ran on when added.

    ``resources`` holds ``cpu`` and ``memory_mb``; other keys are kept so revalidation can report
    them. ``last_changed`` and ``acknowledged_at`` are RFC 3339 strings or None.
    """

    name: str
    host: str
    az: str = ""
    resources: dict[str, int] = field(default_factory=dict)
    allocations: dict[str, str] = field(default_factory=dict)
    creator: str = ""
    last_changed: str | None = None
    acknowledged_at: str | None = None
    conditions: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "az": self.az,
                "resources": dict(self.resources), "allocations": dict(sorted(self.allocations.items())),
                "creator": self.creator, "last_changed": self.last_changed,
                "acknowledged_at": self.acknowledged_at,
                "conditions": [dict(c) for c in self.conditions]}

    @classmethod
    def from_dict(cls, data: Any, path: str = "reservation") -> Reservation:
        if not isinstance(data, dict):
            _fail(path, "must be a mapping")
        conditions = data.get("conditions") or []
        if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
            _fail(path + ".conditions", "must be a list of condition mappings")
        return cls(name=_text(data, "name", path, required=True),
                   host=_text(data, "host", path, required=True), az=_text(data, "az", path),
                   resources=_mapping(data, "resources", path, _is_count),
                   allocations=_mapping(data, "allocations", path, _is_text),
                   creator=_text(data, "creator", path),
                   last_changed=_optional_time(data, "last_changed", path),
                   acknowledged_at=_optional_time(data, "acknowledged_at", path),
                   conditions=[dict(c) for c in conditions])


# -- Resource keys of a reservation and whether a VM fits in one.

RESOURCE_KEYS = ("cpu", "memory_mb")


def resource_error(resources: Mapping[str, Any]) -> str | None:
    """Message naming the first key other than cpu/memory_mb, or None when all keys are valid."""
    for key in sorted(resources):
        if key not in RESOURCE_KEYS:
            return "invalid resource key %r: only 'cpu' and 'memory_mb' are allowed" % (key,)
    return None


def vm_fits(vm: VM, resources: Mapping[str, int]) -> bool:
    """True when the VM's vcpus and memory are at most the reservation's.

    A size the VM does not state is not checked; a key the reservation lacks does not fit.
    """
    if vm.memory_mb is not None:
        held = resources.get("memory_mb")
        if held is None or vm.memory_mb > held:
            return False
    if vm.vcpus is not None:
        held = resources.get("cpu")
        if held is None or vm.vcpus > held:
            return False
    return True


def reservation_size(resources: Mapping[str, int]) -> tuple[int, int]:
    """(cpu, memory_mb) a reservation blocks on its host; a missing key blocks nothing."""
    return resources.get("cpu", 0), resources.get("memory_mb", 0)


def sizes_by_host(items: Iterable[VM | Reservation]) -> dict[str, tuple[int, int]]:
    """{host: (cpu, memory_mb)} summed over VMs (their vcpus and memory) or reservations."""
    out: dict[str, tuple[int, int]] = {}
    for item in items:
        if isinstance(item, Reservation):
            cpu, memory = reservation_size(item.resources)
        else:
            cpu, memory = item.vcpus or 0, item.memory_mb or 0
        old_cpu, old_memory = out.get(item.host, (0, 0))
        out[item.host] = (old_cpu + cpu, old_memory + memory)
    return out


# -- What one reconcile cycle decided: the reservations to keep, what changed, and why.

class Removal(NamedTuple):
    """VM ``vm`` (allocated on ``host``) left reservation ``reservation`` for ``reason``."""

    reservation: str
    vm: str
    host: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return self._asdict()


class Deletion(NamedTuple):
    """A reservation the cycle deletes; ``reason`` is Empty, InvalidResources, HostNotFound or
    VMDoesNotFit. ``reservation`` carries its last state, including the Ready condition."""

    reservation: Reservation
    reason: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.reservation.name, "host": self.reservation.host,
                "reason": self.reason, "message": self.message,
                "reservation": self.reservation.to_dict()}


@dataclass
class VMStatus:
    """Coverage of one VM: slots required by its flavor, slots held, and why it is short."""

    uuid: str
    host: str
    az: str
    flavor: str
    required: int
    held: int
    why: str | None = None

    @property
    def short_by(self) -> int:
        return max(0, self.required - self.held)

    def to_dict(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "host": self.host, "az": self.az, "flavor": self.flavor,
                "required": self.required, "held": self.held, "short_by": self.short_by,
                "why": self.why}


@dataclass
class CycleResult:
    """Outcome of one cycle. ``reservations`` is the complete new list, sorted by name."""

    reservations: list[Reservation]
    created: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[Deletion] = field(default_factory=list)
    removals: list[Removal] = field(default_factory=list)
    reused: int = 0
    moved: int = 0
    resized: int = 0
    acknowledged: int = 0
    vm_status: list[VMStatus] = field(default_factory=list)
    processed: int = 0
    deferred: int = 0
    lower_bound: Any = None
    target: Any = None

    @property
    def summary(self) -> dict[str, Any]:
        requiring = [s for s in self.vm_status if s.required > 0]
        covered = sum(1 for s in requiring if s.held >= s.required)
        return {
            "created": len(self.created), "reused": self.reused, "moved": self.moved,
            "resized": self.resized,
            "allocations_removed": len(self.removals), "deleted": len(self.deleted),
            "acknowledged": self.acknowledged, "reservations": len(self.reservations),
            "vms_requiring": len(requiring), "vms_covered": covered,
            "coverage_ratio": round(covered / len(requiring), 4) if requiring else 1.0,
            "slots_missing": sum(s.short_by for s in requiring),
            "vms_processed": self.processed, "vms_deferred": self.deferred,
            "reserved_cpu": sum(r.resources.get("cpu", 0) for r in self.reservations),
            "reserved_memory_mb": sum(r.resources.get("memory_mb", 0) for r in self.reservations),
            **self._against_bound(),
        }

    def _against_bound(self) -> dict[str, Any]:
        """The lower bound (see ``bounds``) and what the plan holds against it."""
        bound = self.lower_bound
        if bound is None:
            return {}
        memory = sum(r.resources.get("memory_mb", 0) for r in self.reservations)
        return {
            "lower_bound_memory_mb": bound.memory_mb,
            "lower_bound_reservations": bound.reservations,
            "failure_bound_memory_mb": bound.failure_memory_mb,
            "failure_bound_reservations": bound.failure_reservations,
            "memory_vs_lower_bound": round(memory / bound.memory_mb, 2) if bound.memory_mb else None,
            "reservations_vs_lower_bound": (round(len(self.reservations) / bound.reservations, 2)
                                            if bound.reservations else None),
        }

    @property
    def changed_anything(self) -> bool:
        return bool(self.created or self.changed or self.deleted)

    def reservations_by_name(self) -> dict[str, Reservation]:
        return {r.name: r for r in self.reservations}

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "reservations": [r.to_dict() for r in self.reservations],
                "created": list(self.created), "changed": list(self.changed),
                "deleted": [d.to_dict() for d in self.deleted],
                "removals": [r.to_dict() for r in self.removals],
                "vm_status": [s.to_dict() for s in self.vm_status]}
