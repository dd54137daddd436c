"""Map pyVmomi faults and vSphere connection failures into the error taxonomy.

Faults are recognised by their vmodl class names along the MRO (most specific first), so this
module never imports pyVmomi. Network failures (refused, reset, socket timeouts) are left to
the standard classifier of ``errors.py``.
"""
import http.client

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotFound, NotSupported, QuotaExceeded, Timeout, Unauthorized,
    Unavailable, classify_http)

__all__ = ("classify_fault", "fault_name", "SESSION_LOST")

# vmodl class name -> taxonomy class. The first name found walking the MRO leaf-first wins.
FAULTS = {
    "vim.fault.InvalidLogin": Unauthorized,
    "vim.fault.NotAuthenticated": Unavailable,  # session expired: reconnecting helps
    "vim.fault.NoPermission": Unauthorized,
    "vmodl.fault.SecurityError": Unauthorized,
    "vmodl.fault.ManagedObjectNotFound": NotFound,
    "vim.fault.NotFound": NotFound,
    "vim.fault.FileNotFound": NotFound,
    "vim.fault.DuplicateName": Conflict,
    "vim.fault.AlreadyExists": Conflict,
    "vim.fault.FileAlreadyExists": Conflict,
    "vim.fault.FileLocked": Conflict,  # another host holds the VM's files (recover, power on)
    "vim.fault.InvalidState": Conflict,
    "vim.fault.TaskInProgress": Conflict,
    "vim.fault.ResourceInUse": Conflict,
    "vim.fault.ConcurrentAccess": Conflict,
    "vim.fault.ToolsUnavailable": Conflict,
    "vim.fault.CpuHotPlugNotSupported": Conflict,  # the running VM refuses: power it off
    "vim.fault.MemoryHotPlugNotSupported": Conflict,
    "vim.fault.DeviceHotPlugNotSupported": Conflict,
    "vim.fault.MigrationFault": Conflict,  # vCenter refuses this move (vMotion checks)
    "vim.fault.CustomizationPending": Conflict,
    "vim.fault.CustomizationFault": InvalidSpec,  # a guest it cannot customize, NICs that differ
    "vmodl.fault.InvalidArgument": InvalidSpec,
    "vmodl.fault.InvalidRequest": InvalidSpec,
    "vmodl.fault.InvalidType": InvalidSpec,
    "vim.fault.InvalidName": InvalidSpec,
    "vim.fault.InvalidDatastore": InvalidSpec,
    "vim.fault.VmConfigFault": InvalidSpec,
    "vmodl.fault.NotSupported": NotSupported,
    "vmodl.fault.NotImplemented": NotSupported,
    "vmodl.fault.MethodNotFound": NotSupported,
    "vim.fault.InsufficientResourcesFault": QuotaExceeded,
    "vim.fault.NoDiskSpace": QuotaExceeded,
    "vim.fault.OutOfBounds": QuotaExceeded,  # e.g. a host's limit of registered VMs
    "vim.fault.HostConnectFault": Unavailable,
    "vmodl.fault.HostCommunication": Unavailable,
    "vmodl.fault.SystemError": Unavailable,
    "vim.fault.Timedout": Timeout,
}
SESSION_LOST = "vim.fault.NotAuthenticated"
# What to do about some faults, appended to their message.
_HINTS = {
    "vim.fault.InvalidLogin": "check provider.username and provider.password",
    "vim.fault.NoPermission": "grant the user a role with the missing privilege",
    "vim.fault.FileLocked": "another host still holds a lock on the VM's files: make sure the "
                            "host it ran on is off (fenced) and run again once its locks expired",
    "vim.fault.ToolsUnavailable": "VMware Tools do not run in the guest; power the VM off "
                                  "instead",
    "vim.fault.CpuHotPlugNotSupported": "power the VM off first (vSphere keeps no changes for "
                                        "the next start)",
    "vim.fault.MemoryHotPlugNotSupported": "power the VM off first (vSphere keeps no changes "
                                           "for the next start)",
    "vim.fault.DeviceHotPlugNotSupported": "power the VM off first (vSphere keeps no changes "
                                           "for the next start)",
    "vim.fault.CustomizationFault": "customization needs a guest OS that vCenter customizes "
                                    "(Linux, with VMware Tools in the template); remove "
                                    "customization or choose another template",
}
# Fault attributes worth showing, in this order.
_DETAILS = ("invalidProperty", "name", "existingState", "requestedState", "file", "property",
            "reason")


def fault_name(exc):
    """The vmodl name of a pyVmomi fault (``vim.fault.InvalidLogin``), else None."""
    name = type(exc).__name__
    return name if name.startswith(("vim.", "vmodl.")) else None


def _fault_message(exc, name):
    text = getattr(exc, "msg", None) or ""
    if not text:
        messages = getattr(exc, "faultMessage", None) or []
        text = "; ".join(str(getattr(m, "message", "") or "") for m in messages).strip("; ")
    parts = []
    for attr in _DETAILS:
        value = getattr(exc, attr, None)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            parts.append("%s=%s" % (attr, value))
    obj = getattr(exc, "obj", None)
    # session-scoped objects (views) carry the session key in their id: never show it
    if obj is not None and hasattr(obj, "_moId") and not obj._moId.startswith("session["):
        parts.append("obj=%s" % obj._moId)
    short = name.rsplit(".", 1)[-1]
    out = "vSphere fault %s" % short
    if text:
        out += ": %s" % text
    if parts:
        out += " (%s)" % ", ".join(parts)
    return out


def _http_status(exc):
    """Status of pyVmomi's bare ``HTTPException("503 Service Unavailable")``, else None."""
    if exc.__class__ is not http.client.HTTPException:
        return None
    head = str(exc).split(" ", 1)[0]
    return int(head) if head.isdigit() else None


def classify_fault(exc):
    """VirtError for a known pyVmomi fault or vSphere HTTP failure, else None.

    Unlisted faults return None: the standard classifier then makes them Internal.
    """
    for klass in type(exc).__mro__:
        kind = FAULTS.get(klass.__name__)
        if kind is not None:
            name = fault_name(exc)
            message = _fault_message(exc, name)
            hint = _HINTS.get(klass.__name__)
            if hint:
                message += "; " + hint
            return kind(message, cause=exc, details={"fault": name})
    status = _http_status(exc)
    if status is not None:
        return classify_http(status, message="vSphere SOAP endpoint answered %s" % exc)
    if exc.__class__ is Exception and "is down or is not a VIM server" in str(exc):
        return Unavailable("vSphere endpoint does not answer as a vSphere API server: %s" % exc,
                           cause=exc)
    return None
