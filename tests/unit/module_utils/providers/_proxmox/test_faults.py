"""PVE's errors into the taxonomy (faults.py): each wording PVE answers with, and its status,
gives the error type and retryability a user of the collection relies on."""
import pytest
from proxmoxer.core import AuthenticationError, ResourceException

from ansible_collections.resilient.virt.plugins.module_utils.errors import counts_against_breaker
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.faults import (
    LOCK_RETRY_AFTER, classify_exception, classify_message, is_expired_ticket)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import (
    task_error)

# (HTTP status or None for a task's exit status, PVE's words) -> (type, retryable, counted by
# the circuit breaker): the wording as PVE's own sources write it
CASES = [
    (500, "VM is locked (backup)", "Conflict", True, False),
    (500, "VM is locked (migrate)", "Conflict", True, False),
    (None, "VM is locked (clone)", "Conflict", True, False),
    (500, "VM is locked (snapshot-delete)", "Conflict", True, False),
    (500, "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout",
     "Conflict", True, False),
    (500, "VM is locked (suspended)", "Conflict", False, False),
    (500, "cluster not ready - no quorum?", "Unavailable", True, True),
    (None, "cluster not ready - no quorum? (500)", "Unavailable", True, True),
    (500, "hostname lookup 'pve3' failed - failed to get address info for: pve3",
     "Unavailable", True, True),
    (500, "unable to create VM 101 - lvcreate 'pve/vm-101-disk-0' error: "
          "Volume group \"pve\" has insufficient free space; No space left on device",
     "QuotaExceeded", False, False),
    (None, "unable to write to storage: out of space", "QuotaExceeded", False, False),
    (500, "Configuration file 'nodes/pve1/qemu-server/101.conf' does not exist",
     "NotFound", False, False),
    (500, "VM 101 already running", "Conflict", False, False),
    (500, "unable to restore VM 102 - VM 102 already exists on node 'pve1'", "Conflict", False,
     False),
    (500, "unable to restore VM 102 - vm is running", "Conflict", False, False),
    (500, "can't find file 'local:backup/vzdump-qemu-101-2026_01_01-00_00_00.vma.zst'",
     "NotFound", False, False),
    (500, "storage 'local' is not available on node 'pve3'", "NotFound", False, False),
    (500, "VM 101 not running", "Conflict", False, False),
    (500, "can't remove VM 101 - protection mode enabled", "Conflict", False, False),
    (500, "unable to remove VM 101 - used in HA resources and purge parameter not set.",
     "Conflict", False, False),
    (None, "VM 101 qmp command 'guest-ping' failed - got timeout", "Timeout", True, True),
    (403, "Permission check failed (/vms/101, VM.PowerMgmt)", "Unauthorized", False, False),
    (501, "Method 'POST /nodes/pve1/qemu/101/status/hibernate' not implemented",
     "NotSupported", False, False),
    (503, "service unavailable", "Unavailable", True, True),
]


@pytest.mark.parametrize("status, words, kind, retryable, counted", CASES,
                         ids=["%s %s" % (c[0], c[1][:30]) for c in CASES])
def test_each_wording_maps_to_its_type(status, words, kind, retryable, counted):
    if status is None:
        err = classify_message(words)
    else:
        err = classify_exception(ResourceException(status, "Internal Server Error", words))
        assert isinstance(err.cause, ResourceException)
    assert (err.type, err.retryable, counts_against_breaker(err)) == (kind, retryable, counted)
    assert words.split(" - ")[0] in err.message


def test_a_passing_lock_waits_before_the_retry():
    err = classify_message("VM is locked (backup)")
    assert err.retry_after == LOCK_RETRY_AFTER == 5.0
    assert "another Proxmox operation" in err.message


def test_a_lock_that_stays_names_the_fix():
    err = classify_message("VM is locked (suspended)")
    assert err.retry_after is None and "qm unlock" in err.message


def test_offline_node_595_is_unavailable():
    err = classify_exception(ResourceException(595, "Errors during connection establishment, "
                                               "proxy handler", "No route to host"))
    assert (err.type, err.retryable, err.details) == ("Unavailable", True, {"status": 595})


def test_refused_parameters_name_the_spec_fields():
    err = classify_exception(ResourceException(
        400, "Parameter verification failed.", "Parameter verification failed.",
        errors={"memory": "value must have a minimum value of 16", "net1": "invalid format",
                "scsi2": "unable to parse drive options", "ipconfig0": "invalid format",
                "bogus": "property is not defined in schema and the schema does not allow "
                         "additional properties"}))
    assert err.type == "InvalidSpec" and not err.retryable
    assert [e["path"] for e in err.details["errors"]] == [
        "pve.bogus", "cloud_init.network_config", "memory_mb", "interfaces[1]", "disks[2]"]
    assert "minimum value of 16" in err.message


def test_an_unknown_task_failure_is_internal():
    err = task_error("command 'qemu-img convert' failed: exit code 1", "cloning VM 'a'")
    assert (err.type, err.retryable) == ("Internal", False)
    assert classify_message("something PVE never said") is None


@pytest.mark.parametrize("status, content, expired", [
    (401, "invalid PVE ticket", True),
    (401, "authentication failure", False),
    (500, "invalid PVE ticket", False),
])
def test_only_a_ticket_refusal_asks_for_a_new_login(status, content, expired):
    assert is_expired_ticket(ResourceException(status, "Unauthorized", content)) is expired


def test_a_refused_login_is_unauthorized_without_the_password():
    err = classify_exception(AuthenticationError("Couldn't authenticate user: root@pam to "
                                                 "https://pve:8006/api2/json/access/ticket"))
    assert (err.type, err.retryable) == ("Unauthorized", False)
    assert "provider.username" in err.message and "token_id" in err.message


def test_other_exceptions_are_left_to_the_standard_classifier():
    assert classify_exception(ConnectionRefusedError(111, "Connection refused")) is None
