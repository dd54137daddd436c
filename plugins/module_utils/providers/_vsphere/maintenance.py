# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host in or out of vSphere's maintenance mode (EnterMaintenanceMode_Task,
ExitMaintenanceMode_Task), waited on as every vSphere task is."""
from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound

__all__ = ("set_maintenance",)


def set_maintenance(provider, hypervisor, enabled):
    """Host ``hypervisor`` in (``enabled``) or out of maintenance mode; True when it changed.
    vSphere itself moves no VM here (``evacuatePoweredOffVms`` false): the collection has."""
    session = provider.session()
    found = [(ref, props) for ref, props, _az in session.host_records()
             if props.get("name") == hypervisor]
    if not found:
        raise NotFound("no host named %r on %s" % (hypervisor, provider.key))
    ref, props = found[0]
    if bool(props.get("runtime.inMaintenanceMode")) == enabled:
        return False
    if enabled:
        task = ref.EnterMaintenanceMode_Task(timeout=0, evacuatePoweredOffVms=False)
    else:
        task = ref.ExitMaintenanceMode_Task(timeout=0)
    session.wait(task, "%s maintenance mode of host %r" % (
        "entering" if enabled else "leaving", hypervisor))
    return True
