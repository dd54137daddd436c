# -*- coding: utf-8 -*-
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every problem of a VM spec against its JSON Schema, each named by its field path."""


def field_path(parts):
    """``["disks", 0, "size_gb"]`` -> ``disks[0].size_gb`` (``spec`` for the whole spec)."""
    out = ""
    for part in parts:
        out += "[%d]" % part if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "spec"


def schema_errors(schema, spec, messages):
    """Yield (path, message) for every violation; ``messages`` maps (field, keyword) to a friendlier text.

    jsonschema is imported here, on the create path only.
    """
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
