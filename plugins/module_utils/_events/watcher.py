# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One provider followed by a thread of its own: connected, watched, reconnected.

The thread opens the backend's watch (``watch_for``), reports the VMs it finds and what its
events say, and waits for the connection to close. Then it reconnects at once; when that fails,
it reports the provider unreachable since the connection closed (or since the first failed
connect), and tries again after the core's backoff (``retry.backoff_delay`` of the resilience
settings, plus jitter), through the provider's circuit breaker, which every process shares: an
open breaker is waited out until it half-opens, without connecting. A connect that does not
answer within ``timeout_validate`` (a frozen daemon accepts the connection and answers
nothing) is abandoned and counts as a failure.

What it sees goes to ``report(message)``, one tuple each: ``("up", key, at, vms)``,
``("down", key, since, observed)`` and ``("vm", key, at, observation)``. A provider that
manages hypervisors (vSphere: a vCenter and its hosts; the watch's ``manager``) reports each
host under the key ``<provider key>/<host name>``, and a failure to reach the provider itself
as ``("unanswered", key, since, observed)``, which says nothing about its hosts.
"""
import random
import threading
import time

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import run_with_timeout
from ansible_collections.resilient.virt.plugins.module_utils._resilience.retry import JITTER, backoff_delay
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, NotSupported, StoreUnavailable, Timeout, classify)

__all__ = ("ProviderWatcher", "watch_for", "WATCHED_TYPES")

WATCHED_TYPES = ("libvirt", "vsphere")
_POLL = 0.5  # seconds between two looks at the stop flag while connected


def watch_for(provider, report, hosts, keepalive_interval, keepalive_count):
    """The backend's watch of ``provider`` (a backend Provider), reporting VM observations to
    ``report(observation)`` or, for a vCenter, its hosts' verdicts to ``hosts(kind, name,
    payload)``; ``keepalive_interval`` is also the longest a vCenter's update wait lasts."""
    if provider.type_name == "libvirt":
        # imported here: only a libvirt provider needs it, and it loads libvirt-python
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.events import (
            DomainWatch)

        return DomainWatch(provider, report, keepalive_interval, keepalive_count)
    if provider.type_name == "vsphere":
        from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.events import (
            HostWatch)

        return HostWatch(provider, hosts, keepalive_interval)
    raise NotSupported("events of %s providers are not watched; the event source watches %s "
                       "providers" % (provider.type_name, ", ".join(WATCHED_TYPES)))


class ProviderWatcher:
    """The watching thread of ``guarded`` (a GuardedProvider of its own)."""

    def __init__(self, guarded, settings, report, stopping, keepalive_interval=5,
                 keepalive_count=3, clock=time.time):
        self.guarded = guarded
        self.key = guarded.key
        self.settings = settings
        self.report = report
        self.stopping = stopping
        self.clock = clock
        self.watch = watch_for(guarded.provider, self._vm, self._host, keepalive_interval,
                               keepalive_count)
        self.thread = threading.Thread(target=self.run, name="resilient-virt:watch %s" % self.key,
                                       daemon=True)

    def _vm(self, observation):
        self.report(("vm", self.key, self.clock(), observation))

    def _host(self, kind, name, payload):
        self.report((kind, "%s/%s" % (self.key, name), self.clock(), payload))

    def _unreachable(self, since, observed):
        """The provider does not answer: it is down, or, a manager, unanswered."""
        self.report(("unanswered" if self.watch.manager else "down", self.key, since, observed))

    def _connected(self, found):
        if self.watch.manager:
            for kind, name, payload in found:
                self._host(kind, name, payload)
        else:
            self.report(("up", self.key, self.clock(), found))

    def _classify(self, exc):
        return classify(exc, (self.guarded.provider.classify_error,))

    def run(self):
        failures = 0
        down_since, closed = None, None  # when it began; how the last connection ended
        breaker = self.guarded.policy.breaker
        while not self.stopping.is_set():
            try:
                permit = breaker.before_call(timeout=self.settings.store_timeout)
            except BreakerOpen as err:
                if down_since is None:
                    down_since = self.clock()
                    self._unreachable(down_since, err.message)
                self.stopping.wait(max(_POLL, err.half_open_at - time.time()))
                continue
            except StoreUnavailable:
                permit = None  # no breaker without its store: connect all the same
            try:
                vms = run_with_timeout(self.watch.connect, self.settings.timeout_validate,
                                       "connect to %s" % self.key)
            except Exception as exc:  # noqa: BLE001 - every failure to connect is reported
                if isinstance(exc, Timeout):
                    self.watch.abandon()
                err = self._classify(exc)
                self._verdict(breaker.on_failure, permit, err)
                failures += 1
                if down_since is None:
                    down_since = closed[0] if closed else self.clock()
                    observed = err.message if not closed else "%s; reconnecting: %s" % (
                        closed[1], err.message)
                    self._unreachable(down_since, observed)
                delay = backoff_delay(failures, self.settings.retry)
                self.stopping.wait(delay + random.uniform(0.0, JITTER * delay))
                continue
            self._verdict(breaker.on_success, permit)
            failures, down_since, closed = 0, None, None
            self._connected(vms)
            while not self.watch.closed.wait(_POLL):
                if self.stopping.is_set():
                    break
            if not self.watch.closed.is_set():  # stopping
                break
            closed = (self.clock(), "connection closed (%s)" % self.watch.close_reason)
            self.watch.close()
        self.watch.close()

    @staticmethod
    def _verdict(record, permit, *args):
        """Tell the breaker how the connect went; a store failure leaves it untold."""
        if permit is None:
            return
        try:
            record(permit, *args)
        except StoreUnavailable:
            pass

    def start(self):
        self.thread.start()
