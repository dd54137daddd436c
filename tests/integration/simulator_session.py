"""A pyVmomi session of the test's own on the vSphere simulator, to read what it holds.

Tests use it as the oracle beside the collection: VMs by name, their power state and size, the
simulator's tasks on a VM, and removal of what a test created.
"""
import time

import pytest


class Simulator:
    """``Simulator(settings)`` with the simulator's provider settings (host, port, username...)."""

    def __init__(self, settings):
        from pyVim.connect import SmartConnect

        self.si = SmartConnect(protocol="http", host=settings["host"], port=settings["port"],
                               user=settings["username"], pwd=settings["password"])
        self.content = self.si.RetrieveContent()

    def vms_named(self, name):
        """Every VM called ``name`` (a list: two would be a duplicate)."""
        from pyVmomi import vim, vmodl

        view = self.content.viewManager.CreateContainerView(self.content.rootFolder,
                                                            [vim.VirtualMachine], True)
        found = []
        try:
            for ref in view.view:
                try:
                    if ref.name == name:
                        found.append(ref)
                except vmodl.fault.ManagedObjectNotFound:  # deleted since the view was made
                    continue
        finally:
            view.Destroy()
        return found

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
            ref.Destroy_Task()

    def close(self):
        from pyVim.connect import Disconnect

        Disconnect(self.si)
