"""Fault injector (a test plugin): a migration's target hypervisor hangs as the migration starts.

Loaded by the modules through ``RESILIENT_VIRT_PLUGINS=migrate_freeze_plugin`` (with this
directory on ``PYTHONPATH``). When :data:`FREEZE_ENV` holds a PID (the target's libvirtd),
libvirt-python's ``virDomain.migrate3`` is wrapped once: just before the real call, the PID gets
SIGSTOP, so the migration starts with everything on the target made (its volumes) and then
hangs on the target. Nothing thaws it: the test does, once the task has ended. The request
itself is the library's own, unchanged.
"""
import os
import signal

import libvirt

FREEZE_ENV = "RESILIENT_VIRT_TEST_MIGRATE_FREEZE"
_original = libvirt.virDomain.migrate3


def _frozen_first(dom, dconn, params, flags):
    pid = os.environ.get(FREEZE_ENV)
    if pid:
        os.kill(int(pid), signal.SIGSTOP)
    return _original(dom, dconn, params, flags)


libvirt.virDomain.migrate3 = _frozen_first
