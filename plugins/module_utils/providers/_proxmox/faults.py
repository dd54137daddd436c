"""Map Proxmox VE's errors into the error taxonomy.

PVE answers an API call that fails with an HTTP status and a message (proxmoxer raises
``ResourceException`` with ``status_code``, ``content`` and the per-parameter ``errors`` of a
400), and a task that fails ends with its message as ``exitstatus`` (``VM is locked
(backup)``). Both go through :func:`classify_message`: PVE uses 500 for most failures, so the
wording decides. proxmoxer is never imported here: its classes are recognised by name.
"""
import re

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, NotSupported, QuotaExceeded, Timeout, Unauthorized,
    Unavailable, classify_http, field_errors, redact)

__all__ = ("Busy", "LOCK_RETRY_AFTER", "classify_exception", "classify_message",
           "is_expired_ticket", "resource_error")

LOCK_RETRY_AFTER = 5.0  # seconds before trying a VM that another operation holds again
# PVE config lock values that end by themselves (another task holds the VM for a while)
_PASSING_LOCKS = ("backup", "migrate", "clone", "create", "snapshot", "snapshot-delete",
                  "rollback", "disk", "config")
# PVE parameter -> the VM spec field it comes from (InvalidSpec names the spec's field)
_FIELDS = {"memory": "memory_mb", "cores": "vcpus", "sockets": "vcpus", "name": "name",
           "tags": "tags", "onboot": "autostart", "description": "metadata",
           "storage": "placement.datastore", "target": "placement.host", "pool": "placement.resource_pool",
           "ciuser": "cloud_init.user_data", "sshkeys": "cloud_init.user_data",
           "cipassword": "cloud_init.user_data", "ipconfig": "cloud_init.network_config",
           "scsi": "disks", "virtio": "disks", "sata": "disks", "ide": "disks", "net": "interfaces"}
_DEVICE = re.compile(r"^(scsi|virtio|sata|ide|net|ipconfig)(\d+)$")


class Busy(Conflict):
    """Another PVE operation holds the VM (a backup, a migration, a config lock): the same call
    works once it ends, so it is retried (after ``retry_after``) and, being an answer, never
    counts against the circuit breaker."""

    type = "Conflict"
    retryable = True


def _spec_field(parameter):
    """The spec field a PVE parameter comes from (``net1`` -> ``interfaces[1]``), else
    ``pve.<parameter>``."""
    device = _DEVICE.match(parameter)
    if device:
        base = _FIELDS[device.group(1)]
        return base if base.startswith("cloud_init") else "%s[%s]" % (base, device.group(2))
    return _FIELDS.get(parameter, "pve.%s" % parameter)


def _lock_error(text, lock, details):
    if lock in _PASSING_LOCKS:
        return Busy("%s: another Proxmox operation holds the VM (lock %r); retried once it "
                    "ends" % (text, lock), retry_after=LOCK_RETRY_AFTER, details=details)
    return Conflict("%s: the VM keeps this lock until it is cleared (resume a suspended VM, or "
                    "`qm unlock` one that an interrupted operation left locked)" % text,
                    details=details)


# (pattern of PVE's message, function(match, text, details) -> VirtError); the first match wins
_MESSAGES = (
    (re.compile(r"VM is locked \(([\w-]+)\)"), lambda m, t, d: _lock_error(t, m.group(1), d)),
    (re.compile(r"can't lock file '[^']*' - got timeout"),
     lambda m, t, d: Busy("%s: another Proxmox task holds the VM's configuration; retried once "
                          "it ends" % t, retry_after=LOCK_RETRY_AFTER, details=d)),
    (re.compile(r"no quorum|cluster not ready"),
     lambda m, t, d: Unavailable("%s: the Proxmox cluster has lost quorum, so it takes no "
                                 "change until enough nodes are back" % t, details=d)),
    (re.compile(r"No route to host|hostname lookup .* failed|node .* seems to be offline", re.I),
     lambda m, t, d: Unavailable("%s: the node is offline or unreachable from the cluster" % t,
                                 details=d)),
    (re.compile(r"No space left on device|not enough (free )?space|out of space", re.I),
     lambda m, t, d: QuotaExceeded("%s: the storage is full; free space on it, or put the "
                                   "disks on another storage (placement.datastore)" % t,
                                   details=d)),
    (re.compile(r"Configuration file '[^']*' does not exist|does not exist$|no such VM|"
                r"no such resource|can't find file|is not available on node"),
     lambda m, t, d: NotFound(t, details=d)),
    (re.compile(r"already exists|already running|not running|is running|protection mode|"
                r"checksum mismatch|used in HA resources|is a template|if it's a template"),
     lambda m, t, d: Conflict(t, details=d)),
    (re.compile(r"got timeout|timeout waiting|timed out", re.I),
     lambda m, t, d: Timeout(t, details=d)),
    (re.compile(r"not implemented", re.I), lambda m, t, d: NotSupported(t, details=d)),
    (re.compile(r"Permission check failed|permission denied|authentication failure", re.I),
     lambda m, t, d: Unauthorized("%s; check the provider's user or API token and its "
                                  "privileges" % t, details=d)),
)


def classify_message(text, status=None, where="Proxmox VE"):
    """The VirtError of PVE's message ``text`` (an HTTP answer of ``status``, or a task's exit
    status when ``status`` is None); None when neither says anything known."""
    text = redact(str(text).strip())
    details = {"status": status} if status is not None else {}
    message = "%s: %s" % (where, text)
    for pattern, make in _MESSAGES:
        found = pattern.search(text)
        if found:
            return make(found, message, details)
    if status is None:
        return None
    err = classify_http(status, message=message)
    err.message = err.args[0]
    return err


def _parameter_errors(errors, where):
    return field_errors([{"path": _spec_field(str(name)),
                          "message": "%s refused the parameter %s: %s"
                          % (where, name, redact(" ".join(str(text).split())))}
                         for name, text in sorted(errors.items())])


def is_expired_ticket(exc):
    """True for PVE's 401 about a login ticket (expired or revoked): a new login helps."""
    return type(exc).__name__ == "ResourceException" and \
        getattr(exc, "status_code", None) == 401 and "ticket" in str(getattr(exc, "content", ""))


def resource_error(exc, where="Proxmox VE"):
    """The VirtError of proxmoxer's ResourceException: a 400's per-parameter errors become an
    InvalidSpec naming each spec field, 595 (PVE's proxy cannot reach the node) is Unavailable,
    the rest by the message (:func:`classify_message`)."""
    status = getattr(exc, "status_code", None)
    errors = getattr(exc, "errors", None)
    if status == 400 and isinstance(errors, dict) and errors:
        err = _parameter_errors(errors, where)
    elif status == 595:
        err = Unavailable("%s: %s: the node is offline or unreachable from the cluster"
                          % (where, redact(getattr(exc, "content", ""))), details={"status": 595})
    else:
        err = classify_message(getattr(exc, "content", "") or str(exc), status, where)
    err.cause = exc
    return err


def classify_exception(exc, where="Proxmox VE"):
    """VirtError for proxmoxer's exceptions, else None (the standard classifier then handles
    network and TLS failures)."""
    name = type(exc).__name__
    if name == "ResourceException":
        return resource_error(exc, where)
    if name == "AuthenticationError":
        return Unauthorized("%s refused the login (%s); check provider.username and "
                            "provider.password, or use an API token (token_id, token_secret)"
                            % (where, redact(exc)), cause=exc)
    return None
