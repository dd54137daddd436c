"""pyVmomi faults (real fault objects) and vSphere endpoint failures map into the taxonomy."""
import http.client

import pyVmomi
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotFound, NotSupported, QuotaExceeded, Timeout, Unauthorized,
    Unavailable)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.faults import (
    classify_fault)

vim, vmodl = pyVmomi.vim, pyVmomi.vmodl


@pytest.mark.parametrize("fault, kind", [
    (lambda: vim.fault.InvalidLogin(msg="Login failure"), Unauthorized),
    (vim.fault.NoPermission, Unauthorized),
    (vim.fault.NotAuthenticated, Unavailable),
    (vmodl.fault.ManagedObjectNotFound, NotFound),
    (vim.fault.NotFound, NotFound),
    (lambda: vim.fault.DuplicateName(name="web1"), Conflict),
    (vim.fault.AlreadyExists, Conflict),
    (lambda: vim.fault.InvalidPowerState(existingState="poweredOn"), Conflict),
    (vim.fault.TaskInProgress, Conflict),
    (lambda: vmodl.fault.InvalidArgument(invalidProperty="spec.numCPUs"), InvalidSpec),
    (vmodl.fault.InvalidRequest, InvalidSpec),
    (lambda: vim.fault.InvalidName(name="a/b"), InvalidSpec),
    (vmodl.fault.NotSupported, NotSupported),
    (vim.fault.InsufficientMemoryResourcesFault, QuotaExceeded),
    (vim.fault.HostConnectFault, Unavailable),
    (vmodl.fault.HostNotConnected, Unavailable),
    (vim.fault.Timedout, Timeout),
    (vim.fault.UncustomizableGuest, InvalidSpec),
    (vim.fault.NicSettingMismatch, InvalidSpec),
    (vim.fault.CustomizationPending, Conflict),
    (vim.fault.CpuIncompatible, InvalidSpec),
    (vim.fault.MigrationFault, Conflict),
    (lambda: vim.fault.FileLocked(file="[ds1] web/web.vmx"), Conflict),  # recover, power on
    (vim.fault.OutOfBounds, QuotaExceeded),
])
def test_faults(fault, kind):
    exc = fault()
    err = classify_fault(exc)
    assert isinstance(err, kind) and err.type == kind.type
    assert err.cause is exc
    assert err.details["fault"] == type(exc).__name__


def test_message_shows_fault_details_and_hint():
    err = classify_fault(vmodl.fault.InvalidArgument(invalidProperty="spec.numCPUs"))
    assert "InvalidArgument" in err.message and "spec.numCPUs" in err.message
    err = classify_fault(vim.fault.InvalidLogin(msg="Login failure"))
    assert "provider.password" in err.message
    err = classify_fault(vim.fault.NotAuthenticated())
    assert "role" not in err.message  # the NoPermission hint is not inherited


def test_session_objects_are_not_shown():
    view = vim.view.ContainerView("session[52ab-secret-key]52cd")
    err = classify_fault(vmodl.fault.ManagedObjectNotFound(obj=view))
    assert "52ab-secret-key" not in err.message


def test_http_and_connection_failures():
    assert isinstance(classify_fault(http.client.HTTPException("503 Service Unavailable")),
                      Unavailable)
    assert isinstance(classify_fault(http.client.HTTPException("401 Unauthorized")),
                      Unauthorized)
    err = classify_fault(Exception("vc:443 is down or is not a VIM server"))
    assert isinstance(err, Unavailable) and err.retryable


def test_other_exceptions_are_left_to_the_standard_classifier():
    assert classify_fault(ValueError("x")) is None
    assert classify_fault(vim.fault.VimFault()) is None  # unlisted fault: Internal later
