"""The built-in IPMI fence agent against an IPMI BMC simulator (``ipmi_bmc_simulator.py``: pyghmi's
BMC server framework in a process of its own, as no BMC runs here), over IPMI 2.0 with a
password and a BMC key (Kg); once with a lab hypervisor of the test's own as the simulator's
chassis, whose libvirtd and QEMU processes its power down really kills.

Oracles: the simulator's chassis power state, read from its file (not through IPMI), and /proc
for the lab's processes the test found before the fence.
"""
import logging
import os
import socket
import time

import libvirt
import pytest
from ipmi_bmc_simulator import Simulator

from ansible_collections.resilient.virt.plugins.module_utils.providers._fencing.fence import GRACE, fence_hypervisor

PASSWORD = "ipmi-Secret-4711"
KG = "kg-Secret-0815"


@pytest.fixture(scope="module")
def bmc(tmp_path_factory):
    simulator = Simulator(tmp_path_factory.mktemp("bmc"), "admin", PASSWORD, kg=KG)
    yield simulator
    simulator.stop()


@pytest.fixture(scope="module")
def stuck_bmc(tmp_path_factory):
    simulator = Simulator(tmp_path_factory.mktemp("stuck"), "admin", PASSWORD, stuck=True)
    yield simulator
    simulator.stop()


def ipmi(port, **extra):
    settings = {"type": "ipmi", "address": "127.0.0.1", "port": port, "username": "admin",
                "password": PASSWORD, "kg": KG}
    settings.update(extra)
    return settings


def unused_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_ipmi_powers_the_system_off_and_proves_it(bmc, caplog):
    caplog.set_level(logging.DEBUG)
    bmc.set_power("on")
    answer = fence_hypervisor("hv1", ipmi(bmc.port), timeout=30)
    assert answer["fenced"] is True, answer
    assert answer["agent"] == "ipmi" and answer["action"] == "power down"
    assert "power off after Chassis Control power down" in answer["evidence"]
    assert bmc.power() == "off"
    again = fence_hypervisor("hv1", ipmi(bmc.port), timeout=30)
    assert again["fenced"] is True and again["action"] is None  # off already: nothing to do
    assert "off already" in again["evidence"]
    text = repr((answer, again)) + caplog.text
    assert PASSWORD not in text and KG not in text


def test_what_cannot_be_fenced_says_so_and_why(bmc, caplog):
    caplog.set_level(logging.DEBUG)
    bmc.set_power("on")
    refused = fence_hypervisor("hv1", ipmi(bmc.port, password="not-" + PASSWORD), timeout=30)
    wrong_key = fence_hypervisor("hv1", ipmi(bmc.port, kg="not-" + KG), timeout=30)
    typo = fence_hypervisor("hv1", ipmi(bmc.port, pasword=PASSWORD), timeout=30)
    url = fence_hypervisor("hv1", ipmi(bmc.port, address="https://127.0.0.1"), timeout=30)
    answers = [refused, wrong_key, typo, url]
    assert [a["fenced"] for a in answers] == [False] * len(answers), answers
    assert "refused the credentials" in refused["reason"] and "fencing.password" in refused["reason"]
    assert "fencing.kg" in wrong_key["reason"]
    assert "fencing.pasword is not a setting of the ipmi agent" in typo["reason"]
    assert "fencing.address is required" in url["reason"] and "no URL" in url["reason"]
    assert bmc.power() == "on"  # nothing was switched off
    text = repr(answers) + caplog.text
    for secret in (PASSWORD, KG, "not-" + PASSWORD, "not-" + KG):
        assert secret not in text


def test_a_bmc_that_does_not_answer_is_not_fenced_within_the_limit():
    started = time.monotonic()
    silent = fence_hypervisor("hv1", ipmi(unused_udp_port()), timeout=10)
    took = time.monotonic() - started
    assert silent["fenced"] is False
    # the agent's own reason, not the dispatcher's for an agent that overran its limit
    assert "did not answer over IPMI" in silent["reason"] or "did not complete an IPMI login" in silent["reason"]
    assert "fencing.address and fencing.port" in silent["reason"]
    assert took < 10 + GRACE, took


def test_a_bmc_that_ignores_the_user_is_not_fenced_within_the_limit(bmc):
    # pyghmi itself would wait for ever: a BMC does not answer the login of a user it does not know
    started = time.monotonic()
    unknown = fence_hypervisor("hv1", ipmi(bmc.port, username="nobody"), timeout=5)
    took = time.monotonic() - started
    assert unknown["fenced"] is False
    assert "did not complete an IPMI login within 5s" in unknown["reason"]
    assert "fencing.username exists on the BMC" in unknown["reason"]
    assert took < 5 + GRACE, took


def test_a_bmc_that_never_reports_off_is_not_fenced(stuck_bmc):
    stuck_bmc.set_power("on")
    answer = fence_hypervisor("hv1", ipmi(stuck_bmc.port, kg=None), timeout=5)
    assert answer["fenced"] is False, answer
    assert answer["action"] == "power down"
    assert "still reports the power on" in answer["reason"] and "fence it by hand" in answer["reason"]
    assert stuck_bmc.power() == "on"


@pytest.fixture(scope="module")
def lab_bmc(tmp_path_factory, lab_module):
    """hv1 of a lab of its own, and a BMC simulator whose chassis it is: (lab, simulator)."""
    the_lab = lab_module.Lab(str(tmp_path_factory.mktemp("ipmilab")))
    the_lab.up(1, vsphere=False, proxmox=False)
    try:
        simulator = Simulator(tmp_path_factory.mktemp("labbmc"), "admin", PASSWORD,
                              lab=[os.path.dirname(lab_module.__file__), the_lab.run_dir, "hv1"])
        try:
            yield the_lab, simulator
        finally:
            simulator.stop()
    finally:
        the_lab.down()


@pytest.mark.lab
def test_an_ipmi_power_down_kills_the_lab_hypervisor_and_its_guests(lab_bmc, domain_xml):
    the_lab, bmc = lab_bmc
    hv = the_lab.hypervisor("hv1")
    conn = libvirt.open(hv.uri)
    try:
        conn.defineXML(domain_xml("ipmi-fenced-guest")).create()
    finally:
        conn.close()
    daemon, guests = hv.daemon_pid("libvirtd"), hv.qemu_pids()
    assert daemon and guests
    answer = fence_hypervisor("hv1", ipmi(bmc.port, kg=None), timeout=60)
    assert answer["fenced"] is True and answer["action"] == "power down", answer
    assert [pid for pid in [daemon] + guests if os.path.exists("/proc/%d" % pid)] == []
    assert the_lab.status()[0]["state"] == "stopped"
