"""resilient.virt.hypervisor_events: hypervisor outages and VMs that stopped unasked, as events.

Arguments (``docs/ha.md`` says more):

providers: {name: provider settings}, as the modules' ``providers`` option (libvirt and vSphere
    providers; a vSphere provider's hypervisors are its hosts)
state_store: the state store URL every instance of a group shares (default as the modules')
resilience: the modules' resilience settings: backoff between reconnects, circuit breaker,
    timeout_validate for each connect
group: the lease's name (default hypervisor_events): instances of a group announce once
lease_seconds: how long the lease lasts (default 15)
keepalive_interval, keepalive_count: libvirt keepalive (default 5 s, 3 unanswered); for
    vSphere, keepalive_interval is the longest a wait for host updates lasts

A libvirt provider is one hypervisor: unreachable when its daemon does not answer. A vSphere
host is unreachable when its vCenter reports it ``notResponding`` (not when an administrator
disconnected it, nor when vCenter powered it off or put it in standby); a vCenter that does not
answer is logged, and nothing is announced about its hosts until it answers again. A VM that
stops unasked is announced for both: a vSphere VM powered off with no task and no user to it,
judged from its vCenter's events and recent tasks.

Events: ``hypervisor_unreachable``, ``hypervisor_reachable``, ``vm_crashed``, ``vm_stopped``
(their fields: ``plugins/module_utils/_events/event.py``).

Example::

    sources:
      - resilient.virt.hypervisor_events:
          providers:
            kvm1: {type: libvirt, uri: "qemu+ssh://root@kvm1/system"}
            vc1: {type: vsphere, host: vcenter.example.com, username: "{{ vc_user }}",
                  password: "{{ vc_password }}"}
          state_store: "redis://redis.example.com:6379/0"
"""
import asyncio
import concurrent.futures
import logging
import os
import sys
import threading

try:
    from ansible_collections.resilient.virt.plugins.module_utils._events.source import HypervisorEvents
except ImportError:  # ansible-rulebook loads this file by its path: find the collection from it
    sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 7)))
    from ansible_collections.resilient.virt.plugins.module_utils._events.source import HypervisorEvents

LOG = logging.getLogger("resilient.virt.hypervisor_events")
_PUT_WAIT = 0.5  # seconds between two looks at the stop flag while the queue is full


class _Stopped(Exception):
    """The source is stopping: the event was not put."""


async def main(queue, args):
    """Put the events of the providers in ``args`` on ``queue`` until cancelled."""
    loop = asyncio.get_running_loop()
    stopping = threading.Event()

    def emit(event):
        """Put ``event`` on the queue and return once it is there (the announcer then writes
        that it was announced)."""
        future = asyncio.run_coroutine_threadsafe(queue.put(event), loop)
        while True:
            try:
                return future.result(_PUT_WAIT)
            except concurrent.futures.TimeoutError:
                if stopping.is_set():
                    future.cancel()
                    raise _Stopped() from None

    source = HypervisorEvents(args, emit, LOG.warning)
    try:
        await loop.run_in_executor(None, source.run, stopping)
    finally:
        stopping.set()
