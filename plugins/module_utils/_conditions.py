"""Kubernetes-style status conditions for VMs and providers.

A condition is a dict ``type``, ``status`` (a boolean, or None when unknown, so that a playbook
can test it in ``when:``), ``reason`` (CamelCase), ``message`` and ``lastTransitionTime``
(RFC 3339 UTC, e.g. "2026-11-21T10:00:00Z"), which changes only when ``status`` changes. The
strings "True", "False" and "Unknown" of records written by earlier versions read as those.
A condition set by a failure has no message: the task's ``msg`` carries it, once.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._time import format_time

__all__ = (
    "READY", "PROVISIONING", "PROVIDER_RUNTIME_READY", "PROVIDER_AVAILABLE", "VM_READY",
    "PROVIDER_ERROR", "VALIDATION_ERROR", "CREATE_FAILED", "DEPLOYMENT_READY",
    "DEPLOYMENT_ERROR", "HEALTH_CHECK_PASSED", "HEALTH_CHECK_FAILED", "make_condition",
    "set_condition", "status_of", "vm_ready", "vm_provider_error", "vm_validation_error",
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

_STATUSES = {True: True, False: False, None: None, "True": True, "False": False, "Unknown": None}


def _timestamp(now):
    if now is None:
        now = time.time()
    elif hasattr(now, "timestamp"):
        now = now.timestamp()
    return format_time(now)


def status_of(value):
    """A condition status as True, False or None (unknown), from those or their strings."""
    if isinstance(value, (bool, str, type(None))) and value in _STATUSES:
        return _STATUSES[value]
    raise ValueError("condition status must be true, false or null, got %r" % (value,))


def make_condition(type, status, reason, message="", now=None):
    """Condition dict; ``status`` True/False/None (or their strings); ``now`` epoch or datetime."""
    return {"type": type, "status": status_of(status), "reason": reason, "message": message or "",
            "lastTransitionTime": _timestamp(now)}


def _read(condition):
    """A copy of a stored condition with its status as a boolean (None when unreadable)."""
    out = dict(condition)
    try:
        out["status"] = status_of(out.get("status"))
    except ValueError:
        out["status"] = None
    return out


def set_condition(conditions, cond):
    """New list with ``cond`` replacing the condition of the same type (or appended).

    The previous ``lastTransitionTime`` is kept when the status did not change.
    """
    out = []
    replaced = False
    for old in conditions or ():
        old = _read(old)
        if old.get("type") == cond["type"]:
            new = dict(cond)
            if old["status"] is cond["status"] and old.get("lastTransitionTime"):
                new["lastTransitionTime"] = old["lastTransitionTime"]
            out.append(new)
            replaced = True
        else:
            out.append(old)
    if not replaced:
        out.append(dict(cond))
    return out


def vm_ready(message="", now=None):
    return make_condition(READY, True, VM_READY, message, now)


def vm_provider_error(now=None):
    return make_condition(READY, False, PROVIDER_ERROR, "", now)


def vm_validation_error(now=None):
    return make_condition(READY, False, VALIDATION_ERROR, "", now)


def vm_create_failed(now=None):
    return make_condition(PROVISIONING, False, CREATE_FAILED, "", now)


def provider_runtime_ready(ok, message="", now=None):
    if ok:
        return make_condition(PROVIDER_RUNTIME_READY, True, DEPLOYMENT_READY, message, now)
    return make_condition(PROVIDER_RUNTIME_READY, False, DEPLOYMENT_ERROR, message, now)


def provider_available(ok, message="", now=None):
    if ok:
        return make_condition(PROVIDER_AVAILABLE, True, HEALTH_CHECK_PASSED, message, now)
    return make_condition(PROVIDER_AVAILABLE, False, HEALTH_CHECK_FAILED, message, now)
