"""Observer plugin for the fault tests: one JSON line per provider attempt.

Loaded by the modules through ``RESILIENT_VIRT_PLUGINS=observer_plugin`` (with this directory on
``PYTHONPATH``); it appends to the file named by :data:`ATTEMPTS_ENV` (provider, operation, VM
name when there is one, epoch time), so the tests count the attempts that reached for the provider without
asking the circuit breaker. With
:data:`OUTCOMES_ENV` set it also appends every attempt's outcome (``ok``, ``error``, ``timeout``)
to that file: an attempt whose look-before-retry found the work done is an ``ok`` outcome with
no line in the attempts file.
"""
import json
import os
import time

import pluggy

ATTEMPTS_ENV = "RESILIENT_VIRT_TEST_ATTEMPTS_FILE"
OUTCOMES_ENV = "RESILIENT_VIRT_TEST_OUTCOMES_FILE"
hookimpl = pluggy.HookimplMarker("resilient_virt")


def _append(path, record):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())  # one append: lines never interleave
    finally:
        os.close(fd)


@hookimpl
def resilient_virt_before_call(provider, operation, arguments):
    path = os.environ.get(ATTEMPTS_ENV)
    if path:
        name = arguments.get("name") or (arguments.get("spec") or {}).get("name")
        _append(path, {"provider": provider.key, "operation": operation, "name": name,
                       "pid": os.getpid(), "at": time.time()})


@hookimpl
def resilient_virt_after_call(provider, operation, outcome, duration):
    path = os.environ.get(OUTCOMES_ENV)
    if path:
        _append(path, {"provider": provider.key, "operation": operation, "outcome": outcome,
                       "duration": duration, "pid": os.getpid()})


def read_attempts(path):
    """The attempts recorded in ``path`` (a list of dicts), [] when there were none."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
