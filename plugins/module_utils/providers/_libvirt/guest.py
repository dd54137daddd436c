"""What a libvirt guest tells about itself: the guest agent's state, the OS and host name it
reports, and the IP addresses of each interface with where they came from.

Addresses come, per interface (matched by MAC), from the first source that has some: the QEMU
guest agent (``agent``: what the guest itself has configured), the DHCP leases of the libvirt
network (``lease``), then the host's ARP table (``arp``). The agent is asked only when its
channel is connected; a guest that does not answer leaves its information unknown, never fails
the read.
"""
__all__ = ("AGENT_CHANNEL", "agent_state", "ask_agent", "arp_addresses", "assign_addresses")

AGENT_CHANNEL = "org.qemu.guest_agent.0"
# libvirt errors that only mean "the guest (or this host) cannot say"
_UNKNOWN = ("AGENT_UNRESPONSIVE", "AGENT_UNSYNCED", "AGENT_COMMAND_TIMEOUT", "OPERATION_INVALID",
            "NO_SUPPORT", "ARGUMENT_UNSUPPORTED", "OPERATION_UNSUPPORTED", "INTERNAL_ERROR",
            "OPERATION_FAILED")


def agent_state(root):
    """``connected``/``disconnected`` for the agent channel of the domain XML ``root`` (live XML
    says which; a definition has no state, so ``disconnected``), None without a channel."""
    for channel in root.findall("devices/channel"):
        target = channel.find("target")
        if target is not None and target.get("name") == AGENT_CHANNEL:
            return target.get("state") or "disconnected"
    return None


def _mac_addresses(answer):
    """{mac: [IP, ...]} from a virDomainInterfaceAddresses answer, without loopback and IPv6
    link-local addresses."""
    found = {}
    for interface in (answer or {}).values():
        mac = (interface.get("hwaddr") or "").lower()
        if not mac or mac == "00:00:00:00:00:00":
            continue
        for address in interface.get("addrs") or []:
            ip = address.get("addr")
            if ip and not ip.lower().startswith("fe80:"):
                found.setdefault(mac, []).append(ip)
    return found


def ask_agent(lv, dom, state, is_unknown):
    """(guest dict, {mac: [IP...]}) from the guest agent when its channel is ``state``
    ``connected``; ``is_unknown(exc)`` tells a guest that cannot answer from a real failure."""
    guest = {"agent": False, "agent_state": state, "os": None, "hostname": None}
    if state != "connected":
        return guest, {}
    try:
        info = dom.guestInfo(lv.VIR_DOMAIN_GUEST_INFO_OS | lv.VIR_DOMAIN_GUEST_INFO_HOSTNAME, 0)
        found = _mac_addresses(dom.interfaceAddresses(
            lv.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT, 0))
    except Exception as exc:  # noqa: BLE001 - is_unknown re-raises what is not the guest's silence
        if not is_unknown(exc, *_UNKNOWN):
            raise
        return dict(guest, agent_state="unresponsive"), {}
    guest.update(agent=True, os=info.get("os.pretty-name") or info.get("os.name"),
                 hostname=info.get("hostname"))
    return guest, found


def arp_addresses(lv, dom, is_unknown):
    """{mac: [IP...]} from the host's ARP table, {} when it cannot say."""
    try:
        return _mac_addresses(dom.interfaceAddresses(lv.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_ARP, 0))
    except Exception as exc:  # noqa: BLE001 - as in ask_agent
        if not is_unknown(exc, *_UNKNOWN):
            raise
        return {}


def assign_addresses(interfaces, source, found):
    """Give each interface that has no address yet those ``found`` holds for its MAC, marked as
    coming from ``source``; return every address, interface by interface (the primary first)."""
    for nic in interfaces:
        nic.setdefault("addresses", [])
        nic.setdefault("address_source", None)
        ips = found.get((nic.get("mac") or "").lower())
        if ips and not nic["addresses"]:
            nic["addresses"], nic["address_source"] = list(ips), source
    return [ip for nic in interfaces for ip in nic["addresses"]]
