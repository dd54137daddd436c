"""Observer plugin for the fault tests: one JSON line per provider attempt.

Loaded by the modules through ``RESILIENT_VIRT_PLUGINS=observer_plugin`` (with this directory on
``PYTHONPATH``); it appends to the file named by :data:`ATTEMPTS_ENV`, so the tests count the
attempts that reached for the provider without asking the circuit breaker.
"""
import json
import os

import pluggy

ATTEMPTS_ENV = "RESILIENT_VIRT_TEST_ATTEMPTS_FILE"
hookimpl = pluggy.HookimplMarker("resilient_virt")


@hookimpl
def resilient_virt_before_call(provider, operation):
    path = os.environ.get(ATTEMPTS_ENV)
    if not path:
        return
    line = json.dumps({"provider": provider.key, "operation": operation, "pid": os.getpid()})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())  # one write in append mode: lines never interleave
    finally:
        os.close(fd)


def read_attempts(path):
    """The attempts recorded in ``path`` (a list of dicts), [] when there were none."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
