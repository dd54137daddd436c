"""Kubernetes-style conditions: shape, transitions, reasons."""
from datetime import datetime, timezone

import pytest

from ansible_collections.resilient.virt.plugins.module_utils import _conditions as K
from ansible_collections.resilient.virt.plugins.module_utils import errors as E

T0 = 1795255200.0  # 2026-11-21T10:00:00Z
T1 = T0 + 90


def test_make_condition_shape_and_time_format():
    cond = K.make_condition("Ready", "True", "VMReady", "up", now=T0)
    assert cond == {"type": "Ready", "status": "True", "reason": "VMReady", "message": "up",
                    "lastTransitionTime": "2026-11-21T10:00:00Z"}
    dt = datetime(2026, 11, 21, 10, 0, 0, tzinfo=timezone.utc)
    assert K.make_condition("Ready", "True", "VMReady", now=dt)["lastTransitionTime"] == \
        "2026-11-21T10:00:00Z"
    assert K.make_condition("X", True, "R")["lastTransitionTime"].endswith("Z")


def test_status_values():
    assert K.make_condition("X", False, "R")["status"] == "False"
    assert K.make_condition("X", None, "R")["status"] == "Unknown"
    assert K.make_condition("X", "Unknown", "R")["status"] == "Unknown"
    with pytest.raises(ValueError, match="True, False, Unknown"):
        K.make_condition("X", "yes", "R")


def test_set_condition_keeps_time_when_status_unchanged():
    before = [K.vm_create_failed(E.QuotaExceeded("full"), now=T0), K.vm_ready("first", now=T0)]
    after = K.set_condition(before, K.vm_ready("second", now=T1))
    assert after[1]["message"] == "second"
    assert after[1]["lastTransitionTime"] == "2026-11-21T10:00:00Z"
    assert after[0] == before[0]
    assert before[1]["message"] == "first"  # input untouched


def test_set_condition_changes_time_when_status_changes_and_appends_new_types():
    conds = K.set_condition([], K.vm_ready(now=T0))
    conds = K.set_condition(conds, K.vm_provider_error(E.Unavailable("host down"), now=T1))
    assert len(conds) == 1
    assert conds[0]["status"] == "False" and conds[0]["reason"] == "ProviderError"
    assert conds[0]["lastTransitionTime"] == "2026-11-21T10:01:30Z"
    failed = K.vm_create_failed(E.QuotaExceeded("full"), now=T1)
    conds = K.set_condition(conds, failed)
    assert [c["type"] for c in conds] == ["Ready", "Provisioning"]
    assert K.set_condition(None, failed) == [failed]


@pytest.mark.parametrize("cond, expected", [
    (K.vm_ready(), ("Ready", "True", "VMReady")),
    (K.vm_provider_error(E.Unavailable("x")), ("Ready", "False", "ProviderError")),
    (K.vm_validation_error(E.InvalidSpec("x")), ("Ready", "False", "ValidationError")),
    (K.vm_create_failed(E.QuotaExceeded("x")), ("Provisioning", "False", "CreateFailed")),
    (K.provider_runtime_ready(True, "m"), ("ProviderRuntimeReady", "True", "DeploymentReady")),
    (K.provider_runtime_ready(False, "m"), ("ProviderRuntimeReady", "False", "DeploymentError")),
    (K.provider_available(True, "m"), ("ProviderAvailable", "True", "HealthCheckPassed")),
    (K.provider_available(False, "m"), ("ProviderAvailable", "False", "HealthCheckFailed")),
])
def test_helpers(cond, expected):
    assert (cond["type"], cond["status"], cond["reason"]) == expected


def test_error_messages_come_from_the_error_without_secrets():
    assert K.vm_create_failed(E.QuotaExceeded("no memory on any host"))["message"] == \
        "no memory on any host"
    wrapped = RuntimeError("lib")
    wrapped.__cause__ = E.InvalidSpec("disks[0].size_gb must be > 0")
    assert K.vm_validation_error(wrapped)["message"] == "disks[0].size_gb must be > 0"
    msg = K.vm_provider_error(ValueError("https://root:toor@h/sdk failed"))["message"]
    assert "toor" not in msg and "h/sdk failed" in msg
    assert K.provider_available(False, "probe timed out")["message"] == "probe timed out"
