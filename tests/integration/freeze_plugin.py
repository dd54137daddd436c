"""Fault injector (a test plugin): the first create request freezes the provider as it is sent.

Loaded by the modules through ``RESILIENT_VIRT_PLUGINS=freeze_plugin`` (with this directory on
``PYTHONPATH``). When :data:`FREEZE_ENV` is ``PID:SECONDS``, the first ``create`` attempt of the
run arms a one-shot trap on the request that creates the VM (libvirt's ``defineXMLFlags`` or
``defineXML``, vSphere's ``CreateVM_Task``): just before that request leaves, PID (the
hypervisor's libvirtd, or the vSphere simulator) gets SIGSTOP, and the request leaves only once
every thread of PID has stopped. SIGSTOP is delivered asynchronously: the kernel wakes one thread
to carry out the stop, and until it has run, the others run on; a multi-threaded server (the
simulator, a Go program, serves requests on any of its threads) could answer the request in
that window, and the freeze would land on a later call. A detached process sends SIGCONT
SECONDS after the stop, whatever happens to the module. The provider then holds the create
request while the attempt times out, and carries it out on thawing: the VM appears after its
attempt was abandoned, which is what a retry must not repeat.

The file named by :data:`MARKER_ENV` makes "first" hold across processes (it is created once,
exclusively). When the trap fires it writes MARKER.fired (:func:`read_freeze`): the operation
whose attempt sent the request, the request, whether every thread stopped, and the pid of the
thawing process (its process group, for the test to end). The requests themselves are the
libraries' own, unchanged.
"""
import json
import os
import signal
import subprocess
import threading
import time

import pluggy

FREEZE_ENV = "RESILIENT_VIRT_TEST_FREEZE"
MARKER_ENV = "RESILIENT_VIRT_TEST_FREEZE_MARKER"
STOP_TIMEOUT = 30.0  # for every thread of the frozen process to stop, on a loaded machine
hookimpl = pluggy.HookimplMarker("resilient_virt")
_attempt = threading.local()  # .operation: the operation of the attempt running in this thread


def _thread_states(pid):
    """The state letter of every thread of ``pid`` (R, S, T...)."""
    states = []
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as handle:
                states.append(handle.read().rsplit(")", 1)[1].split()[0])
        except (FileNotFoundError, IndexError):  # the thread ended meanwhile
            pass
    return states


def _stop(pid):
    """SIGSTOP ``pid``, then wait until every one of its threads has stopped; True if they did
    within STOP_TIMEOUT."""
    os.kill(pid, signal.SIGSTOP)
    end = time.monotonic() + STOP_TIMEOUT
    while not all(state in ("T", "t") for state in _thread_states(pid)):
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def _freeze(target, marker, request):
    pid, seconds = target.split(":")
    stopped = _stop(int(pid))
    thaw = subprocess.Popen(["sh", "-c", 'sleep "$1"; kill -CONT "$2"', "thaw", seconds, pid],
                            start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record = {"operation": getattr(_attempt, "operation", None), "request": request,
              "pid": int(pid), "stopped": stopped, "thaw_pid": thaw.pid}
    fd = os.open(marker + ".fired", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, json.dumps(record).encode())
    finally:
        os.close(fd)


def read_freeze(marker):
    """What the trap recorded when it fired (a dict, see the module's docstring), or None when
    it never fired."""
    try:
        with open(marker + ".fired") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def _arm(target, marker):
    """Wrap the library calls that send a create request; the first one sent freezes PID."""
    fired = []

    def fire(request):
        if not fired:
            fired.append(True)
            _freeze(target, marker, request)

    try:
        import libvirt
    except ImportError:
        pass
    else:
        define, define_flags = libvirt.virConnect.defineXML, libvirt.virConnect.defineXMLFlags

        def define_xml(self, xml):
            fire("defineXML")
            return define(self, xml)

        def define_xml_flags(self, xml, flags=0):
            fire("defineXMLFlags")
            return define_flags(self, xml, flags)

        libvirt.virConnect.defineXML = define_xml
        libvirt.virConnect.defineXMLFlags = define_xml_flags
    try:
        from pyVmomi import SoapAdapter
    except ImportError:
        return
    invoke = SoapAdapter.SoapStubAdapter.InvokeMethod

    def invoke_method(self, mo, info, args, outerStub=None):
        if getattr(info, "wsdlName", None) == "CreateVM_Task":
            fire("CreateVM_Task")
        return invoke(self, mo, info, args, outerStub)

    SoapAdapter.SoapStubAdapter.InvokeMethod = invoke_method


@hookimpl
def resilient_virt_before_call(operation):
    _attempt.operation = operation
    target, marker = os.environ.get(FREEZE_ENV), os.environ.get(MARKER_ENV)
    if operation != "create" or not target or not marker:
        return
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return
    _arm(target, marker)
