"""Run the hypervisor_events source outside ansible-rulebook, one JSON line per event.

    python event_source_process.py ARGS.json

It loads the source plugin from the collection's installed path (as ansible-rulebook loads it)
and runs its ``main`` with a queue that prints each event it is given. Tests run several of
these (:class:`SourceProcess`), kill them and start them again: separate processes, as two
rulebook instances are.
"""
import asyncio
import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading

from paths import COLLECTIONS

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN = os.path.join(COLLECTIONS, "ansible_collections", "resilient", "virt", "extensions",
                      "eda", "plugins", "event_source", "hypervisor_events.py")
WAIT = 60.0  # seconds for the next event: generous on a loaded machine


class PrintingQueue:
    """What ``main`` needs of an asyncio.Queue: ``put``."""

    async def put(self, event):
        print(json.dumps(event), flush=True)


class SourceProcess:
    """A source in a process of its own (event_source_process.py); its events as dicts."""

    def __init__(self, tmp_path, name, args):
        args_file = tmp_path / ("%s.json" % name)
        args_file.write_text(json.dumps(args))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.path.dirname(HERE)]))
        with open(tmp_path / ("%s.err" % name), "w") as errors:
            self.process = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "event_source_process.py"), str(args_file)],
                stdout=subprocess.PIPE, stderr=errors, env=env)
        self.events = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.events.put(json.loads(line))

    def next_event(self):
        return self.events.get(timeout=WAIT)

    def kill(self):
        """SIGKILL: the source dies without giving its lease up."""
        self.process.kill()
        self.process.wait()


def main(args_file):
    spec = importlib.util.spec_from_file_location("hypervisor_events", PLUGIN)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    with open(args_file) as handle:
        args = json.load(handle)
    asyncio.run(plugin.main(PrintingQueue(), args))


if __name__ == "__main__":
    main(sys.argv[1])
