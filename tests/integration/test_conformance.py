"""The conformance suite (plugins/plugin_utils/conformance) on every backend the project has.

Each backend is a function building its ``Backend`` from the test's environment: libvirt on a
lab hypervisor (real libvirtd + QEMU), vSphere on the lab's vSphere simulator, Proxmox VE on a
Proxmox VE API simulator of the test's own (fakepve, ``pve_simulator.py``), and the third-party
example (tests/fixtures/thirdparty_provider, a fake keeping VMs in a JSON file,
installed by ``make deps``). A backend joins with one function and one entry of BACKENDS.
"""
import contextlib
import fcntl
import socket
import tempfile
import uuid

import pytest

from ansible_collections.resilient.virt.plugins.plugin_utils.conformance import (
    Backend, ConformanceSuite, SilentEndpoint)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
    installed_entry_points)


def _secret():
    """A password no test data contains by chance."""
    return "conformance-secret-%s" % uuid.uuid4().hex


def _refused_port():
    """A loopback TCP port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def memory_example(request, tmp_path):
    """The example: ``<path>.password`` makes it ask for a password; a lock held on its file
    hangs every call (the backend waits for the lock), a path in a missing directory is storage
    it cannot reach."""
    if "memory_example" not in [ep.name for ep in installed_entry_points()]:
        pytest.fail("the example backend is not installed: run `make deps`")
    path, password = str(tmp_path / "vms.json"), _secret()
    with open(path + ".password", "w") as handle:
        handle.write(password)
    provider = {"type": "memory_example", "name": "example", "path": path, "password": password}

    @contextlib.contextmanager
    def hanging():
        with open(path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield provider

    return Backend(provider=provider,
                   unreachable=dict(provider, path=str(tmp_path / "unmounted" / "vms.json")),
                   wrong_credentials=dict(provider, password=_secret()), hanging=hanging)


def libvirt(request, tmp_path):
    """Lab hypervisor hv3. Its daemon asks for no credentials, so there are no wrong ones; the
    provider still gets a password (SASL's, never asked) that must stay hidden."""
    hv = request.getfixturevalue("lab").hypervisor("hv3")
    provider = {"type": "libvirt", "name": "conformance-hv3", "uri": hv.uri,
                "domain_type": "qemu", "password": _secret()}

    @contextlib.contextmanager
    def hanging():
        # a short directory of its own: a unix socket path has at most 107 bytes
        with tempfile.TemporaryDirectory(prefix="conformance-") as folder, \
                SilentEndpoint(folder + "/libvirt-sock") as daemon:
            yield dict(provider, uri="qemu+unix:///system?socket=" + daemon.address)

    # a disk: libvirt snapshots a domain's disks, a diskless one has nothing to snapshot
    return Backend(provider=provider, hanging=hanging,
                   spec={"vcpus": 1, "memory_mb": 64, "disks": [{"size_gb": 1}]},
                   unreachable=dict(provider, uri="qemu+unix:///system?socket=%s"
                                    % (tmp_path / "absent" / "libvirt-sock")))


def vsphere(request, tmp_path):
    """The lab's vSphere simulator (HTTPS, its certificate verified with the lab CA)."""
    provider = dict(request.getfixturevalue("vsphere"), name="conformance")

    @contextlib.contextmanager
    def hanging():
        with SilentEndpoint(("127.0.0.1", 0)) as server:
            yield dict(provider, port=server.address[1])

    return Backend(provider=provider, hanging=hanging,
                   unreachable=dict(provider, port=_refused_port()),
                   wrong_credentials=dict(provider, password=_secret()))


def proxmox(request, tmp_path):
    """A simulated three-node Proxmox VE cluster of the test's own (fakepve, a simulator: no
    Proxmox VE server can run here)."""
    provider = dict(request.getfixturevalue("simulated_pve").provider, name="conformance")

    @contextlib.contextmanager
    def hanging():
        with SilentEndpoint(("127.0.0.1", 0)) as server:
            yield dict(provider, port=server.address[1])

    return Backend(provider=provider, hanging=hanging,
                   unreachable=dict(provider, port=_refused_port()),
                   wrong_credentials=dict(provider, password=_secret()))


# name -> function(request, tmp_path) returning the Backend; a new backend adds its entry here
# (and to ON_THE_LAB when it uses the lab)
BACKENDS = {"memory_example": memory_example, "libvirt": libvirt, "vsphere": vsphere,
            "proxmox": proxmox}
ON_THE_LAB = ("libvirt", "vsphere")


@pytest.fixture(params=[pytest.param(name, marks=[pytest.mark.lab] if name in ON_THE_LAB else [])
                        for name in BACKENDS])
def conformance_backend(request, tmp_path):
    return BACKENDS[request.param](request, tmp_path)


class TestConformance(ConformanceSuite):
    """Every case of the suite, on each backend of BACKENDS."""
