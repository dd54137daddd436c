"""Run the hypervisor_events source outside ansible-rulebook, one JSON line per event.

    python event_source_process.py ARGS.json

It loads the source plugin from the collection's installed path (as ansible-rulebook loads it)
and runs its ``main`` with a queue that prints each event it is given. Tests run several of
these, kill them and start them again: separate processes, as two rulebook instances are.
"""
import asyncio
import importlib.util
import json
import os
import sys

from paths import COLLECTIONS

PLUGIN = os.path.join(COLLECTIONS, "ansible_collections", "resilient", "virt", "extensions",
                      "eda", "plugins", "event_source", "hypervisor_events.py")


class PrintingQueue:
    """What ``main`` needs of an asyncio.Queue: ``put``."""

    async def put(self, event):
        print(json.dumps(event), flush=True)


def main(args_file):
    spec = importlib.util.spec_from_file_location("hypervisor_events", PLUGIN)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    with open(args_file) as handle:
        args = json.load(handle)
    asyncio.run(plugin.main(PrintingQueue(), args))


if __name__ == "__main__":
    main(sys.argv[1])
