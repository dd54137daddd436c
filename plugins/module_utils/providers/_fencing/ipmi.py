# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built-in IPMI fence agent (``fencing.type: ipmi``), through the ``pyghmi`` library.

It logs in to the hypervisor's BMC over IPMI 2.0 (RMCP+, what ipmitool calls ``lanplus``),
sends Chassis Control "power down" (a hard power off), then reads Get Chassis Status until the
BMC reports the system's power off: only that reading counts as proof. A system already off is
fenced without an action. Settings (:data:`SETTINGS`): ``address`` (the BMC's host name or IP
address), ``port`` (UDP, default 623), ``username``, ``password`` and ``kg`` (the BMC key, when
the BMC has one set; a secret like the password). The whole of it - login, power down, the
reads - keeps to the time limit: pyghmi waits for ever on a BMC that ignores an unknown user, so
it runs in a thread that is left behind when time runs out. Credentials go to pyghmi alone, and
the answer never holds them.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import run_with_timeout
from ansible_collections.resilient.virt.plugins.module_utils.errors import Timeout
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl

__all__ = ("resilient_virt_fence_hypervisor", "SETTINGS", "TYPE", "DEFAULT_PORT")

TYPE = "ipmi"
SETTINGS = ("type", "address", "port", "username", "password", "kg")
DEFAULT_PORT = 623
_POLL = 0.5  # seconds between two reads of the power state
_LAST_READ = 2.0  # seconds kept for the last read before the time limit
# IPMI 2.0 chassis commands (netfn 0): Get Chassis Status (its first byte's bit 0 is "power
# is on") and Chassis Control with 0, "power down"
_CHASSIS, _GET_STATUS, _CONTROL, _POWER_DOWN = 0, 1, 2, 0
_CONNECTION = "check fencing.address and fencing.port (the BMC's IPMI over LAN, UDP), and " \
              "that fencing.username exists on the BMC: a BMC ignores a user it does not know"


def _problem(fencing):
    """What is wrong with the settings, naming the field and the fix, or None."""
    unknown = sorted(set(fencing) - set(SETTINGS), key=str)
    if unknown:
        return "fencing.%s is not a setting of the ipmi agent; its settings are %s" % (
            unknown[0], ", ".join(SETTINGS))
    address = fencing.get("address")
    if not isinstance(address, str) or not address.strip() or "/" in address:
        return "fencing.address is required: the BMC's host name or IP address, such as " \
               "bmc.example.com (no URL: IPMI speaks UDP to fencing.port)"
    port = fencing.get("port", DEFAULT_PORT)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        return "fencing.port must be the BMC's UDP port, 1 to 65535 (default %d)" % DEFAULT_PORT
    for key in ("username", "password", "kg"):
        if fencing.get(key) is not None and not isinstance(fencing[key], str):
            return "fencing.%s must be a string" % key
    return None


class _Refused(Exception):
    """The BMC answered, but not what fencing needs; the message says why and what to do."""


def _powered_on(command, where):
    """True when the BMC reports the system's power on, False when off (Get Chassis Status)."""
    response = command.raw_command(netfn=_CHASSIS, command=_GET_STATUS)
    if "error" in response or not response.get("data"):
        raise _Refused("the BMC at %s did not report the power state (Get Chassis Status: %s); "
                       "the user fencing.username needs the operator or administrator privilege"
                       % (where, response.get("error") or "no data"))
    return bool(response["data"][0] & 1)


def _forget_finished_login(session_class, login):
    """Drop pyghmi's record of an earlier login with the same settings once that session is
    broken (logged out or failed): pyghmi files it under its text settings but removes it under
    their bytes, so it stays, and the next Command of this process would get that dead session."""
    earlier = session_class.initting_sessions.get(login)
    if earlier is not None and earlier.broken:
        del session_class.initting_sessions[login]


def _fence(fencing, end, pyghmi_ipmi, progress):
    """The answer of one fence, the last read of the power state before ``end`` (monotonic);
    ``progress['step']`` says how far it got, for a timeout."""
    port = fencing.get("port", DEFAULT_PORT)
    where = "%s:%d" % (fencing["address"], port)
    login = (fencing["address"], fencing.get("username") or "", fencing.get("password") or "",
             port, fencing.get("kg"))
    _forget_finished_login(pyghmi_ipmi.private.session.Session, login)
    command = pyghmi_ipmi.command.Command(bmc=login[0], userid=login[1], password=login[2],
                                          port=port, kg=login[4])
    try:
        progress["step"] = "the first read of the power state"
        if not _powered_on(command, where):
            return {"fenced": True, "action": None,
                    "evidence": "Get Chassis Status read from the BMC at %s: power off; it was "
                                "off already" % where}
        progress["step"] = "power down"
        response = command.raw_command(netfn=_CHASSIS, command=_CONTROL, data=[_POWER_DOWN])
        if "error" in response:
            raise _Refused("the BMC at %s refused Chassis Control power down (%s); the user "
                           "fencing.username needs the operator or administrator privilege"
                           % (where, response["error"]))
        progress["step"] = "the reads of the power state after power down"
        sent = time.monotonic()
        while True:
            if not _powered_on(command, where):
                return {"fenced": True, "action": "power down",
                        "evidence": "Get Chassis Status read from the BMC at %s: power off "
                                    "after Chassis Control power down" % where}
            if time.monotonic() + _POLL + _LAST_READ > end:
                return {"fenced": False, "action": "power down",
                        "reason": "the BMC at %s still reports the power on %.1fs after Chassis "
                                  "Control power down, with the time limit near; it may run VMs "
                                  "still: fence it by hand, then say so"
                                  % (where, time.monotonic() - sent)}
            time.sleep(_POLL)
    finally:
        try:
            command.ipmi_session.logout()
        except Exception:  # noqa: BLE001 - the answer is known; a failed logout changes nothing
            pass


def _why(exc, where):
    """The reason a pyghmi call failed, with what to do."""
    text = str(exc) if getattr(exc, "args", None) and exc.args[0] else ""
    if "password" in text.lower():
        return "the BMC at %s refused the credentials (%s); check fencing.username and " \
               "fencing.password" % (where, text)
    if "kg" in text.lower():
        return "the BMC at %s refused the login's integrity check (%s); check fencing.kg, the " \
               "BMC key (leave it unset when the BMC has none)" % (where, text)
    if not text or text == "timeout" or "no longer connected" in text:
        return "the BMC at %s did not answer over IPMI; %s" % (where, _CONNECTION)
    return "the BMC at %s did not answer as asked: %s" % (where, text)


def _late(progress, where, timeout):
    """The reason when the time limit ran out at ``progress['step']``."""
    if progress.get("step") == "login":
        return "the BMC at %s did not complete an IPMI login within %gs; %s" % (
            where, timeout, _CONNECTION)
    return "the BMC at %s stopped answering during %s after %gs; it may run VMs still: fence " \
           "it by hand, then say so" % (where, progress.get("step"), timeout)


@hookimpl
def resilient_virt_fence_hypervisor(fencing, timeout):
    """Fence the hypervisor through its BMC over IPMI (see the module docstring)."""
    if fencing.get("type") != TYPE:
        return None
    problem = _problem(fencing)
    if problem:
        return {"fenced": False, "reason": problem}
    try:  # imported here: only an IPMI fence needs it
        import pyghmi.ipmi.command
        import pyghmi.ipmi.private.session
        from pyghmi import exceptions
    except ImportError:
        return {"fenced": False, "reason": "the Python library pyghmi is needed by the ipmi "
                                           "agent: pip install pyghmi"}
    where = "%s:%d" % (fencing["address"], fencing.get("port", DEFAULT_PORT))
    progress = {"step": "login"}
    end = time.monotonic() + timeout
    try:
        return run_with_timeout(lambda: _fence(fencing, end, pyghmi.ipmi, progress),
                                timeout, "IPMI fence of %s" % where)
    except Timeout:
        return {"fenced": False, "reason": _late(progress, where, timeout)}
    except _Refused as exc:
        return {"fenced": False, "reason": str(exc)}
    except (exceptions.PyghmiException, OSError) as exc:
        return {"fenced": False, "reason": _why(exc, where)}
