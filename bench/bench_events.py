"""Benchmark of the hypervisor_events source: seconds from a failure, or a return, to its event.

A lab of one hypervisor of its own (in a temporary directory, taken down at the end) and the
source run in this process with its default settings (keepalive 5 s x 3, the default resilience
settings: their backoff between reconnects and their circuit breaker), unless told otherwise.
Each round:

* ``crash``: a guest's QEMU process killed (SIGKILL) -> ``vm_crashed``;
* ``stop``: libvirtd killed (SIGKILL) -> ``hypervisor_unreachable``;
* ``start``: libvirtd started (its own start included) -> ``hypervisor_reachable``;
* ``freeze``: libvirtd stopped (SIGSTOP: it keeps its socket, answers nothing) ->
  ``hypervisor_unreachable``, through keepalive and a reconnect that times out;
* ``thaw``: libvirtd continued (SIGCONT) -> ``hypervisor_reachable``.

It prints the median and the largest of each over the rounds, with the settings and the load.

    python3 bench/bench_events.py [--rounds N] [--keepalive INTERVAL COUNT]
"""
import argparse
import asyncio
import functools
import importlib.util
import os
import signal
import statistics
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".build", "collections")
PLUGIN = os.path.join(COLLECTIONS, "ansible_collections", "resilient", "virt", "extensions", "eda",
                      "plugins", "event_source", "hypervisor_events.py")
sys.path[:0] = [os.path.join(ROOT, "lab"), COLLECTIONS]
import lab  # noqa: E402 - lab/lab.py, on sys.path only now

WAIT = 300.0  # seconds for one event at most
STEPS = ("crash", "stop", "start", "freeze", "thaw")


def _plugin():
    spec = importlib.util.spec_from_file_location("hypervisor_events", PLUGIN)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    return plugin


def _domain_xml(name):
    domain = ET.Element("domain", type="qemu")
    ET.SubElement(domain, "name").text = name
    ET.SubElement(domain, "memory", unit="MiB").text = "64"
    ET.SubElement(domain, "vcpu").text = "1"
    ET.SubElement(ET.SubElement(domain, "os"), "type", arch="x86_64").text = "hvm"
    ET.SubElement(domain, "devices")
    return ET.tostring(domain, encoding="unicode")


def _start_guest(hv):
    import libvirt

    conn = libvirt.open(hv.uri)
    try:
        try:
            dom = conn.lookupByName("bench-guest")
        except libvirt.libvirtError:
            dom = conn.defineXML(_domain_xml("bench-guest"))
        if not dom.isActive():
            dom.create()
    finally:
        conn.close()


async def _rounds(the_lab, hv, args, rounds):
    plugin = _plugin()
    events = asyncio.Queue()
    source = asyncio.ensure_future(plugin.main(events, args))
    took = {step: [] for step in STEPS}

    async def timed(step, action, wanted):
        began = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, action)
        event = await asyncio.wait_for(events.get(), WAIT)
        if event["type"] != wanted:
            raise SystemExit("%s: got %s, expected %s" % (step, event, wanted))
        took[step].append(time.monotonic() - began)

    try:
        while not os.path.exists(args["state_store"][len("sqlite://"):]):
            await asyncio.sleep(0.1)
        await asyncio.sleep(2)  # the first connect and its record
        for _round in range(rounds):
            await asyncio.get_running_loop().run_in_executor(None, _start_guest, hv)
            guest = hv.qemu_pids()[0]
            await timed("crash", functools.partial(os.kill, guest, signal.SIGKILL), "vm_crashed")
            await timed("stop", lambda: the_lab.stop("hv1"), "hypervisor_unreachable")
            await timed("start", lambda: the_lab.start("hv1"), "hypervisor_reachable")
            await timed("freeze", lambda: the_lab.freeze("hv1"), "hypervisor_unreachable")
            await timed("thaw", lambda: the_lab.thaw("hv1"), "hypervisor_reachable")
    finally:
        source.cancel()
        await asyncio.gather(source, return_exceptions=True)
    return took


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keepalive", type=int, nargs=2, default=(5, 3),
                        metavar=("INTERVAL", "COUNT"))
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-events-") as work:
        the_lab = lab.Lab(os.path.join(work, "lab"))
        the_lab.up(1, vsphere=False, proxmox=False)
        try:
            hv = the_lab.hypervisor("hv1")
            args = {"providers": {"hv1": {"type": "libvirt", "uri": hv.uri}},
                    "state_store": "sqlite://" + os.path.join(work, "state.db"),
                    "keepalive_interval": options.keepalive[0],
                    "keepalive_count": options.keepalive[1]}
            took = asyncio.run(_rounds(the_lab, hv, args, options.rounds))
        finally:
            the_lab.thaw("hv1")
            the_lab.down()
    print("hypervisor_events: seconds from the change to its event, %d rounds, keepalive %d s x "
          "%d, default resilience settings, load %.1f"
          % (options.rounds, options.keepalive[0], options.keepalive[1], os.getloadavg()[0]))
    for step in STEPS:
        print("  %-7s median %6.2f s   max %6.2f s"
              % (step, statistics.median(took[step]), max(took[step])))


if __name__ == "__main__":
    main()
