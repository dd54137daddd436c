"""Fault injector (a test plugin): the first create request freezes the provider as it is sent.

Loaded by the modules through ``RESILIENT_VIRT_PLUGINS=freeze_plugin`` (with this directory on
``PYTHONPATH``). When :data:`FREEZE_ENV` is ``PID:SECONDS``, the first ``create`` attempt of the
run arms a one-shot trap on the request that creates the VM (libvirt's ``defineXMLFlags`` or
``defineXML``, vSphere's ``CreateVM_Task``): just before that request leaves, PID (the hypervisor's libvirtd, or the
vSphere simulator) gets SIGSTOP, and a detached process sends it SIGCONT SECONDS later, whatever
happens to the module. The provider then holds the create request while the attempt times
out, and carries it out on thawing: the VM appears after its attempt was abandoned, which is
what a retry must not repeat. The file named by :data:`MARKER_ENV` makes "first" hold across
processes (it is created once, exclusively); the trap, when it fires, creates MARKER.fired.
The requests themselves are the libraries' own, unchanged.
"""
import os
import signal
import subprocess

import pluggy

FREEZE_ENV = "RESILIENT_VIRT_TEST_FREEZE"
MARKER_ENV = "RESILIENT_VIRT_TEST_FREEZE_MARKER"
hookimpl = pluggy.HookimplMarker("resilient_virt")


def _freeze(target, marker):
    os.close(os.open(marker + ".fired", os.O_WRONLY | os.O_CREAT, 0o600))
    pid, seconds = target.split(":")
    subprocess.Popen(["sh", "-c", 'sleep "$1"; kill -CONT "$2"', "thaw", seconds, pid],
                     start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.kill(int(pid), signal.SIGSTOP)


def _arm(target, marker):
    """Wrap the library calls that send a create request; the first one sent freezes PID."""
    fired = []

    def fire():
        if not fired:
            fired.append(True)
            _freeze(target, marker)

    try:
        import libvirt
    except ImportError:
        pass
    else:
        define, define_flags = libvirt.virConnect.defineXML, libvirt.virConnect.defineXMLFlags

        def define_xml(self, xml):
            fire()
            return define(self, xml)

        def define_xml_flags(self, xml, flags=0):
            fire()
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
            fire()
        return invoke(self, mo, info, args, outerStub)

    SoapAdapter.SoapStubAdapter.InvokeMethod = invoke_method


@hookimpl
def resilient_virt_before_call(operation):
    target, marker = os.environ.get(FREEZE_ENV), os.environ.get(MARKER_ENV)
    if operation != "create" or not target or not marker:
        return
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return
    _arm(target, marker)
