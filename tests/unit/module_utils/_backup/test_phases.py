"""The phase machine of backup records: every legal move accepted, every other one refused."""
import itertools

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._backup import phases
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict

# Velero's phases and moves, written out here (the oracle), not read from the code
ALL = ["New", "FailedValidation", "InProgress", "WaitingForPluginOperations",
       "WaitingForPluginOperationsPartiallyFailed", "Finalizing", "FinalizingPartiallyFailed",
       "Completed", "PartiallyFailed", "Failed"]
LEGAL = {
    ("New", "FailedValidation"), ("New", "InProgress"), ("New", "Failed"),
    ("InProgress", "WaitingForPluginOperations"),
    ("InProgress", "WaitingForPluginOperationsPartiallyFailed"), ("InProgress", "Finalizing"),
    ("InProgress", "FinalizingPartiallyFailed"), ("InProgress", "Completed"),
    ("InProgress", "PartiallyFailed"), ("InProgress", "Failed"),
    ("WaitingForPluginOperations", "WaitingForPluginOperationsPartiallyFailed"),
    ("WaitingForPluginOperations", "Finalizing"),
    ("WaitingForPluginOperations", "FinalizingPartiallyFailed"),
    ("WaitingForPluginOperations", "Failed"),
    ("WaitingForPluginOperationsPartiallyFailed", "FinalizingPartiallyFailed"),
    ("WaitingForPluginOperationsPartiallyFailed", "Failed"),
    ("Finalizing", "Completed"), ("Finalizing", "PartiallyFailed"), ("Finalizing", "Failed"),
    ("FinalizingPartiallyFailed", "PartiallyFailed"), ("FinalizingPartiallyFailed", "Failed"),
}


def test_the_phases_are_velero_s():
    assert list(phases.PHASES) == ALL
    assert set(phases.FINAL) == {"FailedValidation", "Completed", "PartiallyFailed", "Failed"}


@pytest.mark.parametrize("current,wanted", list(itertools.product(ALL, ALL)))
def test_every_move(current, wanted):
    if current == wanted:
        assert phases.check_transition(current, wanted) is False  # re-applying: a no-op
    elif (current, wanted) in LEGAL:
        assert phases.check_transition(current, wanted) is True
    else:
        with pytest.raises(Conflict) as caught:
            phases.check_transition(current, wanted, "backup record r1")
        assert current in caught.value.message and wanted in caught.value.message
        assert caught.value.details == {"from": current, "to": wanted}


def test_an_unknown_phase_is_refused_with_the_list():
    with pytest.raises(Conflict, match="'Done' is not a phase; phases are New, "):
        phases.check_transition("InProgress", "Done")


@pytest.mark.parametrize("current,wanted,critical", [
    ("New", "InProgress", False), ("InProgress", "InProgress", True), ("InProgress", "Completed", True),
    ("New", "Failed", True), ("Finalizing", "Completed", True), ("Finalizing", "Finalizing", False),
    ("New", "FailedValidation", True)])
def test_critical_writes_leave_in_progress_or_reach_a_final_phase(current, wanted, critical):
    assert phases.is_critical(current, wanted) is critical
