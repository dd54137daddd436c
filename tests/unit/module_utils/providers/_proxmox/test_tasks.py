"""Task ids (UPIDs) and task ends (tasks.py): the node a UPID names, and what a stopped task's
exit status means."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.tasks import (
    status_of, upid_node)


@pytest.mark.parametrize("upid, node", [
    ("UPID:pve1:000F3D2B:0A3B1C2D:65F1A2B3:qmstart:101:root@pam:", "pve1"),
    ("UPID:pve-node-2.example.org:00001234:00005678:6600AAAA:qmclone:9000:"
     "automation@pve!ansible:", "pve-node-2.example.org"),
    ("UPID:n3:00000001:00000002:00000003:vzdump::root@pam:", "n3"),
])
def test_the_node_a_upid_names(upid, node):
    assert upid_node(upid) == node


@pytest.mark.parametrize("upid", [
    None, 42, "", "UPID", "pve1:000F3D2B:0A3B1C2D:65F1A2B3:qmstart:101:root@pam:",
    "UPID::000F3D2B:0A3B1C2D:65F1A2B3:qmstart:101:root@pam:", "UPID:pve1:qmstart:101",
    "task-42",
])
def test_what_is_not_a_upid_names_task_id(upid):
    with pytest.raises(InvalidSpec) as err:
        upid_node(upid)
    assert [e["path"] for e in err.value.details["errors"]] == ["task_id"]


class _Answers:
    """PVE's answer to GET /nodes/<node>/tasks/<upid>/status, and the path asked."""

    def __init__(self, answer):
        self.answer, self.asked = answer, None

    def get(self, *path):
        self.asked = path
        return self.answer


UPID = "UPID:pve2:00001234:00005678:6600AAAA:qmshutdown:101:root@pam:"


@pytest.mark.parametrize("answer, state, error_type", [
    ({"status": "running", "type": "qmshutdown", "node": "pve2"}, "running", None),
    ({"status": "stopped", "exitstatus": "OK", "type": "qmshutdown", "node": "pve2"},
     "success", None),
    ({"status": "stopped", "exitstatus": "WARNINGS: 2", "node": "pve2"}, "success", None),
    ({"status": "stopped", "exitstatus": "VM is locked (backup)", "node": "pve2"}, "error",
     "Conflict"),
    ({"status": "stopped", "exitstatus": "unexpected status", "node": "pve2"}, "error",
     "Internal"),
])
def test_status_of_a_task(answer, state, error_type):
    session = _Answers(answer)
    status = status_of(session, UPID)
    assert session.asked == ("nodes", "pve2", "tasks", UPID, "status")
    assert (status["id"], status["state"]) == (UPID, state)
    assert (status["error"] or {}).get("type") == error_type
