"""Fault injector (a test plugin): the state store held unavailable right after a backup poll
reports the operation completed - the moment the record's final status is written.

Loaded through ``RESILIENT_VIRT_PLUGINS=store_outage_plugin`` (with this directory on
``PYTHONPATH``). :data:`OUTAGE_ENV` is ``SQLITE_PATH SECONDS FLAG_FILE``: the first time a poll
answers ``completed`` (in any process; FLAG_FILE marks it), another process takes the SQLite
file's write lock for SECONDS; the hook returns once the lock is held, so every write of the
task after it meets the outage.
"""
import os
import subprocess
import sys
import time

import pluggy

OUTAGE_ENV = "RESILIENT_VIRT_TEST_STORE_OUTAGE"
hookimpl = pluggy.HookimplMarker("resilient_virt")
_HOLD = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
open(sys.argv[3], "a").write("held %f\\n" % time.time())
time.sleep(float(sys.argv[2]))
db.execute("ROLLBACK")
open(sys.argv[3], "a").write("released %f\\n" % time.time())
"""


@hookimpl(wrapper=True)
def resilient_virt_backup_poll(provider, handle):
    status = yield
    spec = os.environ.get(OUTAGE_ENV)
    if not spec or not status or status.get("state") != "completed":
        return status
    path, seconds, flag = spec.split()
    try:
        fd = os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return status
    os.close(fd)
    subprocess.Popen([sys.executable, "-c", _HOLD, path, seconds, flag], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        with open(flag) as marks:
            if "held" in marks.read():
                break
        time.sleep(0.02)
    return status
