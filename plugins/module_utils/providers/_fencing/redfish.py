# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built-in Redfish fence agent (``fencing.type: redfish``), through the ``sushy`` library.

It asks the hypervisor's BMC for a ``ForceOff`` of its system, then reads the system's
``PowerState`` back until it is ``Off``: only that reading counts as proof. A system already
off is fenced without an action. Settings (:data:`SETTINGS`): ``address`` (the BMC's URL,
``https://bmc.example.com``), ``username``, ``password``, ``system`` (the system's id or path,
needed when the BMC has several), ``validate_certs`` (default true) and ``ca_path`` (a CA bundle
that signed the BMC's certificate). Credentials go to sushy alone: sushy masks passwords in its
own debug log, and the answer never holds them.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._masking import redact
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl

__all__ = ("resilient_virt_fence_hypervisor", "SETTINGS", "TYPE")

TYPE = "redfish"
SETTINGS = ("type", "address", "username", "password", "system", "validate_certs", "ca_path")
_POLL = 0.5  # seconds between two reads of the power state
_CONNECT = 10.0  # seconds at most to connect to the BMC


def _problem(fencing):
    """What is wrong with the settings, naming the field and the fix, or None."""
    unknown = sorted(set(fencing) - set(SETTINGS), key=str)
    if unknown:
        return "fencing.%s is not a setting of the redfish agent; its settings are %s" % (
            unknown[0], ", ".join(SETTINGS))
    address = fencing.get("address")
    if not isinstance(address, str) or not address.startswith(("https://", "http://")):
        return "fencing.address is required: the BMC's URL, such as https://bmc.example.com"
    if not isinstance(fencing.get("validate_certs", True), bool):
        return "fencing.validate_certs must be true or false"
    return None


class _NoSuchSystem(Exception):
    """The settings name no system of the BMC, or the BMC has several and none is named."""


def _system(root, wanted):
    """The system to fence: ``wanted`` (an id or a path), else the BMC's only one."""
    collection = root.get_system_collection()
    paths = list(collection.members_identities)
    if wanted:
        matches = [p for p in paths if p.rstrip("/") == str(wanted).rstrip("/") or
                   p.rstrip("/").rsplit("/", 1)[-1] == str(wanted)]
        if not matches:
            raise _NoSuchSystem("the BMC has no system %r; its systems: %s (fencing.system)"
                                % (wanted, ", ".join(paths) or "none"))
        return root.get_system(matches[0])
    if len(paths) != 1:
        raise _NoSuchSystem("the BMC has %d systems (%s): name the hypervisor's in fencing.system"
                            % (len(paths), ", ".join(paths) or "none"))
    return root.get_system(paths[0])


def _why(exc, sushy):
    """The reason a call to the BMC failed, with what to do."""
    text = redact(str(exc))
    if isinstance(exc, sushy.exceptions.AccessError):
        return "the BMC refused the credentials (%s); check fencing.username and " \
               "fencing.password" % text
    if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
        return "the BMC's certificate is not trusted (%s); give the CA that signed it as " \
               "fencing.ca_path" % text
    return "the BMC did not answer as asked: %s" % text


def _fence(fencing, timeout, sushy):
    verify = fencing.get("ca_path") or fencing.get("validate_certs", True)
    root = sushy.Sushy(fencing["address"].rstrip("/") + "/redfish/v1",
                       username=fencing.get("username"), password=fencing.get("password"),
                       verify=verify, read_timeout=max(1.0, min(timeout, 60.0)),
                       connect_timeout=min(_CONNECT, timeout), server_side_retries=0)
    system = _system(root, fencing.get("system"))
    where = "%s of %s" % (system.path, redact(fencing["address"]))
    if system.power_state == sushy.PowerState.OFF:
        return {"fenced": True, "action": None,
                "evidence": "PowerState Off read from %s: it was off already" % where}
    system.reset_system(sushy.ResetType.FORCE_OFF)
    end = time.monotonic() + timeout
    while True:
        system.refresh(force=True)
        state = system.power_state
        if state == sushy.PowerState.OFF:
            return {"fenced": True, "action": "ForceOff",
                    "evidence": "PowerState Off read from %s after ForceOff" % where}
        if time.monotonic() + _POLL > end:
            return {"fenced": False, "action": "ForceOff",
                    "reason": "PowerState of %s is still %s %gs after ForceOff; it may run "
                              "VMs still: fence it by hand, then say so"
                              % (where, getattr(state, "value", state), timeout)}
        time.sleep(_POLL)


@hookimpl
def resilient_virt_fence_hypervisor(fencing, timeout):
    """Fence the hypervisor through its BMC's Redfish API (see the module docstring)."""
    if fencing.get("type") != TYPE:
        return None
    problem = _problem(fencing)
    if problem:
        return {"fenced": False, "reason": problem}
    try:  # imported here: only a Redfish fence needs it
        import sushy
    except ImportError:
        return {"fenced": False, "reason": "the Python library sushy is needed by the redfish "
                                           "agent: pip install sushy"}
    try:
        return _fence(fencing, timeout, sushy)
    except _NoSuchSystem as exc:
        return {"fenced": False, "reason": str(exc)}
    except sushy.exceptions.SushyError as exc:
        return {"fenced": False, "reason": _why(exc, sushy)}
