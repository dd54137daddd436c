# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the watchers saw, announced once: by the lease holder, each change one event.

Every instance keeps what its watchers observed of each provider (reachable or not, since when
and how, its VMs). What was announced lives in the state store (namespace :data:`NAMESPACE`,
key ``<group>/<provider key>``): ``reachable``, ``since``, ``observed`` and ``vms``
(``{uuid: {name, state}}``). Only the holder of the lease ``<group>`` announces: it compares what
it observed with the record, puts one event per difference, then writes the record. So a change
is announced once however many instances watch, an instance that starts again announces
nothing it (or another) announced before but an outage that lasts, and an instance that takes the lease over announces
what the one before it had not. An instance that dies between putting an event and writing the
record announces that event again when it (or another) takes over: at least once, never lost.
An instance that takes the lease anew (at its start, or from another holder) announces again,
``repeated``, each provider its record holds unreachable and that it too finds unreachable: the
reaction to the first event may have died with the instance that ran it (docs/ha.md).

A vSphere provider's hypervisors are its hosts, each observed and recorded under
``<provider key>/<host name>``; a vCenter that does not answer (``unanswered``) is logged, once
per outage, and nothing about its hosts is observed or announced until it answers again.

The first record of a provider is its baseline: nothing is announced for it unless the provider
is unreachable. A VM is announced when it went from running or paused to stopped without being
asked (its observation's ``unasked``); a VM first seen, started, or gone is recorded silently.
A VM observation may say how it was told (``observed``: vSphere's says how the power-off was
judged); else it is libvirt's ``lifecycle event``.
"""
import queue
import time

from ansible_collections.resilient.virt.plugins.module_utils._events import event
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time

__all__ = ("Announcer", "NAMESPACE")

NAMESPACE = "hypervisor_events"
_ACTIVE = ("running", "paused")


class Announcer:
    """Takes the watchers' messages (:meth:`report`) and announces through ``emit(event)``.

    ``providers``: ``{key: {"name", "key"}}`` (a host of a provider is described by its
    provider's entry and ``hypervisor``, its name); ``open_store()`` gives the state store;
    ``lease`` a ``_state.lease.Lease``; ``source`` this instance's id; ``log(text)`` says what
    went wrong without stopping (a store that fails, a lease lost).
    """

    def __init__(self, providers, open_store, lease, group, source, emit, log, clock=time.time):
        self.providers = providers
        self.open_store = open_store
        self.lease = lease
        self.group = group
        self.source = source
        self.emit = emit
        self.log = log
        self.clock = clock
        self.inbox = queue.Queue()
        self.observed = {}  # key -> {"reachable", "since", "observed", "vms"}
        self.holding = False
        self.term = None  # the lease's term this instance last held it in
        self.settled = set()  # keys announced in this term: their records are not repeated

    def report(self, message):
        """A watcher's message (``watcher.py``); thread-safe."""
        self.inbox.put(message)

    def run(self, stopping, tick):
        """Take messages, and every ``tick`` seconds renew the lease and, holding it, announce
        what is left to announce, until ``stopping`` is set."""
        renew_at = 0.0
        while not stopping.is_set():
            if time.monotonic() >= renew_at:
                self._renew()
                renew_at = time.monotonic() + tick
            try:
                message = self.inbox.get(timeout=max(0.05, renew_at - time.monotonic()))
            except queue.Empty:
                continue
            self._handle(message)
        if self.holding:
            self.lease.release()

    def _handle(self, message):
        """A watcher's message observed and announced; a vCenter that does not answer is
        logged, and its hosts are not judged meanwhile."""
        if message[0] == "unanswered":
            self.log("%s does not answer (since %s: %s); nothing is announced about its "
                     "hypervisors until it answers" % (message[1], format_time(message[2]),
                                                       message[3]))
            return
        self._observe(message)
        self._announce(message[1])

    def _renew(self):
        try:
            self.lease.store = self.open_store()  # a store that failed is opened again
            held = self.lease.hold()
        except Exception as err:  # noqa: BLE001 - a store outage: act no more until it answers
            held = False
            self.log("the lease %s was not renewed, so nothing is announced meanwhile: %s"
                     % (self.group, getattr(err, "message", None) or err))
        self.holding = held
        if held and self.lease.term != self.term:  # taken anew: its reactions may have died
            self.term = self.lease.term
            self.settled = set()
        if held:  # what another holder left, or a write that failed, is announced now
            for key in list(self.observed):
                self._announce(key)

    def _observe(self, message):
        kind, key, at, payload = message
        seen = self.observed.setdefault(key, {"reachable": None, "since": at, "observed": None,
                                              "vms": {}})
        if kind == "up":
            seen.update(reachable=True, since=at, observed=None)
            seen["vms"] = {uuid: dict(vm, at=at, observed="state on connect")
                           for uuid, vm in payload.items()}
        elif kind == "down":
            seen.update(reachable=False, since=at, observed=payload)
        elif payload["state"] == "undefined":
            seen["vms"].pop(payload["uuid"], None)
        else:
            seen["vms"][payload["uuid"]] = dict(payload, at=at,
                                                observed=payload.get("observed") or "lifecycle event")

    def _announce(self, key):
        """Announce what differs between the observation of ``key`` and its record."""
        seen = self.observed.get(key)
        if not self.holding or seen is None or seen["reachable"] is None:
            return
        record_key = "%s/%s" % (self.group, key)
        try:
            store = self.open_store()
            record = store.get(NAMESPACE, record_key)
            events, new = self._changes(self._described(key), record, seen,
                                        key not in self.settled)
            for item in events:
                if not self.lease.valid():  # renewed too late: another may act by now
                    self.holding = False
                    return
                self.emit(item)
            if new != record:
                store.update(NAMESPACE, record_key, lambda _current, _now: (new, None))
            self.settled.add(key)
        except Exception as err:  # noqa: BLE001 - logged; the next message or renewal retries
            self.log("what %s observed of %s was not announced: %s"
                     % (self.source, key, getattr(err, "message", None) or err))

    def _described(self, key):
        """The provider entry of ``key``; for a host, with ``hypervisor``: its name."""
        if key in self.providers:
            return self.providers[key]
        provider_key, _slash, host = key.rpartition("/")  # vSphere writes "/" in names as %2f
        return dict(self.providers[provider_key], hypervisor=host)

    def _changes(self, provider, record, seen, repeat=False):
        """(events, new record) for the observation ``seen`` against ``record``; ``repeat``:
        an unreachable record that ``seen`` confirms is announced again."""
        events = []
        vms = {uuid: {"name": vm["name"], "state": vm["state"]} for uuid, vm in seen["vms"].items()}
        new = {"reachable": seen["reachable"], "since": seen["since"],
               "observed": seen["observed"], "vms": vms}
        if record is None:
            if not seen["reachable"]:
                events.append(event.unreachable(provider, self.source, seen["since"],
                                                seen["observed"]))
            return events, new
        if seen["reachable"] != record.get("reachable"):
            if seen["reachable"]:
                events.append(event.reachable(provider, self.source, seen["since"],
                                              record.get("since")))
            else:
                events.append(event.unreachable(provider, self.source, seen["since"],
                                                seen["observed"]))
        elif not seen["reachable"]:
            new.update(since=record.get("since"), observed=record.get("observed"))
            if repeat:
                events.append(event.unreachable(provider, self.source, new["since"],
                                                new["observed"], repeated=True))
        if not seen["reachable"]:
            new["vms"] = record.get("vms") or {}  # unknown while unreachable: kept as they were
            return events, new
        before = record.get("vms") or {}
        for uuid, vm in sorted(seen["vms"].items(), key=lambda item: item[1]["name"]):
            earlier = before.get(uuid)
            if earlier is not None and earlier.get("state") in _ACTIVE and \
                    vm["state"] == "stopped" and vm.get("unasked"):
                events.append(event.vm_stopped(provider, self.source, vm))
        return events, new
