"""Power actions on a Proxmox VE VM: each a PVE task (``status/start``, ``stop``, ``shutdown``,
``reboot``, ``suspend``, ``resume``), followed by its UPID.

``pause`` suspends the vCPUs (memory kept in the host), ``suspend`` hibernates the VM (its memory
saved to a state volume, the VM stopped with the lock ``suspended``); ``on`` resumes either. A
guest shutdown is PVE's own: its task asks the guest (ACPI, or the guest agent when enabled) and
gives up at the timeout, which is then a Timeout here.
"""
import math

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, Timeout, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import POWER_ACTIONS
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import wait

__all__ = ("DEFAULT_SHUTDOWN_TIMEOUT", "power")

DEFAULT_SHUTDOWN_TIMEOUT = 60.0
TASK_MARGIN = 10.0  # seconds the shutdown task may take beyond its own timeout to report


def power(provider, name, action, timeout=None):
    """The VM dict after ``action``, ``changed`` False when the VM already was in that state."""
    if action not in POWER_ACTIONS:
        raise field_error("action", "%r: use one of %s" % (action, ", ".join(POWER_ACTIONS)))
    session = provider.session()
    record = session.find_vm(name)
    state = session.describe(record, name, guest=False)["state"]
    path = ("nodes", record["node"], "qemu", record["vmid"], "status")
    what = "%s of VM %r" % (action, name)
    changed = True
    if action == "on" and state == "paused":
        wait(session, session.post(*path + ("resume",)), what, timeout)
    elif action == "on" and state in ("stopped", "suspended"):
        wait(session, session.post(*path + ("start",)), what, timeout)
    elif action == "off" and state == "suspended":
        raise Conflict("VM %r is suspended (hibernated); power it on first, then off" % name)
    elif action == "off" and state in ("running", "paused"):
        wait(session, session.post(*path + ("stop",)), what, timeout)
    elif action == "shutdown" and state in ("running", "paused"):
        _shutdown(session, path, what, name,
                  DEFAULT_SHUTDOWN_TIMEOUT if timeout is None else timeout)
    elif action == "reboot":
        if state != "running":
            raise Conflict("VM %r is %s, so it cannot be rebooted; power it on instead"
                           % (name, state))
        wait(session, session.post(*path + ("reboot",)), what, timeout)
    elif action == "pause" and state == "running":
        wait(session, session.post(*path + ("suspend",)), what, timeout)
    elif action == "suspend" and state in ("running", "paused"):
        wait(session, session.post(*path + ("suspend",), todisk=1), what, timeout)
    elif action in ("pause", "suspend") and state == "stopped":
        raise Conflict("VM %r is stopped, so it cannot be %s; power it on first"
                       % (name, "paused" if action == "pause" else "suspended"))
    elif action == "pause" and state == "suspended":
        raise Conflict("VM %r is suspended (hibernated), so it cannot be paused; power it on "
                       "first" % name)
    else:
        changed = False
    return dict(session.describe(session.find_vm(name), name), changed=changed)


def _shutdown(session, path, what, name, timeout):
    seconds = max(1, int(math.ceil(timeout)))
    upid = session.post(*path + ("shutdown",), timeout=seconds, forceStop=0)
    try:
        wait(session, upid, what, seconds + TASK_MARGIN)
    except Timeout as err:
        raise Timeout("VM %r did not shut down within %gs (the guest ignored or is still "
                      "handling the request; Proxmox: %s)" % (name, timeout, err.message),
                      details={"timeout": timeout, "task_id": upid}) from err
