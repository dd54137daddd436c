"""LAB ONLY: the power control of a lab hypervisor, as a fence agent (``fencing.type:
lab_only_power``). Never for a real fleet: it kills processes of this machine.

A lab hypervisor has no BMC. Powering it off is what ``lab.py`` does to take it down: every
process in its mount namespace (libvirtd first, then virtlogd, its QEMU guests and its init)
killed. The agent proves it off by the same rule a BMC's power state would: it reads, after the
kill, that none of the processes it found is alive and that the namespace holds no process.

Settings: ``run_dir`` (the lab's run directory), ``name`` (the hypervisor, default the one to
fence). Load it with ``RESILIENT_VIRT_PLUGINS=lab_only_power`` and ``lab/`` on ``PYTHONPATH``.
"""
import pluggy
from lab import Lab, LabError, _alive  # lab/lab.py: this directory is on sys.path

hookimpl = pluggy.HookimplMarker("resilient_virt")

TYPE = "lab_only_power"


@hookimpl
def resilient_virt_fence_hypervisor(hypervisor, fencing):
    """Power ``hypervisor`` of the lab off: kill every process of its namespace, then prove it."""
    if fencing.get("type") != TYPE:
        return None
    name = fencing.get("name") or hypervisor
    try:
        the_lab = Lab(fencing["run_dir"])
        hv = the_lab.hypervisor(name)
        found = hv.processes()
        if not found:
            return {"fenced": True, "action": None,
                    "evidence": "no process runs in the namespace of lab hypervisor %s" % name}
        qemu = len(hv.qemu_pids())
        the_lab.down([name])
    except (KeyError, LabError) as exc:
        return {"fenced": False, "reason": "lab hypervisor %s was not powered off: %s"
                                           % (name, exc)}
    alive = [pid for pid in found if _alive(pid)] + hv.processes()
    if alive:
        return {"fenced": False, "action": "kill",
                "reason": "processes %s of lab hypervisor %s are alive after the kill"
                          % (sorted(set(alive)), name)}
    return {"fenced": True, "action": "killed libvirtd, virtlogd and %d QEMU process(es)" % qemu,
            "evidence": "none of the %d processes of lab hypervisor %s is alive, and its namespace "
                        "holds no process" % (len(found), name)}
