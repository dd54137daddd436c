"""Guest information and wait_for_ip with a real guest: the lab's guest (lab/guest.py: Debian's
cloud kernel, busybox and the QEMU guest agent) boots on hv2, takes an address from the DHCP
server of a libvirt network the test defines, and answers through its agent.

The collection is used as a user would (ansible-playbook); the oracle is libvirt itself: the
network's DHCP leases, and the guest agent asked directly through libvirt-python.
"""
import importlib
import time
import uuid

import libvirt
import pytest

from lab_domains import remove_domain
from playbook_runner import play, run_playbook

HV = "hv2"
OS_NAME = "resilient.virt lab guest 1"


@pytest.fixture
def guest(lab):
    """A stopped domain of the lab's guest on a DHCP network of its own: (conn, domain name, MAC)."""
    built = importlib.import_module("guest").build(lab.run_dir)
    conn = libvirt.open(lab.hypervisor(HV).uri)
    token = uuid.uuid4().hex[:6]
    subnet = 100 + int(token[:2], 16) % 100
    network = conn.networkDefineXML(
        "<network><name>rv-guest-%s</name><bridge name='rvg%s'/>"
        "<ip address='192.168.%d.1' netmask='255.255.255.0'><dhcp>"
        "<range start='192.168.%d.10' end='192.168.%d.50'/></dhcp></ip></network>"
        % (token, token, subnet, subnet, subnet))
    network.create()
    name, mac = "it-guest-%s" % token, "52:54:00:%s:%s:%s" % (token[:2], token[2:4], token[4:])
    conn.defineXML(
        "<domain type='qemu'><name>%s</name><memory unit='MiB'>256</memory><vcpu>1</vcpu>"
        "<os><type>hvm</type><kernel>%s</kernel><initrd>%s</initrd>"
        "<cmdline>console=ttyS0 quiet</cmdline></os><features><acpi/></features><devices>"
        "<interface type='network'><mac address='%s'/><source network='%s'/>"
        "<model type='virtio'/></interface><serial type='pty'><target port='0'/></serial>"
        "<channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>"
        "</devices></domain>" % (name, built["kernel"], built["initrd"], mac, network.name()))
    yield conn, name, mac, network
    remove_domain(lab.hypervisor(HV).uri, name)
    network.destroy()
    network.undefine()
    conn.close()


def _run(lab, tmp_path, tasks, step):
    hv = lab.hypervisor(HV)
    defaults = {"provider": {"type": "libvirt", "name": hv.name, "uri": hv.uri,
                             "domain_type": "qemu"},
                "state_store": "sqlite:///%s" % (tmp_path / "state.db")}
    run = run_playbook(tmp_path, [play([dict(task, ignore_errors=True) for task in tasks],
                                       module_defaults=defaults)], name=step)
    assert "Traceback" not in run.output, run.output
    return run


def _agent(dom):
    """What the guest agent says, asked through libvirt directly; None until it answers."""
    try:
        info = dom.guestInfo(libvirt.VIR_DOMAIN_GUEST_INFO_OS | libvirt.VIR_DOMAIN_GUEST_INFO_HOSTNAME)
        found = dom.interfaceAddresses(libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT)
    except libvirt.libvirtError:
        return None
    return info, found


def test_wait_for_ip_then_guest_information(lab, guest, tmp_path):
    conn, name, mac, network = guest
    began = time.monotonic()
    run = _run(lab, tmp_path, [{"name": "start and wait", "resilient.virt.vm": {
        "name": name, "state": "running", "wait_for_ip": True, "wait_timeout": "150s"}}], "wait")
    waited = time.monotonic() - began
    started = run.task("start and wait")
    assert not started.failed, started
    leased = [lease["ipaddr"] for lease in network.DHCPLeases() if lease["mac"] == mac]
    assert leased and started["vm"]["addresses"] == leased, (started["vm"], leased)
    nic = started["vm"]["interfaces"][0]
    assert nic["addresses"] == leased and nic["address_source"] in ("agent", "lease")

    dom = conn.lookupByName(name)
    end = time.monotonic() + 60
    while _agent(dom) is None:  # the agent starts just after DHCP: wait for it, by the oracle
        assert time.monotonic() < end, "the guest agent never answered"
        time.sleep(1)
    info, found = _agent(dom)
    run = _run(lab, tmp_path, [{"name": "look", "resilient.virt.vm_info": {"name": name}}], "look")
    vm = run.task("look")["vms"][0]
    assert vm["guest"] == {"agent": True, "agent_state": "connected",
                           "os": info["os.pretty-name"], "hostname": info["hostname"]}
    assert (vm["guest"]["os"], vm["guest"]["hostname"]) == (OS_NAME, "rv-guest")
    agent_ips = [a["addr"] for i in found.values() if i["hwaddr"] == mac for a in i["addrs"]]
    assert vm["interfaces"][0]["addresses"] == agent_ips == leased
    assert vm["interfaces"][0]["address_source"] == "agent"
    print("wait_for_ip: address after %.1f s (task included)" % waited)


def test_wait_for_ip_fails_cleanly(lab, tmp_path):
    name = "it-noip-%s" % uuid.uuid4().hex[:6]
    spec = {"name": name, "vcpus": 1, "memory_mb": 64}
    try:
        began = time.monotonic()
        run = _run(lab, tmp_path, [
            {"name": "no address", "resilient.virt.vm": dict(
                spec, state="running", wait_for_ip=True, wait_timeout="3s")},
            {"name": "stopped", "resilient.virt.vm": dict(
                spec, state="stopped", force=True, shutdown_timeout="2s", wait_for_ip=True)},
        ], "noip")
        elapsed = time.monotonic() - began
    finally:
        remove_domain(lab.hypervisor(HV).uri, name)
    timed_out = run.task("no address")
    assert timed_out.failed and timed_out["error"]["type"] == "Timeout", timed_out
    assert "wait_timeout" in timed_out["msg"] and "3s" in timed_out["msg"]
    assert timed_out["ready"] is False
    assert elapsed < 3 + 30, "the wait did not end near its timeout"
    refused = run.task("stopped")
    assert refused.failed and refused["error"]["type"] == "InvalidSpec", refused
    assert "wait_for_ip" in refused["msg"]
