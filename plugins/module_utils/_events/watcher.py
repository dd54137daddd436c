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
``("down", key, since, observed)`` and ``("vm", key, at, observation)``.
"""
import random
import threading
import time

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import run_with_timeout
from ansible_collections.resilient.virt.plugins.module_utils._resilience.retry import JITTER, backoff_delay
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, NotSupported, StoreUnavailable, Timeout, classify)

__all__ = ("ProviderWatcher", "watch_for", "WATCHED_TYPES")

WATCHED_TYPES = ("libvirt",)
_POLL = 0.5  # seconds between two looks at the stop flag while connected


def watch_for(provider, report, keepalive_interval, keepalive_count):
    """The backend's watch of ``provider`` (a backend Provider), reporting VM observations."""
    if provider.type_name == "libvirt":
        # imported here: only a libvirt provider needs it, and it loads libvirt-python
        from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.events import (
            DomainWatch)

        return DomainWatch(provider, report, keepalive_interval, keepalive_count)
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
        self.watch = watch_for(guarded.provider, self._vm, keepalive_interval, keepalive_count)
        self.thread = threading.Thread(target=self.run, name="resilient-virt:watch %s" % self.key,
                                       daemon=True)

    def _vm(self, observation):
        self.report(("vm", self.key, self.clock(), observation))

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
                    self.report(("down", self.key, down_since, err.message))
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
                    self.report(("down", self.key, down_since, observed))
                delay = backoff_delay(failures, self.settings.retry)
                self.stopping.wait(delay + random.uniform(0.0, JITTER * delay))
                continue
            self._verdict(breaker.on_success, permit)
            failures, down_since, closed = 0, None, None
            self.report(("up", self.key, self.clock(), vms))
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
