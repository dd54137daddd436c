"""Kubernetes-style status conditions for VMs and providers.

A condition is a dict ``type``, ``status`` ("True"/"False"/"Unknown"), ``reason`` (CamelCase),
``message`` and ``lastTransitionTime`` (RFC 3339 UTC, e.g. "2026-11-21T10:00:00Z"), which
changes only when ``status`` changes.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._time import format_time
from ansible_collections.resilient.virt.plugins.module_utils.errors import find_error, redact

__all__ = (
    "READY", "PROVISIONING", "PROVIDER_RUNTIME_READY", "PROVIDER_AVAILABLE", "VM_READY",
    "PROVIDER_ERROR", "VALIDATION_ERROR", "CREATE_FAILED", "DEPLOYMENT_READY",
    "DEPLOYMENT_ERROR", "HEALTH_CHECK_PASSED", "HEALTH_CHECK_FAILED", "make_condition",
    "set_condition", "vm_ready", "vm_provider_error", "vm_validation_error",
    "vm_create_failed", "provider_runtime_ready", "provider_available",
)

# Condition types
READY = "Ready"
PROVISIONING = "Provisioning"
PROVIDER_RUNTIME_READY = "ProviderRuntimeReady"
PROVIDER_AVAILABLE = "ProviderAvailable"

# Reasons
VM_READY = "VMReady"
PROVIDER_ERROR = "ProviderError"
VALIDATION_ERROR = "ValidationError"
CREATE_FAILED = "CreateFailed"
DEPLOYMENT_READY = "DeploymentReady"
DEPLOYMENT_ERROR = "DeploymentError"
HEALTH_CHECK_PASSED = "HealthCheckPassed"
HEALTH_CHECK_FAILED = "HealthCheckFailed"

_STATUSES = ("True", "False", "Unknown")


def _timestamp(now):
    if now is None:
        now = time.time()
    elif hasattr(now, "timestamp"):
        now = now.timestamp()
    return format_time(now)


def make_condition(type, status, reason, message="", now=None):
    """Condition dict; ``status`` is True/False/None or "True"/"False"/"Unknown"; ``now`` epoch or datetime."""
    if status is True or status is False:
        status = str(status)
    elif status is None:
        status = "Unknown"
    if status not in _STATUSES:
        raise ValueError("condition status must be one of %s, got %r" % (", ".join(_STATUSES), status))
    return {"type": type, "status": status, "reason": reason, "message": message or "",
            "lastTransitionTime": _timestamp(now)}


def set_condition(conditions, cond):
    """New list with ``cond`` replacing the condition of the same type (or appended).

    The previous ``lastTransitionTime`` is kept when the status did not change.
    """
    out = []
    replaced = False
    for old in conditions or ():
        if old.get("type") == cond["type"]:
            new = dict(cond)
            if old.get("status") == cond["status"] and old.get("lastTransitionTime"):
                new["lastTransitionTime"] = old["lastTransitionTime"]
            out.append(new)
            replaced = True
        else:
            out.append(dict(old))
    if not replaced:
        out.append(dict(cond))
    return out


def _message(err):
    found = find_error(err) if isinstance(err, BaseException) else None
    return found.message if found is not None else redact(err)


def vm_ready(message="", now=None):
    return make_condition(READY, "True", VM_READY, message, now)


def vm_provider_error(err, now=None):
    return make_condition(READY, "False", PROVIDER_ERROR, _message(err), now)


def vm_validation_error(err, now=None):
    return make_condition(READY, "False", VALIDATION_ERROR, _message(err), now)


def vm_create_failed(err, now=None):
    return make_condition(PROVISIONING, "False", CREATE_FAILED, _message(err), now)


def provider_runtime_ready(ok, message="", now=None):
    if ok:
        return make_condition(PROVIDER_RUNTIME_READY, "True", DEPLOYMENT_READY, message, now)
    return make_condition(PROVIDER_RUNTIME_READY, "False", DEPLOYMENT_ERROR, message, now)


def provider_available(ok, message="", now=None):
    if ok:
        return make_condition(PROVIDER_AVAILABLE, "True", HEALTH_CHECK_PASSED, message, now)
    return make_condition(PROVIDER_AVAILABLE, "False", HEALTH_CHECK_FAILED, message, now)
