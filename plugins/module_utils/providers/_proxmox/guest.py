"""What a Proxmox VE guest tells through the QEMU guest agent: the OS and host name it reports,
and the IP addresses of each interface (matched by MAC).

The agent is asked only for a running VM whose configuration enables it. A guest whose agent
does not run or does not answer leaves its information unknown (``agent_state``
``not_running`` or ``unresponsive``) and never fails the read; any other failure is raised.
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import Timeout, VirtError
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.faults import (
    classify_exception)

__all__ = ("ask_agent", "assign_addresses", "addresses_by_mac")

_NOT_RUNNING = "guest agent is not running"


def addresses_by_mac(answer):
    """{mac: [IP...]} of ``network-get-interfaces``'s result, without loopback and IPv6
    link-local addresses."""
    found = {}
    for interface in answer or []:
        mac = str(interface.get("hardware-address") or "").lower()
        if not mac or mac == "00:00:00:00:00:00":
            continue
        for address in interface.get("ip-addresses") or []:
            ip = address.get("ip-address")
            if ip and not ip.lower().startswith("fe80:") and not ip.startswith("127."):
                found.setdefault(mac, []).append(ip)
    return found


def _ask(session, node, vmid, command):
    return (session.get("nodes", node, "qemu", vmid, "agent", command) or {}).get("result")


def ask_agent(session, node, vmid):
    """(guest dict, {mac: [IP...]}) from the VM's guest agent."""
    guest = {"agent": False, "agent_state": "unresponsive", "os": None, "hostname": None}
    try:
        found = addresses_by_mac(_ask(session, node, vmid, "network-get-interfaces"))
        osinfo = _ask(session, node, vmid, "get-osinfo") or {}
        hostname = (_ask(session, node, vmid, "get-host-name") or {}).get("host-name")
    except Exception as exc:  # noqa: BLE001 - only the guest's silence is swallowed
        err = exc if isinstance(exc, VirtError) else classify_exception(exc)
        if err is None:
            raise
        if _NOT_RUNNING in err.message:
            return dict(guest, agent_state="not_running"), {}
        if isinstance(err, Timeout) or "got timeout" in err.message:
            return guest, {}
        raise err from exc
    guest.update(agent=True, agent_state="running", hostname=hostname,
                 os=osinfo.get("pretty-name") or osinfo.get("name"))
    return guest, found


def assign_addresses(interfaces, found):
    """Give each interface the addresses ``found`` holds for its MAC (``address_source``
    ``agent``); return every address, interface by interface (the primary first)."""
    for nic in interfaces:
        ips = found.get(nic.get("mac") or "")
        nic["addresses"] = list(ips or [])
        nic["address_source"] = "agent" if ips else None
    return [ip for nic in interfaces for ip in nic["addresses"]]
