# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The VM spec every backend validates: the common head of its JSON Schema, and every problem of a
spec named by its field path (``disks[0].size_gb``). jsonschema is imported on the create path
only."""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, NotSupported, field_errors)

__all__ = ("NAME_PATTERN", "MAC_PATTERN", "STRING", "spec_schema", "field_path", "check_spec",
           "errors_of")

NAME_PATTERN = r"^[^/\x00-\x1f\x7f]+$"
MAC_PATTERN = r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$"
STRING = {"type": "string", "minLength": 1}
_MESSAGES = {("name", "pattern"): "must not contain '/' or control characters"}


def spec_schema(properties):
    """JSON Schema (draft 7) of a VM spec: name, vcpus, memory_mb (required) and metadata,
    extended or overridden by the backend's ``properties``; unknown fields are errors."""
    common = {
        "name": {"type": "string", "minLength": 1, "pattern": NAME_PATTERN},
        "vcpus": {"type": "integer", "minimum": 1},
        "memory_mb": {"type": "integer", "minimum": 1},
        "metadata": {"type": "object", "propertyNames": {"minLength": 1},
                     "additionalProperties": {"type": ["string", "number", "boolean"]}},
    }
    common.update(properties)
    return {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "additionalProperties": False, "required": ["name", "vcpus", "memory_mb"],
            "properties": common}


def field_path(parts):
    """``["disks", 0, "size_gb"]`` -> ``disks[0].size_gb`` (``spec`` for the whole spec)."""
    out = ""
    for part in parts:
        out += "[%d]" % part if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "spec"


def _schema_errors(schema, spec, messages):
    from jsonschema import Draft7Validator

    for err in Draft7Validator(schema).iter_errors(spec):
        parts = list(err.absolute_path)
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            known = ", ".join(sorted(err.schema.get("properties", {})))
            for key in sorted(set(err.instance) - set(err.schema.get("properties", {}))):
                yield field_path(parts + [key]), "unknown field (a typo?); known fields: %s" % known
        elif err.validator == "required":
            for key in err.validator_value:
                if key not in err.instance:
                    yield field_path(parts + [key]), "is required"
        else:
            leaf = parts[-1] if parts else None
            yield field_path(parts), messages.get((leaf, err.validator), err.message)


def check_spec(schema, spec, messages=None, more=()):
    """Raise one InvalidSpec listing every problem of ``spec``: against ``schema`` (``messages``
    maps (field, keyword) to a friendlier text), then the backend's own ``more`` (path, message)
    pairs; each problem once."""
    texts = dict(_MESSAGES)
    texts.update(messages or {})
    errors = []
    for path, message in list(_schema_errors(schema, spec, texts)) + list(more):
        if {"path": path, "message": message} not in errors:
            errors.append({"path": path, "message": message})
    if errors:
        raise field_errors(errors, "invalid VM spec")


def errors_of(validate, spec):
    """The ``{path, message}`` problems ``validate(spec)`` (a backend's spec check) raises as
    InvalidSpec; none when it passes, or refuses a field the backend does not have (the create
    itself says so)."""
    try:
        validate(spec)
    except InvalidSpec as err:
        return list((err.details or {}).get("errors") or [])
    except NotSupported:
        return []
    return []
