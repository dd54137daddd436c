"""A Proxmox VE API simulator of the test's own: fakepve (PyPI, a test tool), served in this
process on a thread of its own, with a certificate made in the test's temporary directory, on
127.0.0.1 and a port the system picks (so every pytest-xdist worker and every test has its own).

``simulated_pve`` (a fixture of conftest.py) gives a :class:`SimulatedPve`: a cluster of the three nodes pve1,
pve2 and pve3, a storage ``vmdata`` of type dir (where a linked clone's disk shows its base) and
a template ``tpl`` (vmid 100, a disk and a NIC) on pve1; every new VM runs a simulated QEMU guest
agent that reports the address 192.0.2.10 for the MAC :data:`AGENT_MAC`. ``provider`` holds the
provider settings (root@pam and a password made for the test, the certificate as ``ca_path``),
``token_provider`` the same with an API token; ``oracle`` is a proxmoxer session of the test's
own; ``call(fn)`` runs ``fn()`` on the simulator's event loop (the place to change its state
while it serves), ``later(seconds, fn)`` does so after a while.

Faults are fakepve's own (its README): config locks, offline nodes, lost quorum, slow tasks,
answers given instead of the real one (``fail``); and, the lab's additions (fakepve has
none of them), nodes in HA maintenance (``pve.maintenance``), the archives vzdump stores, their
restores, and VMs that migrate to another node.
"""
import asyncio
import contextlib
import secrets
import threading

import fakepve
from fakepve.certs import make_cert
from fakepve.model import FakeVm
from pvesim import (  # lab/ is on sys.path (conftest.py)
    with_node_maintenance, with_qemu_migration, with_qmrestore, with_vzdump_archives)

HOST = "127.0.0.1"
NODES = ("pve1", "pve2", "pve3")
AGENT_MAC = "bc:24:11:00:00:01"  # the MAC the simulated guest agent reports (fakepve's default)
TEMPLATE_ID = 100
START_TIMEOUT = 30


class SimulatedPve:
    """A started fakepve: ``pve`` (its FakePve), ``provider``, ``token_provider``, ``oracle``."""

    def __init__(self, directory):
        cert, key, _der = make_cert(str(directory), hosts=(HOST,))
        self.password = "pw-" + secrets.token_hex(8)
        self.token_secret = secrets.token_hex(16)
        self.pve = with_qmrestore(with_qemu_migration(with_vzdump_archives(with_node_maintenance(
            fakepve.FakePve(user="root@pam", password=self.password, host=HOST, port=0)))))
        self.pve.time_scale = 0
        self.pve.apitokens["root@pam!ci"] = self.token_secret
        self.pve.storages["vmdata"] = {"type": "dir", "active": 1, "content": "images",
                                       "files": set(), "path": "/var/lib/vmdata"}
        for node in NODES:
            self.pve.add_node(node)
        self.pve.add_vm(TEMPLATE_ID, "tpl", node="pve1", template=True, config={
            "memory": 512, "cores": 1, "scsi0": "vmdata:100/base-100-disk-0.qcow2,size=2G",
            "net0": "virtio=BC:24:11:AA:00:01,bridge=vmbr0", "agent": "1"})
        self.pve.storages["vmdata"]["volumes"] = {"100/base-100-disk-0.qcow2": {
            "content": "images", "format": "qcow2", "size": 2 * 1024 ** 3, "vmid": TEMPLATE_ID}}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, name="fakepve", daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.pve.start(cert, key), self.loop).result(START_TIMEOUT)
        self.ca_path = cert
        self.provider = {"type": "proxmox", "name": "pve", "host": HOST, "port": self.pve.port,
                         "username": "root@pam", "password": self.password, "ca_path": cert,
                         "storage": "vmdata"}
        self.token_provider = dict(self.provider, token_id="root@pam!ci",
                                   token_secret=self.token_secret)
        del self.token_provider["username"], self.token_provider["password"]
        self.oracle = self._oracle()

    def _serve(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def _oracle(self):
        from proxmoxer import ProxmoxAPI

        return ProxmoxAPI(HOST, port=self.pve.port, user="root@pam", password=self.password,
                          verify_ssl=self.ca_path, timeout=10)

    def call(self, fn):
        """``fn()`` run on the simulator's loop; its result (awaited when it is a coroutine)."""
        async def run():
            result = fn()
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(START_TIMEOUT)

    def later(self, seconds, fn):
        """Run ``fn()`` on the simulator's loop in ``seconds``."""
        self.loop.call_soon_threadsafe(self.loop.call_later, seconds, fn)

    def new_vm(self, name, node, status="running", **attributes):
        """A VM of 256 MiB and one core made on the simulator, with the FakeVm ``attributes``
        given (``lock``, ``ha_state``...); its vmid."""
        def add():
            vmid = max(vm.vmid for vm in self.pve.vms) + 1
            self.pve.add_vm(vmid, name, node=node, status=status, config={"memory": 256, "cores": 1})
            for key, value in attributes.items():
                setattr(self.pve.vm(vmid), key, value)
            return vmid
        return self.call(add)

    def vm_id(self, name):
        """The vmid of the VM named ``name``, read by the oracle."""
        found = [r["vmid"] for r in self.oracle.cluster.resources.get(type="vm")
                 if r.get("name") == name]
        assert len(found) == 1, found
        return found[0]

    def stop(self):
        try:
            asyncio.run_coroutine_threadsafe(self.pve.stop(), self.loop).result(START_TIMEOUT)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(START_TIMEOUT)


def serve(tmp_path, monkeypatch):
    """Yield a started SimulatedPve in ``tmp_path``; stop it afterwards (the ``simulated_pve``
    fixture of conftest.py)."""
    original = FakeVm.__init__

    def with_agent(vm, *args, **kwargs):  # every new VM's guest runs the agent
        original(vm, *args, **kwargs)
        vm.agent = {}

    monkeypatch.setattr(FakeVm, "__init__", with_agent)
    directory = tmp_path / "fakepve"
    directory.mkdir()
    sim = SimulatedPve(directory)
    try:
        yield sim
    finally:
        sim.stop()


# ``with started(tmp_path, monkeypatch) as sim:`` in a fixture of module scope
started = contextlib.contextmanager(serve)
