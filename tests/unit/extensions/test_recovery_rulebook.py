"""The shipped rulebook hypervisor_recovery hands the recover_hypervisor playbook the VMs to
restore from backups: its run_playbook action's extra_vars, rendered by ansible-rulebook's own
templating with the variables a ``--vars`` file gives (ansible-rulebook passes the playbook
those extra_vars and nothing else of its variables).
"""
import os

import yaml
from ansible_rulebook.util import render_string_or_return_value

from paths import ROOT

RULEBOOK = os.path.join(ROOT, "extensions", "eda", "rulebooks", "hypervisor_recovery.yml")
SETTINGS = {"recovery_providers": {"kvm1": {"type": "libvirt", "uri": "qemu:///system"}},
            "recovery_state_store": "sqlite:///tmp/state.db",
            "recovery_fencing_by_hypervisor": {"kvm1": {"type": "redfish"}},
            "recovery_requirements": {"*": 1}, "recovery_priorities": [],
            "recovery_creator": "resilient.virt", "recovery_grace": 30}


def _extra_vars(variables):
    """The extra_vars the rulebook's run_playbook action gives the playbook, rendered."""
    with open(RULEBOOK) as handle:
        [ruleset] = yaml.safe_load(handle)
    [rule] = ruleset["rules"]
    action = rule["action"]["run_playbook"]
    assert action["name"] == "resilient.virt.recover_hypervisor"
    return dict((key, render_string_or_return_value(value, variables))
                for key, value in action["extra_vars"].items())


def test_the_vms_to_restore_from_backups_reach_the_playbook():
    wanted = [{"match": "db-*"}]
    rendered = _extra_vars(dict(SETTINGS, recovery_restore_from_backup=wanted))
    assert rendered["recovery_restore_from_backup"] == wanted


def test_without_them_none_is_restored():
    assert _extra_vars(dict(SETTINGS))["recovery_restore_from_backup"] == []
