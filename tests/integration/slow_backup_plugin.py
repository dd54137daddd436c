"""Fault injector (a test plugin): backup jobs that crawl, so that a test can see one running.

Loaded through ``RESILIENT_VIRT_PLUGINS=slow_backup_plugin`` (with this directory on
``PYTHONPATH``). When :data:`SLOW_ENV` is set (bytes per second, in MiB), every libvirt backup job
this process starts is throttled right after its start (``blockJobSetSpeed`` on each disk of the
handle), through the provider's own connection, so that nothing but that call comes between the
start and the throttle. A job that ends before that is left alone: give the disk enough data (a
GiB) that it cannot.
"""
import os

import pluggy

SLOW_ENV = "RESILIENT_VIRT_TEST_SLOW_BACKUP"
hookimpl = pluggy.HookimplMarker("resilient_virt")


@hookimpl(wrapper=True)
def resilient_virt_backup_start(provider, handle):
    started = yield
    speed = os.environ.get(SLOW_ENV)
    if speed and started and started.get("mode") == "push" and provider.type_name == "libvirt":
        import libvirt

        dom = provider._connection().lookupByName(started["vm"])
        for disk in started["disks"]:
            try:
                dom.blockJobSetSpeed(disk["target"], int(speed), 0)
            except libvirt.libvirtError:  # the job ended before it could be slowed down
                pass
    return started
