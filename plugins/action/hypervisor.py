# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs resilient.virt.hypervisor inside the controller's worker when the task runs there."""
from ansible_collections.resilient.virt.plugins.plugin_utils._in_process import InProcessAction


class ActionModule(InProcessAction):
    """Runs the module this file is named after (InProcessAction.module)."""
