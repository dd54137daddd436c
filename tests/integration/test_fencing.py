"""Fencing through the hook resilient_virt_fence_hypervisor: the built-in Redfish agent against a
real Redfish BMC emulator (sushy-emulator, sushy-tools from PyPI: a simulator, as no BMC runs
here) over verified TLS with a password, and the lab-only power control against a lab
hypervisor of the test's own, whose libvirtd and QEMU processes it really kills.

Oracles: the emulator's PowerState read by plain HTTP requests (not sushy), and /proc for the
processes the test found before the fence.
"""
import logging
import os
import subprocess
import sys
import time

import bcrypt
import libvirt
import pytest
import requests
from redis_server import _free_port, make_tls_files

from ansible_collections.resilient.virt.plugins.module_utils.providers._fencing.fence import (
    fence_hypervisor)

LAB_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "lab")
if LAB_DIR not in sys.path:
    sys.path.insert(0, LAB_DIR)
import lab_only_power  # noqa: E402 - lab/ is on sys.path only now

PASSWORD = "bmc-Secret-4711"
WAIT = 60.0


class Emulator:
    """sushy-emulator with its fake driver on a port of its own, HTTPS with a private CA and a
    password (bcrypt, as it wants it), its state in the test's directory; stopped at the end."""

    def __init__(self, directory):
        cert, key, self.ca = make_tls_files(str(directory))
        users = directory / "users"
        users.write_text("admin:%s\n" % bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt()).decode())
        config = directory / "emulator.conf"
        # its fake systems' state in this directory, not in a file every emulator shares
        config.write_text("SUSHY_EMULATOR_AUTH_FILE = %r\nSUSHY_EMULATOR_STATE_DIR = %r\n"
                          % (str(users), str(directory)))
        self.port = _free_port()
        self.address = "https://127.0.0.1:%d" % self.port
        with open(directory / "emulator.log", "w") as log:
            self.process = subprocess.Popen(
                ["sushy-emulator", "--fake", "-i", "127.0.0.1", "-p", str(self.port),
                 "--ssl-certificate", cert, "--ssl-key", key, "--config", str(config)],
                stdout=log, stderr=subprocess.STDOUT)
        end = time.monotonic() + WAIT
        while True:
            try:
                self.systems = [m["@odata.id"] for m in self.get("/redfish/v1/Systems")["Members"]]
                break
            except requests.RequestException:
                if time.monotonic() > end or self.process.poll() is not None:
                    raise AssertionError("sushy-emulator did not answer; read %s"
                                         % (directory / "emulator.log")) from None
                time.sleep(0.2)

    def get(self, path):
        response = requests.get(self.address + path, auth=("admin", PASSWORD), verify=self.ca,
                                timeout=10)
        response.raise_for_status()
        return response.json()

    def power(self, system):
        return self.get(system)["PowerState"]

    def power_on(self, system):
        """Power ``system`` on and wait until it is: the emulator, like a BMC, applies a power
        change some seconds after it was asked."""
        requests.post(self.address + system + "/Actions/ComputerSystem.Reset", verify=self.ca,
                      auth=("admin", PASSWORD), json={"ResetType": "On"},
                      timeout=10).raise_for_status()
        end = time.monotonic() + WAIT
        while self.power(system) != "On":
            assert time.monotonic() < end, "%s did not power on" % system
            time.sleep(0.2)

    def stop(self):
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def emulator(tmp_path_factory):
    bmc = Emulator(tmp_path_factory.mktemp("bmc"))
    yield bmc
    bmc.stop()


def redfish(emulator, **extra):
    settings = {"type": "redfish", "address": emulator.address, "username": "admin",
                "password": PASSWORD, "ca_path": emulator.ca, "system": emulator.systems[0]}
    settings.update(extra)
    return settings


def test_redfish_powers_the_system_off_and_proves_it(emulator, caplog):
    caplog.set_level(logging.DEBUG)
    system = emulator.systems[0]
    emulator.power_on(system)
    answer = fence_hypervisor("hv1", redfish(emulator), timeout=30)
    assert answer["fenced"] is True, answer
    assert answer["action"] == "ForceOff" and "PowerState Off" in answer["evidence"]
    assert emulator.power(system) == "Off"
    again = fence_hypervisor("hv1", redfish(emulator, system=system.rsplit("/", 1)[-1]), timeout=30)
    assert again["fenced"] is True and again["action"] is None  # off already: nothing to do
    assert "already" in again["evidence"]
    assert PASSWORD not in repr((answer, again)) + caplog.text


def test_what_cannot_be_fenced_says_so_and_why(emulator, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    emulator.power_on(emulator.systems[0])
    untrusted = fence_hypervisor("hv1", redfish(emulator, ca_path=None), timeout=30)
    refused = fence_hypervisor("hv1", redfish(emulator, password="not-" + PASSWORD), timeout=30)
    unknown = fence_hypervisor("hv1", redfish(emulator, system="no-such-system"), timeout=30)
    silent = fence_hypervisor("hv1", redfish(emulator, address="https://127.0.0.1:%d"
                                             % _free_port()), timeout=10)
    typo = fence_hypervisor("hv1", redfish(emulator, adress="x"), timeout=30)
    unset = fence_hypervisor("hv1", None)
    nobody = fence_hypervisor("hv1", {"type": "apc_pdu", "password": PASSWORD})
    answers = [untrusted, refused, unknown, silent, typo, unset, nobody]
    assert [a["fenced"] for a in answers] == [False] * len(answers)
    assert "certificate is not trusted" in untrusted["reason"] and "fencing.ca_path" in untrusted["reason"]
    assert "refused the credentials" in refused["reason"]
    assert "no system 'no-such-system'" in unknown["reason"]
    assert "did not answer" in silent["reason"]
    assert "fencing.adress is not a setting" in typo["reason"]
    assert "no fencing settings" in unset["reason"] and "never recovered" in unset["reason"]
    assert "no fence agent serves fencing.type 'apc_pdu'" in nobody["reason"]
    assert emulator.power(emulator.systems[0]) == "On"  # nothing was switched off
    text = repr(answers) + caplog.text
    assert PASSWORD not in text and "not-" + PASSWORD not in text


@pytest.fixture(scope="module")
def own_hypervisor(tmp_path_factory, lab_module, domain_xml):
    """hv1 of a lab of its own with a running guest: (lab, hypervisor)."""
    the_lab = lab_module.Lab(str(tmp_path_factory.mktemp("fencelab")))
    the_lab.up(1, vsphere=False, proxmox=False)
    try:
        yield the_lab, the_lab.hypervisor("hv1")
    finally:
        the_lab.down()


@pytest.mark.lab
def test_the_lab_only_power_control_kills_libvirtd_and_its_guests(own_hypervisor, domain_xml):
    the_lab, hv = own_hypervisor
    conn = libvirt.open(hv.uri)
    try:
        conn.defineXML(domain_xml("fenced-guest")).create()
    finally:
        conn.close()
    daemon, guests = hv.daemon_pid("libvirtd"), hv.qemu_pids()
    assert daemon and guests
    settings = {"type": "lab_only_power", "run_dir": the_lab.run_dir}
    answer = fence_hypervisor("hv1", settings, timeout=60, plugins=[lab_only_power])
    assert answer["fenced"] is True, answer
    assert [pid for pid in [daemon] + guests if os.path.exists("/proc/%d" % pid)] == []
    assert the_lab.status()[0]["state"] == "stopped"
    again = fence_hypervisor("hv1", settings, timeout=60, plugins=[lab_only_power])
    assert again["fenced"] is True and again["action"] is None
    missing = fence_hypervisor("hv9", settings, timeout=60, plugins=[lab_only_power])
    assert missing["fenced"] is False and "unknown hypervisor 'hv9'" in missing["reason"]
    the_lab.start("hv1")  # the power comes back: the hypervisor answers, its guest stays off
    conn = libvirt.open(hv.uri)
    try:
        assert conn.lookupByName("fenced-guest").isActive() == 0
    finally:
        conn.close()
