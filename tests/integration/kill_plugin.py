"""Fault injector (a test plugin): at the N-th call of an operation on a provider, SIGKILL a
process.

Loaded by the modules through ``RESILIENT_VIRT_PLUGINS=kill_plugin`` (with this directory on
``PYTHONPATH``). :data:`KILL_ENV` is ``PROVIDER_KEY COUNT PID [OPERATION]``: when the COUNT-th
OPERATION attempt (default ``create``) on PROVIDER_KEY starts in this process, PID gets SIGKILL
before the request leaves - a hypervisor's libvirtd dying in the middle of a fleet run, or, with
PID ``self``, the task's process itself killed mid-run. Counting is per process and thread-safe.
"""
import os
import signal
import threading

import pluggy

KILL_ENV = "RESILIENT_VIRT_TEST_KILL"
hookimpl = pluggy.HookimplMarker("resilient_virt")
_lock = threading.Lock()
_creates = {}


@hookimpl
def resilient_virt_before_call(provider, operation):
    spec = os.environ.get(KILL_ENV)
    if not spec:
        return
    key, count, pid, wanted = (spec.split() + ["create"])[:4]
    if provider.key != key or operation != wanted:
        return
    with _lock:
        _creates[key] = _creates.get(key, 0) + 1
        if _creates[key] != int(count):
            return
    os.kill(os.getpid() if pid == "self" else int(pid), signal.SIGKILL)
