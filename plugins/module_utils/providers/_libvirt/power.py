"""Power actions on a libvirt domain: one libvirt call each, except a guest shutdown, which is
waited on until the domain is off.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, Timeout, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.library import (
    PAUSED, SHUTOFF)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import POWER_ACTIONS

__all__ = ("DEFAULT_SHUTDOWN_TIMEOUT", "power")

DEFAULT_SHUTDOWN_TIMEOUT = 60.0
POLL_INTERVAL = 0.25
_RUNNING = 1


def power(provider, name, action, timeout=None):
    """``on`` also resumes a paused VM and restores a suspended one (its managed save image);
    ``off`` of a suspended VM drops its save image; ``suspend`` saves a running VM's memory
    (managed save). The VM dict after the action, ``changed`` False when it was already done."""
    if action not in POWER_ACTIONS:
        raise field_error("action", "%r: use one of %s" % (action, ", ".join(POWER_ACTIONS)))
    session = provider.session()
    dom = session.lookup(name)
    state = dom.state()[0]
    saved = state == SHUTOFF and bool(dom.hasManagedSaveImage(0))
    changed = True
    if action == "on" and state in PAUSED:
        dom.resume()
    elif action == "on" and state != _RUNNING:
        dom.create()  # restores a managed save image when there is one
    elif action == "off" and state != SHUTOFF:
        dom.destroy()
    elif action == "off" and saved:
        dom.managedSaveRemove(0)
    elif action == "shutdown" and state != SHUTOFF:
        _shutdown(dom, name, DEFAULT_SHUTDOWN_TIMEOUT if timeout is None else timeout)
    elif action == "reboot":
        if state == SHUTOFF:
            raise Conflict("VM %r is stopped, so it cannot be rebooted; power it on instead"
                           % name)
        dom.reboot(0)
    elif action == "pause" and state == _RUNNING:
        dom.suspend()
    elif action == "suspend" and state != SHUTOFF:
        dom.managedSave(0)
    elif action in ("pause", "suspend") and state == SHUTOFF and not (
            action == "suspend" and saved):
        raise Conflict("VM %r is stopped, so it cannot be %s; power it on first"
                       % (name, "paused" if action == "pause" else "suspended"))
    else:
        changed = False
    return dict(session.describe(dom), changed=changed)


def _shutdown(dom, name, timeout):
    end = time.monotonic() + timeout
    dom.shutdown()
    while dom.state()[0] != SHUTOFF:
        if time.monotonic() >= end:
            raise Timeout("VM %r did not shut down within %gs (the guest ignored or is still "
                          "handling the ACPI request)" % (name, timeout),
                          details={"timeout": timeout})
        time.sleep(min(POLL_INTERVAL, max(0.0, end - time.monotonic())))
