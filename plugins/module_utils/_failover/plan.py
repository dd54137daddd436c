"""What one reconcile cycle decided: the reservations to keep, what changed, and why."""
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional

from ansible_collections.resilient.virt.plugins.module_utils._failover.model import Reservation

__all__ = ("Removal", "Deletion", "VMStatus", "CycleResult")


class Removal(NamedTuple):
    """VM ``vm`` (allocated on ``host``) left reservation ``reservation`` for ``reason``."""

    reservation: str
    vm: str
    host: str
    reason: str

    def to_dict(self):
        return self._asdict()


class Deletion(NamedTuple):
    """A reservation the cycle deletes; ``reason`` is Empty, InvalidResources, HostNotFound or
    VMDoesNotFit. ``reservation`` carries its last state, including the Ready condition."""

    reservation: Reservation
    reason: str
    message: str

    def to_dict(self):
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
    why: Optional[str] = None

    @property
    def short_by(self):
        return max(0, self.required - self.held)

    def to_dict(self):
        return {"uuid": self.uuid, "host": self.host, "az": self.az, "flavor": self.flavor,
                "required": self.required, "held": self.held, "short_by": self.short_by,
                "why": self.why}


@dataclass
class CycleResult:
    """Outcome of one cycle. ``reservations`` is the complete new list, sorted by name."""

    reservations: List[Reservation]
    created: List[str] = field(default_factory=list)
    changed: List[str] = field(default_factory=list)
    deleted: List[Deletion] = field(default_factory=list)
    removals: List[Removal] = field(default_factory=list)
    reused: int = 0
    acknowledged: int = 0
    vm_status: List[VMStatus] = field(default_factory=list)
    processed: int = 0
    deferred: int = 0

    @property
    def summary(self):
        requiring = [s for s in self.vm_status if s.required > 0]
        covered = sum(1 for s in requiring if s.held >= s.required)
        return {
            "created": len(self.created), "reused": self.reused,
            "allocations_removed": len(self.removals), "deleted": len(self.deleted),
            "acknowledged": self.acknowledged, "reservations": len(self.reservations),
            "vms_requiring": len(requiring), "vms_covered": covered,
            "coverage_ratio": round(covered / len(requiring), 4) if requiring else 1.0,
            "slots_missing": sum(s.short_by for s in requiring),
            "vms_processed": self.processed, "vms_deferred": self.deferred,
            "reserved_cpu": sum(r.resources.get("cpu", 0) for r in self.reservations),
            "reserved_memory_mb": sum(r.resources.get("memory_mb", 0) for r in self.reservations),
        }

    @property
    def changed_anything(self):
        return bool(self.created or self.changed or self.deleted)

    def reservations_by_name(self) -> Dict[str, Reservation]:
        return {r.name: r for r in self.reservations}

    def to_dict(self):
        return {"summary": self.summary, "reservations": [r.to_dict() for r in self.reservations],
                "created": list(self.created), "changed": list(self.changed),
                "deleted": [d.to_dict() for d in self.deleted],
                "removals": [r.to_dict() for r in self.removals],
                "vm_status": [s.to_dict() for s in self.vm_status]}
