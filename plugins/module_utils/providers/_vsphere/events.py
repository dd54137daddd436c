# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A vCenter's hosts followed through a property collector: which of them it still reaches.

A vSphere provider manages hypervisors (its HostSystems) rather than being one. Each
:class:`HostWatch` logs in on a provider object of its own, makes a PropertyCollector of its
own (``CreatePropertyCollector``: its filter and its update version are nobody else's) with a
filter on every host's ``name``, ``runtime.connectionState`` and ``runtime.powerState``, and
follows it with ``WaitForUpdatesEx`` in a daemon thread; each wait returns after at most
``wait_seconds`` when nothing changed, so a vCenter that stops answering is noticed by the
session's HTTP time limit (the provider's ``timeout``), and any failure closes the watch.

What vCenter says of a host is judged by :func:`host_verdict`: ``up`` (connected),
``down`` (not responding, and not powered off or put in standby by vCenter itself) or nothing
(an administrator disconnected it, or vCenter put it to sleep: not a failure, and nothing is
known of it). Only a change of verdict is reported, as ``report(kind, host name, payload)``
(``up`` with no VM observations, ``down`` with how it was observed). VM power states are not
followed (docs/ha.md says why).
"""
import threading

__all__ = ("HostWatch", "host_verdict")

_PATHS = ("name", "runtime.connectionState", "runtime.powerState")
_ASKED_OFF = ("poweredOff", "standBy")  # powered off or put in standby through vCenter


def host_verdict(connection, power):
    """``"up"``, ``"down"`` or None (not judged) for a host's connection and power states."""
    if connection == "connected":
        return "up"
    if connection == "notResponding" and power not in _ASKED_OFF:
        return "down"
    return None


def _observed(name, host):
    return "vCenter reports host %s %s (power state %s)" % (name, host["connection"], host["power"])


class HostWatch:
    """The hosts of ``provider`` (a VSphereProvider kept for this watch alone), watched.

    :meth:`connect` logs in, makes the filter and returns the hosts' verdicts as they are, a
    list of ``(kind, host name, payload)``; :attr:`closed` is set when following fails,
    :attr:`close_reason` then says why. ``manager``: a failure to reach the provider says
    nothing about its hosts.
    """

    manager = True

    def __init__(self, provider, report, wait_seconds=5):
        self.provider = provider
        self._report = report
        self.wait_seconds = int(wait_seconds)
        self.closed = threading.Event()
        self.close_reason = None
        self._hosts = {}  # moid -> {"name", "connection", "power", "verdict"}
        self._attempt = 0  # raised by abandon() and close(): a follower left behind stops

    def connect(self):
        from pyVmomi import vim, vmodl

        pc = vmodl.query.PropertyCollector
        self._attempt += 1
        attempt = self._attempt
        self.closed.clear()
        self.close_reason = None
        self._hosts = {}
        session = self.provider.session()
        try:
            collector = session.content.propertyCollector.CreatePropertyCollector()
            traverse = pc.TraversalSpec(name="view", type=vim.view.ContainerView, path="view",
                                        skip=False)
            spec = pc.FilterSpec(
                objectSet=[pc.ObjectSpec(obj=session.view([vim.HostSystem]), skip=True,
                                         selectSet=[traverse])],
                propSet=[pc.PropertySpec(type=vim.HostSystem, pathSet=list(_PATHS))])
            collector.CreateFilter(spec, partialUpdates=False)
            options = pc.WaitOptions(maxWaitSeconds=self.wait_seconds)
            update = collector.WaitForUpdatesEx("", options)
            found = self._apply(update)
        except Exception:
            if attempt == self._attempt:
                self.provider.close()
            raise
        if attempt != self._attempt:  # abandoned meanwhile: this login is nobody's now
            raise RuntimeError("connect to %s abandoned" % self.provider.key)
        threading.Thread(target=self._follow, args=(collector, update.version, options, attempt),
                         name="resilient-virt:vsphere-hosts %s" % self.provider.key,
                         daemon=True).start()
        return found

    def _apply(self, update):
        """The verdicts that changed with ``update``: ``[(kind, name, payload)]``."""
        changed = []
        for filter_update in (update.filterSet if update is not None else []):
            for item in filter_update.objectSet:
                moid = item.obj._moId
                if item.kind == "leave":
                    self._hosts.pop(moid, None)
                    continue
                host = self._hosts.setdefault(moid, {"name": None, "connection": None,
                                                     "power": None, "verdict": None})
                for change in item.changeSet:
                    field = {"name": "name", "runtime.connectionState": "connection",
                             "runtime.powerState": "power"}.get(change.name)
                    if field is not None:
                        host[field] = None if change.val is None else str(change.val)
                verdict = host_verdict(host["connection"], host["power"])
                if verdict is not None and verdict != host["verdict"] and host["name"]:
                    changed.append((verdict, host["name"],
                                    {} if verdict == "up" else _observed(host["name"], host)))
                if verdict is not None:  # not judged: the last verdict stands
                    host["verdict"] = verdict
        return changed

    def _follow(self, collector, version, options, attempt):
        try:
            while attempt == self._attempt:
                update = collector.WaitForUpdatesEx(version, options)
                if attempt != self._attempt:
                    return
                if update is not None:
                    version = update.version
                    for kind, name, payload in self._apply(update):
                        self._report(kind, name, payload)
        except Exception as exc:  # noqa: BLE001 - any failure ends the watch; the caller reconnects
            if attempt == self._attempt:
                err = self.provider.classify_error(exc)
                self.close_reason = self.provider.scrub(
                    err.message if err is not None else "%s: %s" % (type(exc).__name__, exc))
                self.closed.set()

    def abandon(self):
        """The connect did not answer in time: its login and follower are dropped unused."""
        self._attempt += 1
        self.provider.abandon()

    def close(self):
        """Stop following and log out, within the provider's time limit for a close (vCenter
        may be gone or frozen: never raises); the collector ends with the login."""
        self._attempt += 1
        self.provider.close()
