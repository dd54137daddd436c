"""Data shapes of failover reservations: hypervisors, VMs and reservations.

Memory is in MiB everywhere (``memory_mb``). ``from_dict`` checks every field it reads and raises
:class:`InvalidSpec` naming the field path and the fix; keys it does not know are ignored, so a
provider's full VM or hypervisor dict can be passed as it is.
"""
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec

__all__ = ("Hypervisor", "VM", "Reservation")


def _fail(path, message):
    raise InvalidSpec("%s: %s" % (path, message), details={"errors": [{"path": path, "message": message}]})


def _text(data, key, path, default=None, required=False):
    value = data.get(key, default)
    if value is None:
        if required:
            _fail("%s.%s" % (path, key), "is required; give a non-empty string")
        return default
    if not isinstance(value, str) or (required and not value):
        _fail("%s.%s" % (path, key), "must be a non-empty string, got %r" % (value,))
    return value


def _count(data, key, path, default=None):
    value = data.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _fail("%s.%s" % (path, key), "must be a whole number >= 0, got %r" % (value,))
    return value


def _mapping(data, key, path, value_check):
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


def _extra_specs(data, path):
    """Flavor extra specs: strings; a ``trait:NAME`` spec is ``required`` or ``forbidden``."""
    specs = _mapping(data, "extra_specs", path, lambda v: isinstance(v, str))
    for key, value in specs.items():
        if key.startswith("trait:") and value.strip().lower() not in TRAIT_VALUES:
            _fail("%s.extra_specs[%r]" % (path, key),
                  "must be required or forbidden, got %r" % (value,))
    return specs


def _is_text(value):
    return isinstance(value, str) and bool(value)


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _optional_time(data, key, path):
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
    traits: FrozenSet[str] = frozenset()
    used_cpu: Optional[int] = None
    used_memory_mb: Optional[int] = None

    def to_dict(self):
        return {"name": self.name, "az": self.az, "cpu": self.cpu, "memory_mb": self.memory_mb,
                "traits": sorted(self.traits), "used_cpu": self.used_cpu,
                "used_memory_mb": self.used_memory_mb}

    @classmethod
    def from_dict(cls, data, path="hypervisor"):
        if not isinstance(data, dict):
            _fail(path, "must be a mapping")
        traits = data.get("traits") or ()
        if not isinstance(traits, (list, tuple, set, frozenset)) or not all(_is_text(t) for t in traits):
            _fail(path + ".traits", "must be a list of trait names such as CUSTOM_HANA")
        return cls(name=_text(data, "name", path, required=True), az=_text(data, "az", path, ""),
                   cpu=_count(data, "cpu", path, 0), memory_mb=_count(data, "memory_mb", path, 0),
                   traits=frozenset(traits), used_cpu=_count(data, "used_cpu", path),
                   used_memory_mb=_count(data, "used_memory_mb", path))


@dataclass
class VM:
    """One VM. ``host`` is the hypervisor it runs on now (``hypervisor`` is accepted too)."""

    uuid: str
    host: str
    az: str = ""
    flavor: str = ""
    vcpus: Optional[int] = None
    memory_mb: Optional[int] = None
    extra_specs: Dict[str, str] = field(default_factory=dict)

    def to_dict(self):
        return {"uuid": self.uuid, "host": self.host, "az": self.az, "flavor": self.flavor,
                "vcpus": self.vcpus, "memory_mb": self.memory_mb,
                "extra_specs": dict(self.extra_specs)}

    @classmethod
    def from_dict(cls, data, path="vm"):
        if not isinstance(data, dict):
            _fail(path, "must be a mapping")
        host_key = "hypervisor" if data.get("host") is None and "hypervisor" in data else "host"
        return cls(uuid=_text(data, "uuid", path, required=True),
                   host=_text(data, host_key, path, required=True),
                   az=_text(data, "az", path, ""), flavor=_text(data, "flavor", path, ""),
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
    resources: Dict[str, int] = field(default_factory=dict)
    allocations: Dict[str, str] = field(default_factory=dict)
    creator: str = ""
    last_changed: Optional[str] = None
    acknowledged_at: Optional[str] = None
    conditions: List[dict] = field(default_factory=list)

    def to_dict(self):
        return {"name": self.name, "host": self.host, "az": self.az,
                "resources": dict(self.resources), "allocations": dict(sorted(self.allocations.items())),
                "creator": self.creator, "last_changed": self.last_changed,
                "acknowledged_at": self.acknowledged_at,
                "conditions": [dict(c) for c in self.conditions]}

    @classmethod
    def from_dict(cls, data, path="reservation"):
        if not isinstance(data, dict):
            _fail(path, "must be a mapping")
        conditions = data.get("conditions") or []
        if not isinstance(conditions, list) or not all(isinstance(c, dict) for c in conditions):
            _fail(path + ".conditions", "must be a list of condition mappings")
        return cls(name=_text(data, "name", path, required=True),
                   host=_text(data, "host", path, required=True), az=_text(data, "az", path, ""),
                   resources=_mapping(data, "resources", path, _is_count),
                   allocations=_mapping(data, "allocations", path, _is_text),
                   creator=_text(data, "creator", path, ""),
                   last_changed=_optional_time(data, "last_changed", path),
                   acknowledged_at=_optional_time(data, "acknowledged_at", path),
                   conditions=[dict(c) for c in conditions])
