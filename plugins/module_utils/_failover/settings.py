"""Settings of the failover reconcile cycle, checked with errors that name the option."""
from dataclasses import dataclass, field

from ansible_collections.resilient.virt.plugins.module_utils._convert import parse_duration
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error
from ansible_collections.resilient.virt.plugins.module_utils._failover.constraints import (
    validate_requirements)

__all__ = ("FailoverSettings", "DEFAULT_REVALIDATION_INTERVAL", "DEFAULT_CREATOR",
           "DEFAULT_MAX_CHANGES")

DEFAULT_REVALIDATION_INTERVAL = 1800.0
DEFAULT_CREATOR = "resilient.virt"
DEFAULT_MAX_CHANGES = 500


@dataclass
class FailoverSettings:
    """``requirements``: flavor pattern -> slots; ``max_vms_to_process`` <= 0: all VMs;
    ``revalidation_interval``: seconds between checks of an acknowledged reservation;
    ``limit_one_new_per_hypervisor``: at most one new reservation per hypervisor per cycle;
    ``max_changes``: slots a cycle may move between reservations to consolidate the plan or
    move it towards the plan built from nothing (0: none)."""

    requirements: dict[str, int] = field(default_factory=dict)
    max_vms_to_process: int = 0
    revalidation_interval: float = DEFAULT_REVALIDATION_INTERVAL
    limit_one_new_per_hypervisor: bool = True
    max_changes: int = DEFAULT_MAX_CHANGES
    creator: str = DEFAULT_CREATOR

    @classmethod
    def from_dict(cls, data, path="failover"):
        """Settings from a module option dict; unknown keys are an error listing the valid ones.

        Errors name ``<path>.<key>``, or just ``<key>`` when ``path`` is empty (top-level options).
        """
        at = (path + ".") if path else ""
        data = dict(data or {})
        known = ("requirements", "max_vms_to_process", "revalidation_interval",
                 "limit_one_new_per_hypervisor", "max_changes", "creator")
        unknown = sorted(k for k in data if k not in known)
        if unknown:
            raise field_error(at + unknown[0], "is not a setting; use one of %s" % ", ".join(known))
        out = cls(requirements=validate_requirements(data.get("requirements"), at + "requirements"))
        max_vms = data.get("max_vms_to_process", 0)
        if isinstance(max_vms, bool) or not isinstance(max_vms, int) or max_vms < 0:
            raise field_error(at + "max_vms_to_process",
                              "must be a whole number >= 0 (0 = all VMs), got %r" % (max_vms,))
        out.max_vms_to_process = max_vms
        max_changes = data.get("max_changes", DEFAULT_MAX_CHANGES)
        if isinstance(max_changes, bool) or not isinstance(max_changes, int) or max_changes < 0:
            raise field_error(at + "max_changes",
                              "must be a whole number >= 0 (0 = no consolidation), got %r"
                              % (max_changes,))
        out.max_changes = max_changes
        if data.get("revalidation_interval") is not None:
            name = at + "revalidation_interval"
            out.revalidation_interval = parse_duration(data["revalidation_interval"], name)
            if out.revalidation_interval < 0:
                raise field_error(name, "must not be negative, e.g. 30m")
        limit = data.get("limit_one_new_per_hypervisor", True)
        if not isinstance(limit, bool):
            raise field_error(at + "limit_one_new_per_hypervisor", "must be true or false")
        out.limit_one_new_per_hypervisor = limit
        creator = data.get("creator", DEFAULT_CREATOR)
        if not isinstance(creator, str) or not creator:
            raise field_error(at + "creator", "must be a non-empty string")
        out.creator = creator
        return out
