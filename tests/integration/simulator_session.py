"""A pyVmomi session of the test's own on the vSphere simulator, to read what it holds.

Tests use it as the oracle beside the collection: VMs by name, their power state and size, where
they are (placement), the files of a datastore folder, the simulator's tasks on a VM, and
removal of what a test created.
"""
import ssl
import time

import pytest


def trust(settings):
    """The SSL context of the test's own sessions: None for plain http, else one that verifies
    the certificate and host name with the simulator's ``ca_path`` (the lab CA)."""
    if settings["protocol"] != "https":
        return None
    return ssl.create_default_context(cafile=settings["ca_path"])


class Simulator:
    """``Simulator(settings)`` with the simulator's provider settings (host, port, username...)."""

    def __init__(self, settings):
        from pyVim.connect import SmartConnect

        self.si = SmartConnect(protocol=settings["protocol"], host=settings["host"],
                               port=settings["port"], user=settings["username"],
                               pwd=settings["password"], sslContext=trust(settings))
        self.content = self.si.RetrieveContent()

    def _named(self, kind, read):
        """``(ref, read(ref))`` for every object of ``kind``, skipping those deleted meanwhile
        (the simulator's views can keep a destroyed VM that a real vCenter would have dropped)."""
        from pyVmomi import vmodl

        view = self.content.viewManager.CreateContainerView(self.content.rootFolder, [kind], True)
        found = []
        try:
            for ref in view.view:
                try:
                    found.append((ref, read(ref)))
                except vmodl.fault.ManagedObjectNotFound:
                    continue
        finally:
            view.Destroy()
        return found

    def vms_named(self, name):
        """Every VM called ``name`` (a list: two would be a duplicate)."""
        from pyVmomi import vim

        return [ref for ref, read in self._named(vim.VirtualMachine, lambda ref: ref.name)
                if read == name]

    def power_by_name(self):
        """``{name: "poweredOn" | "poweredOff" | ...}`` of every VM."""
        from pyVmomi import vim

        return dict(pair for ref, pair in self._named(
            vim.VirtualMachine, lambda ref: (ref.name, str(ref.runtime.powerState))))

    def vm_count_by_host(self):
        """``{host name: number of VMs the host lists}``."""
        from pyVmomi import vim

        return dict(pair for ref, pair in self._named(
            vim.HostSystem, lambda ref: (ref.name, len(ref.vm))))

    def vm(self, name):
        """The VM called ``name``, or None."""
        found = self.vms_named(name)
        assert len(found) <= 1, "two VMs named %s" % name
        return found[0] if found else None

    @staticmethod
    def state(ref):
        """Power state, vCPUs and memory of ``ref``; None when it is gone."""
        if ref is None:
            return None
        try:
            hardware = ref.config.hardware
            return {"power": str(ref.runtime.powerState), "vcpus": hardware.numCPU,
                    "memory_mb": hardware.memoryMB}
        except Exception:  # noqa: BLE001 - destroyed meanwhile: gone
            return None

    def path(self, entity):
        """Inventory path of ``entity`` (``/DC0/vm/team-a``), by its parents up to the root."""
        names = []
        while entity != self.content.rootFolder:
            names.append(entity.name)
            entity = entity.parent
        return "/" + "/".join(reversed(names))

    def placement(self, ref):
        """Where VM ``ref`` is, in the form of the collection's ``placement``."""
        from pyVmomi import vim

        host, datacenter = ref.runtime.host, ref.parent
        while not isinstance(datacenter, vim.Datacenter):
            datacenter = datacenter.parent
        compute = host.parent
        return {"datacenter": datacenter.name, "host": host.name,
                "cluster": compute.name if isinstance(compute, vim.ClusterComputeResource)
                else None,
                "resource_pool": self.path(ref.resourcePool) if ref.resourcePool else None,
                "folder": self.path(ref.parent),
                "datastore": ref.config.files.vmPathName[1:].split("]")[0]}

    def files(self, datastore, folder):
        """Names of the files in ``folder`` of ``datastore`` (a vim.Datastore), by its browser;
        [] when the folder does not exist."""
        from pyVmomi import vim

        task = datastore.browser.SearchDatastore_Task(
            datastorePath="[%s] %s" % (datastore.name, folder),
            searchSpec=vim.host.DatastoreBrowser.SearchSpec(matchPattern=["*"]))
        end = time.monotonic() + 10
        while str(task.info.state) not in ("success", "error"):
            assert time.monotonic() < end
            time.sleep(0.05)
        if str(task.info.state) == "error":
            return []
        return sorted(f.path for f in task.info.result.file)

    def tasks_on(self, ref):
        """Keys and kinds (``VirtualMachine.reset``...) of the simulator's tasks on ``ref``."""
        found = set()
        for task in self.content.taskManager.recentTask:
            try:
                info = task.info
                if info.entity == ref:
                    found.add((info.key, info.descriptionId))
            except Exception:  # noqa: BLE001 - a task whose entity is gone: not this VM's
                continue
        return found

    def remove(self, name):
        """Power off and destroy every VM called ``name``."""
        for ref in self.vms_named(name):
            if str(ref.runtime.powerState) != "poweredOff":
                ref.PowerOffVM_Task()
                end = time.monotonic() + 30
                while str(ref.runtime.powerState) != "poweredOff":
                    if time.monotonic() > end:
                        pytest.fail("the simulator did not power off %s within 30 s" % name)
                    time.sleep(0.1)
            _wait(ref.Destroy_Task(), "destroy " + name)

    def close(self):
        from pyVim.connect import Disconnect

        Disconnect(self.si)


def _wait(task, what, limit=30):
    """Wait for a simulator task to end, so that the next test never meets it half done."""
    end = time.monotonic() + limit
    while str(task.info.state) not in ("success", "error"):
        if time.monotonic() > end:
            pytest.fail("the simulator did not %s within %d s" % (what, limit))
        time.sleep(0.05)
