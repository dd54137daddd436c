"""Proxmox VE tasks, followed by their UPID.

A changing call (create, clone, start, shutdown, delete...) answers at once with the UPID of a
task that does the work on a node (``UPID:<node>:<pid>:<pstart>:<starttime>:<type>:<id>:<user>:``).
:func:`wait` names the UPID to the retry first (``Provider.started``), so that an attempt
abandoned at its time limit is followed to its end through ``task_status`` instead of being
started again, then polls the task's status until it stops: an exit status of ``OK`` (or
PVE's ``WARNINGS: n``) is success, anything else the task's error in the taxonomy.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import Internal, Timeout, field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.faults import (
    classify_message)

__all__ = ("upid_node", "status_of", "wait", "task_error")

FIRST_POLL = 0.02
MAX_POLL = 1.0


def upid_node(upid):
    """The node a UPID names; InvalidSpec naming ``task_id`` when it is not a UPID."""
    parts = upid.split(":") if isinstance(upid, str) else []
    if len(parts) < 8 or parts[0] != "UPID" or not parts[1]:
        raise field_error("task_id", "must be a Proxmox task id (UPID:<node>:...), got %r"
                          % (upid,))
    return parts[1]


def _succeeded(exitstatus):
    return exitstatus == "OK" or str(exitstatus).startswith("WARNINGS")


def task_error(exitstatus, what):
    """The VirtError of a task that ended with ``exitstatus``."""
    where = "Proxmox task %s" % what
    return classify_message(exitstatus, None, where) or Internal(
        "%s failed: %s" % (where, exitstatus), details={"exitstatus": exitstatus})


def status_of(session, upid, what="task"):
    """{id, state (running, success or error), type, node, error (a taxonomy dict or None)}."""
    info = session.get("nodes", upid_node(upid), "tasks", upid, "status")
    out = {"id": upid, "state": "running", "type": info.get("type"), "node": info.get("node"),
           "error": None}
    if info.get("status") == "stopped":
        exitstatus = info.get("exitstatus")
        if _succeeded(exitstatus):
            out["state"] = "success"
        else:
            out["state"] = "error"
            out["error"] = task_error(exitstatus, what).to_dict()
    return out


def wait(session, upid, what, timeout=None):
    """Poll the task ``upid`` until it stops: nothing on success, its error raised, or Timeout
    (``details.task_id``) once ``timeout`` (default ``provider.task_timeout``) has passed."""
    session.provider.started(upid)
    node = upid_node(upid)
    limit = session.provider.config["task_timeout"] if timeout is None else timeout
    end = time.monotonic() + limit
    delay = FIRST_POLL
    while True:
        info = session.get("nodes", node, "tasks", upid, "status")
        if info.get("status") == "stopped":
            exitstatus = info.get("exitstatus")
            if _succeeded(exitstatus):
                return
            raise task_error(exitstatus, "%s (%s)" % (what, upid))
        left = end - time.monotonic()
        if left <= 0:
            raise Timeout("%s on %s still running after %gs (task %s); see task_status"
                          % (what, session.provider.key, limit, upid),
                          details={"task_id": upid, "timeout": limit})
        time.sleep(min(delay, left))
        delay = min(delay * 2, MAX_POLL)
