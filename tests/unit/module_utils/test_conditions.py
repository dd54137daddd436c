"""Kubernetes-style conditions: shape, transitions, reasons."""
from datetime import datetime, timezone

import pytest

from ansible_collections.resilient.virt.plugins.module_utils import _conditions as K

T0 = 1795255200.0  # 2026-11-21T10:00:00Z
T1 = T0 + 90


def test_make_condition_shape_and_time_format():
    cond = K.make_condition("Ready", True, "VMReady", "up", now=T0)
    assert cond == {"type": "Ready", "status": True, "reason": "VMReady", "message": "up",
                    "lastTransitionTime": "2026-11-21T10:00:00Z"}
    dt = datetime(2026, 11, 21, 10, 0, 0, tzinfo=timezone.utc)
    assert K.make_condition("Ready", "True", "VMReady", now=dt)["lastTransitionTime"] == \
        "2026-11-21T10:00:00Z"
    assert K.make_condition("X", True, "R")["lastTransitionTime"].endswith("Z")


def test_status_values_are_booleans_or_null_and_old_strings_read_as_those():
    assert K.make_condition("X", False, "R")["status"] is False
    assert K.make_condition("X", None, "R")["status"] is None
    assert [K.make_condition("X", s, "R")["status"] for s in ("True", "False", "Unknown")] == [
        True, False, None]
    for bad in ("yes", 1, 0, [True]):
        with pytest.raises(ValueError, match="true, false or null"):
            K.make_condition("X", bad, "R")


def test_a_stored_string_status_keeps_its_transition_time_and_is_read_as_a_boolean():
    stored = [{"type": "Ready", "status": "True", "reason": "VMReady", "message": "old",
               "lastTransitionTime": "2026-11-21T10:00:00Z"},
              {"type": "Other", "status": "Unknown", "reason": "R", "message": "",
               "lastTransitionTime": "2026-11-21T10:00:00Z"}]
    after = K.set_condition(stored, K.vm_ready("new", now=T1))
    assert after[0]["status"] is True and after[0]["lastTransitionTime"] == "2026-11-21T10:00:00Z"
    assert after[1]["status"] is None


def test_set_condition_keeps_time_when_status_unchanged():
    before = [K.vm_create_failed(now=T0), K.vm_ready("first", now=T0)]
    after = K.set_condition(before, K.vm_ready("second", now=T1))
    assert after[1]["message"] == "second"
    assert after[1]["lastTransitionTime"] == "2026-11-21T10:00:00Z"
    assert after[0] == before[0]
    assert before[1]["message"] == "first"  # input untouched


def test_set_condition_changes_time_when_status_changes_and_appends_new_types():
    conds = K.set_condition([], K.vm_ready(now=T0))
    conds = K.set_condition(conds, K.vm_provider_error(now=T1))
    assert len(conds) == 1
    assert conds[0]["status"] is False and conds[0]["reason"] == "ProviderError"
    assert conds[0]["lastTransitionTime"] == "2026-11-21T10:01:30Z"
    failed = K.vm_create_failed(now=T1)
    conds = K.set_condition(conds, failed)
    assert [c["type"] for c in conds] == ["Ready", "Provisioning"]
    assert K.set_condition(None, failed) == [failed]


@pytest.mark.parametrize("cond, expected", [
    (K.vm_ready(), ("Ready", True, "VMReady")),
    (K.vm_provider_error(), ("Ready", False, "ProviderError")),
    (K.vm_validation_error(), ("Ready", False, "ValidationError")),
    (K.vm_create_failed(), ("Provisioning", False, "CreateFailed")),
    (K.provider_runtime_ready(True, "m"), ("ProviderRuntimeReady", True, "DeploymentReady")),
    (K.provider_runtime_ready(False, "m"), ("ProviderRuntimeReady", False, "DeploymentError")),
    (K.provider_available(True, "m"), ("ProviderAvailable", True, "HealthCheckPassed")),
    (K.provider_available(False, "m"), ("ProviderAvailable", False, "HealthCheckFailed")),
])
def test_helpers(cond, expected):
    assert (cond["type"], cond["status"], cond["reason"]) == expected


def test_a_condition_set_by_a_failure_leaves_the_message_to_the_task():
    assert [c["message"] for c in (K.vm_provider_error(), K.vm_validation_error(),
                                   K.vm_create_failed())] == ["", "", ""]
    assert K.provider_available(False, "probe timed out")["message"] == "probe timed out"
