"""Power actions on a vSphere VM: each a vSphere task, except a guest shutdown or reboot,
which VMware Tools carry out (a reboot without them is a reset).
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotSupported, Timeout, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import POWER_ACTIONS

__all__ = ("DEFAULT_SHUTDOWN_TIMEOUT", "power")

DEFAULT_SHUTDOWN_TIMEOUT = 60.0


def power(provider, name, action, timeout=None):
    """``on`` also resumes a suspended VM; ``suspend`` saves a running VM's memory to disk
    (SuspendVM_Task); ``pause`` is NotSupported: vSphere cannot stop a VM's vCPUs and keep
    its memory in the host."""
    if action not in POWER_ACTIONS:
        raise field_error("action", "%r: use one of %s" % (action, ", ".join(POWER_ACTIONS)))
    if action == "pause":
        raise NotSupported("vSphere cannot pause a VM (stop its vCPUs and keep its memory in "
                           "the host); use suspend (memory saved to disk) or off instead")
    session = provider.session()
    ref = session.find_vm(name)
    state = session.power_state(ref)
    changed = True
    if action == "suspend" and state == "poweredOff":
        raise Conflict("VM %r is stopped, so it cannot be suspended; power it on first"
                       % name)
    if action == "suspend" and state != "suspended":
        session.wait(ref.SuspendVM_Task(), "suspending VM %r" % name, timeout)
    elif action == "on" and state != "poweredOn":
        session.wait(ref.PowerOnVM_Task(), "powering on VM %r" % name, timeout)
    elif action == "off" and state != "poweredOff":
        session.wait(ref.PowerOffVM_Task(), "powering off VM %r" % name, timeout)
    elif action == "shutdown" and state != "poweredOff":
        _shutdown(session, ref, name, state,
                  DEFAULT_SHUTDOWN_TIMEOUT if timeout is None else timeout)
    elif action == "reboot":
        _reboot(session, ref, name, state, timeout)
    else:
        changed = False
    return dict(session.describe(ref, name), changed=changed)


def _shutdown(session, ref, name, state, timeout):
    if state == "suspended":
        raise Conflict("VM %r is suspended, so its guest cannot shut down; power it on "
                       "first or power it off" % name)
    ref.ShutdownGuest()
    end = time.monotonic() + timeout
    while session.power_state(ref) != "poweredOff":
        if time.monotonic() >= end:
            raise Timeout("VM %r did not shut down within %gs (the guest ignored or is still "
                          "handling the request)" % (name, timeout),
                          details={"timeout": timeout})
        time.sleep(min(0.25, max(0.0, end - time.monotonic())))


def _reboot(session, ref, name, state, timeout):
    """Guest reboot when VMware Tools run in the guest, else a hard reset."""
    if state != "poweredOn":
        raise Conflict("VM %r is not running, so it cannot be rebooted; power it on instead"
                       % name)
    if str(ref.guest.toolsRunningStatus) == "guestToolsRunning":
        ref.RebootGuest()
    else:
        session.wait(ref.ResetVM_Task(), "resetting VM %r" % name, timeout)
