# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A vCenter's hosts and VMs followed through a property collector: which hosts it still
reaches, and which VMs stopped without being asked.

A vSphere provider manages hypervisors (its HostSystems) rather than being one. Each
:class:`HostWatch` logs in on a provider object of its own, makes a PropertyCollector of its
own (``CreatePropertyCollector``: its filter and its update version are nobody else's) with a
filter on every host's ``name``, ``runtime.connectionState`` and ``runtime.powerState`` and
every VM's ``name``, ``config.instanceUuid``, ``runtime.powerState`` and ``runtime.host``, and
follows it with ``WaitForUpdatesEx`` in a daemon thread; each wait returns after at most
``wait_seconds`` when nothing changed, so a vCenter that stops answering is noticed by the
session's HTTP time limit (the provider's ``timeout``), and any failure closes the watch.

What vCenter says of a host is judged by :func:`host_verdict`: ``up`` (connected),
``down`` (not responding, and not powered off or put in standby by vCenter itself) or nothing
(an administrator disconnected it, or vCenter put it to sleep: not a failure, and nothing is
known of it). Only a change of verdict is reported, as ``report(kind, host name, payload)``
(``up`` with the host's VMs as they are, ``down`` with how it was observed).

A VM of a host that is up is reported as ``report("vm", host name, observation)`` (as libvirt's
``events.py`` does: ``uuid``, ``name``, ``state``, ``reason``, ``unasked``, and ``observed``,
how it was told) when it starts, is suspended, moves to another host or goes away. When it
leaves ``poweredOn`` for ``poweredOff``, the VM's events and the recent tasks are read through
the API and judged by ``power_off.judge_power_off`` before it is reported; a vCenter that does
not answer them closes the watch, and nothing is reported. A VM of a host that is not up is not
reported: the host's own verdict covers it.
"""
import threading
import time

from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.inventory import retrieve
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.power_off import (
    judge_power_off)

__all__ = ("HostWatch", "host_verdict")

_PATHS = ("name", "runtime.connectionState", "runtime.powerState")
_VM_PATHS = ("name", "config.instanceUuid", "runtime.powerState", "runtime.host")
_ASKED_OFF = ("poweredOff", "standBy")  # powered off or put in standby through vCenter
_VM_STATES = {"poweredOn": "running", "suspended": "paused", "poweredOff": "stopped"}
# vCenter may post a power-off's event just after the VM's state changed: looked for again
_EVENT_TRIES, _EVENT_WAIT = 4, 0.5


def host_verdict(connection, power):
    """``"up"``, ``"down"`` or None (not judged) for a host's connection and power states."""
    if connection == "connected":
        return "up"
    if connection == "notResponding" and power not in _ASKED_OFF:
        return "down"
    return None


def _observed(name, host):
    return "vCenter reports host %s %s (power state %s)" % (name, host["connection"], host["power"])


def _vm_observation(vm, state=None, unasked=False, reason=None, observed="property collector"):
    return {"uuid": vm["uuid"], "name": vm["name"], "state": state or _VM_STATES.get(vm["power"]),
            "reason": reason, "unasked": unasked, "observed": observed}


class HostWatch:
    """The hosts and VMs of ``provider`` (a VSphereProvider kept for this watch alone), watched.

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
        self._vms = {}  # moid -> {"name", "uuid", "power", "host" (moid)}
        self._attempt = 0  # raised by abandon() and close(): a follower left behind stops

    def connect(self):
        from pyVmomi import vim, vmodl

        pc = vmodl.query.PropertyCollector
        self._attempt += 1
        attempt = self._attempt
        self.closed.clear()
        self.close_reason = None
        self._hosts, self._vms = {}, {}
        session = self.provider.session()
        try:
            collector = session.content.propertyCollector.CreatePropertyCollector()
            traverse = pc.TraversalSpec(name="view", type=vim.view.ContainerView, path="view",
                                        skip=False)
            spec = pc.FilterSpec(
                objectSet=[pc.ObjectSpec(obj=session.view([kind]), skip=True, selectSet=[traverse])
                           for kind in (vim.HostSystem, vim.VirtualMachine)],
                propSet=[pc.PropertySpec(type=vim.HostSystem, pathSet=list(_PATHS)),
                         pc.PropertySpec(type=vim.VirtualMachine, pathSet=list(_VM_PATHS))])
            collector.CreateFilter(spec, partialUpdates=False)
            options = pc.WaitOptions(maxWaitSeconds=self.wait_seconds)
            update = collector.WaitForUpdatesEx("", options)
            found = self._apply(update)  # all entered now: no power-off to judge
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
        """What changed with ``update``: ``[(kind, host name, payload)]``, the hosts' verdicts
        first; a VM's power-off is ``("judge", host name, (VM, host moid, observation))``,
        for :meth:`_judged`."""
        from pyVmomi import vim

        items = [item for filter_update in (update.filterSet if update is not None else [])
                 for item in filter_update.objectSet]
        vm_items = [item for item in items if isinstance(item.obj, vim.VirtualMachine)]
        changed, vm_changes = [], []
        for item in vm_items:
            moid = item.obj._moId
            before = self._vms.pop(moid, None) if item.kind == "leave" else dict(
                self._vms.get(moid) or {})
            if item.kind != "leave":
                vm = self._vms.setdefault(moid, {"name": None, "uuid": None, "power": None,
                                                 "host": None})
                for change in item.changeSet:
                    field = {"name": "name", "config.instanceUuid": "uuid",
                             "runtime.powerState": "power", "runtime.host": "host"}.get(change.name)
                    if field == "host":
                        vm["host"] = None if change.val is None else change.val._moId
                    elif field is not None:
                        vm[field] = None if change.val is None else str(change.val)
            vm_changes.append((item.obj, before or {}, self._vms.get(moid)))
        for item in items:
            if isinstance(item.obj, vim.VirtualMachine):
                continue
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
                                self._host_vms(moid) if verdict == "up" else _observed(host["name"], host)))
            if verdict is not None:  # not judged: the last verdict stands
                host["verdict"] = verdict
        told = {name for kind, name, _payload in changed if kind == "up"}  # their VMs with them
        for ref, before, vm in vm_changes:
            changed.extend(self._vm_changes(ref, before, vm, told))
        return changed

    def _host_vms(self, host_moid):
        """The VMs of a host, as the ``up`` payload: ``{uuid: observation}``."""
        return {vm["uuid"]: _vm_observation(vm, observed="state on connect")
                for vm in self._vms.values()
                if vm["host"] == host_moid and vm["uuid"] and vm["name"] and vm["power"] in _VM_STATES}

    def _host_up(self, moid, told):
        """The name of host ``moid`` when it is up and its VMs are not told with it, else None."""
        host = self._hosts.get(moid)
        if host is None or host["verdict"] != "up" or host["name"] in told:
            return None
        return host["name"]

    def _vm_changes(self, ref, before, vm, told):
        """The reports of the change of the VM ``ref`` from ``before`` to ``vm`` (None: gone)."""
        reports = []
        old_host = self._host_up(before.get("host"), told) if before else None
        if before.get("uuid") and old_host and (vm is None or vm["host"] != before["host"]):
            reports.append(("vm", old_host, _vm_observation(before, state="undefined")))
        if vm is None or not vm["uuid"] or not vm["name"] or vm["power"] not in _VM_STATES:
            return reports
        host = self._host_up(vm["host"], told)
        if host is None:
            return reports
        if vm["host"] != before.get("host") or vm["uuid"] != before.get("uuid") or \
                vm["name"] != before.get("name"):
            reports.append(("vm", host, _vm_observation(vm)))  # new here: its state as it is
        elif before.get("power") == "poweredOn" and vm["power"] == "poweredOff":
            reports.append(("judge", host, (ref, vm["host"], _vm_observation(vm))))
        elif vm["power"] != before.get("power"):
            reports.append(("vm", host, _vm_observation(vm)))
        return reports

    def _judged(self, vm, host_moid, observation, attempt):
        """``observation`` of a VM powered off, with who asked for it: its events and the recent
        tasks read through the API (an error is raised: nothing is reported)."""
        from pyVmomi import vim

        content = self.provider.session().content
        spec = vim.event.EventFilterSpec(entity=vim.event.EventFilterSpec.ByEntity(
            entity=vm, recursion="self"))
        verdict = None
        for _try in range(_EVENT_TRIES):
            events = [{"key": e.key, "chain": e.chainId, "kind": e._wsdlName, "user": e.userName or "",
                       "time": e.createdTime} for e in content.eventManager.QueryEvents(spec) or []]
            tasks = [{"key": props["info"].key, "description": props["info"].descriptionId,
                      "entity": props["info"].entity._moId if props["info"].entity is not None else None,
                      "queued": props["info"].queueTime, "completed": props["info"].completeTime}
                     for ref, props in retrieve(content, content.taskManager.recentTask or [],
                                                {vim.Task: ["info"]}) if "info" in props]
            verdict = judge_power_off(events, tasks, (vm._moId, host_moid))
            if verdict is not None or attempt != self._attempt:
                break
            time.sleep(_EVENT_WAIT)
        if verdict is None:
            return dict(observation, reason="powered off",
                        observed="vCenter posted no power-off event: not known to be unasked")
        unasked, why = verdict
        return dict(observation, reason="powered off", unasked=unasked, observed="vCenter: " + why)

    def _follow(self, collector, version, options, attempt):
        try:
            while attempt == self._attempt:
                update = collector.WaitForUpdatesEx(version, options)
                if attempt != self._attempt:
                    return
                if update is not None:
                    version = update.version
                    for kind, name, payload in self._apply(update):
                        if kind == "judge":
                            kind, payload = "vm", self._judged(*payload, attempt=attempt)
                        if attempt != self._attempt:
                            return
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
