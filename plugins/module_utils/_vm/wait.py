# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for a running VM to have an IP address (``wait_for_ip``)."""
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, Timeout

POLL_INTERVAL = 1.0


def wait_for_address(provider, name, timeout, clock=time.monotonic, sleep=time.sleep,
                     interval=POLL_INTERVAL):
    """Read VM ``name`` until it reports an address and return it; Timeout when it has none
    after ``timeout`` seconds, Conflict when it stops running meanwhile."""
    end = clock() + timeout
    while True:
        vm = provider.describe(name)
        if vm.get("addresses"):
            return vm
        if vm.get("state") != "running":
            raise Conflict("VM %r is %s, so it will get no IP address; start it (state=running)"
                           % (name, vm.get("state")), details={"state": vm.get("state")})
        if clock() >= end:
            guest = vm.get("guest") or {}
            raise Timeout(
                "VM %r has no IP address after %gs (guest agent: %s); raise wait_timeout, or make "
                "sure the guest takes an address (DHCP on a libvirt network, the guest agent or "
                "VMware Tools running)" % (name, timeout, guest.get("agent_state") or "none"),
                details={"timeout": timeout})
        sleep(min(interval, max(0.0, end - clock())))
