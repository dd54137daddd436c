"""Which evacuated VMs are restored from their last backup, and what a restore leaves behind: an
opted-in VM whose every disk is on the failed host's local storage comes back from the newest
complete backup its target lists, a failed restore leaves no VM and no volumes there, and a run
killed during the copy is finished by the next one with the handle it kept in the state store (a
real SQLite file of the test's own). The target is a stand-in object that keeps VMs and volumes in
dicts and answers the backup hooks as told, and as libvirt's restore does: prepare refuses volumes
of the restore's names, start removes those its handle left (the lab test runs the real one)."""
import os
import stat

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._failover.backup_restore import (
    last_backup, recovery_point, restore_record_name, restores_from_backup,
    validate_restore_from_backup)
from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import execute_move
from ansible_collections.resilient.virt.plugins.module_utils._failover.restore_handles import (
    NAMESPACE, RestoreHandles)
from ansible_collections.resilient.virt.plugins.module_utils._state.sqlite import SQLiteStore
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, InvalidSpec, NotFound, Unavailable)

LOCAL = "/var/lib/libvirt/images/db-disk0.qcow2"
SHARED = "/var/lib/libvirt/shared/db-disk1.qcow2"
VM = {"name": "db", "vcpus": 1, "memory_mb": 64,
      "disks": [{"path": LOCAL, "format": "qcow2", "device": "disk"},
                {"device": "cdrom", "path": None}]}
MOVE = {"vm": "u-1", "from_host": "hv1", "reservation": "r1", "to_host": "hv2", "priority": 0}
PROVED = {"pool": "shared", "shared": True, "witness": "libvirt:hv3", "witness_error": None}


def artifact(name, created, vm="db", uuid="u-1", complete=True):
    return {"name": name, "vm": vm, "vm_uuid": uuid, "created_at": created, "complete": complete}


OLD, NEW = artifact("b-old", "2026-11-29T10:00:00Z"), artifact("b-new", "2026-11-29T12:00:00Z")
NOW = 1795957200.0  # 2026-11-29T13:00:00Z


class Target:
    key = "libvirt:hv2"
    type_name = "libvirt"
    capabilities = frozenset(("describe", "create", "power", "delete", "locate_disks"))

    def __init__(self, backups, located=None, poll="completed", power_fails=False, running=False,
                 killed_at=None, cancel_fails=False):
        self.backups, self.located, self.poll = backups, located or {}, poll
        self.power_fails, self.killed_at, self.cancel_fails = power_fails, killed_at, cancel_fails
        self.vms = {"db": "running"} if running else {}
        self.volumes, self.calls = {}, []  # volume name: the backup it holds

    def describe(self, name):
        if name not in self.vms:
            raise NotFound(name)
        return {"name": name, "hypervisor": "hv2", "state": self.vms[name]}

    def locate_disks(self, paths, witnesses=()):
        self.calls.append("locate_disks")
        return dict((path, self.located.get(path)) for path in paths)

    def backup(self, operation, **arguments):
        self.calls.append(operation)
        if operation == self.killed_at:
            raise Killed(operation)
        if operation == "backup_list":
            return [a for a in self.backups if a["vm"] == arguments["vm"]]
        if operation == "backup_prepare":
            request = arguments["request"]
            assert request["kind"] == "restore" and request["target"] == request["vm"] == "db"
            if request["name"] + "-vda.qcow2" in self.volumes:
                raise Conflict("storage pool 'default' already has volume(s) %s-vda.qcow2" % request["name"])
            return {"kind": "restore", "name": request["name"], "backup": request["backup"]["name"]}
        if operation == "backup_start":
            # a volume an earlier attempt of this handle left is replaced by the copy
            self.volumes[arguments["handle"]["name"] + "-vda.qcow2"] = arguments["handle"]["backup"]
            if self.poll == "completed":
                self.vms["db"] = "stopped"
            return arguments["handle"]
        if operation == "backup_poll":
            return {"state": self.poll, "message": "copy failed" if self.poll == "failed" else None}
        if operation == "backup_cancel":
            if self.cancel_fails:
                raise Unavailable("the target stopped answering")
            self.volumes.clear()
            return True
        raise AssertionError(operation)

    def power(self, name, action):
        self.calls.append("power")
        if self.power_fails:
            raise Unavailable("QEMU did not start")
        self.vms[name] = "running"

    def delete(self, name):
        self.calls.append("delete")
        del self.vms[name]
        self.volumes.clear()


class Killed(BaseException):
    """The run's process ends here (SIGKILL): nothing after it runs."""


@pytest.fixture
def handles(tmp_path):
    store = SQLiteStore(str(tmp_path / "state.db"))
    yield RestoreHandles(store)
    store.close()


def kept(handles):
    """What the store holds of the evacuation's restores: {key: record}."""
    return handles.store.items(NAMESPACE)


def move(target, handles, vm=None, check_mode=False):
    return execute_move(MOVE, VM if vm is None else vm, None, target, check_mode, restores=handles)


@pytest.mark.parametrize("value, path", [
    ("db-*", "restore_from_backup"), (["db-*"], "restore_from_backup[0]"),
    ([{"match": ""}], "restore_from_backup[0].match"),
    ([{"match": "db-*", "priority": 1}], "restore_from_backup[0].priority"),
    ([{"match": "db-[a"}], "restore_from_backup[0].match"),
])
def test_a_bad_opt_in_names_the_field(value, path):
    with pytest.raises(InvalidSpec) as err:
        validate_restore_from_backup(value)
    assert err.value.details["errors"][0]["path"] == path, err.value.message


def test_the_opt_in_matches_vm_names_by_pattern():
    patterns = validate_restore_from_backup([{"match": "db-*"}, {"match": "mail"}])
    assert restores_from_backup("db-1", patterns) and restores_from_backup("mail", patterns)
    assert not restores_from_backup("web-1", patterns) and not restores_from_backup("db-1", [])
    assert validate_restore_from_backup(None) == []


def test_the_newest_complete_backup_of_this_vm_is_chosen():
    others = [artifact("b-newest-broken", "2026-11-29T12:30:00Z", complete=False),
              artifact("b-other-vm", "2026-11-29T12:40:00Z", vm="web"),
              artifact("b-same-name-other-uuid", "2026-11-29T12:50:00Z", uuid="u-9")]
    assert last_backup([OLD, NEW] + others, "db", "u-1")["name"] == "b-new"
    assert last_backup(others, "db", "u-1") is None


def test_the_recovery_point_is_the_backups_time_and_its_age():
    assert recovery_point(NEW, NOW) == {"backup": "b-new", "recovery_point": "2026-11-29T12:00:00Z",
                                        "recovery_point_age_seconds": 3600}


def test_the_record_name_is_the_same_for_the_same_backup_and_stays_a_record_name():
    assert restore_record_name("b-new") == restore_record_name("b-new") != restore_record_name("b-old")
    long_one = restore_record_name("x" * 200)
    assert len(long_one) <= 200 and long_one != restore_record_name("y" + "x" * 199)


def test_an_opted_in_vm_on_local_storage_is_restored_from_its_newest_backup_and_started(handles):
    target = Target([OLD, NEW])
    outcome = move(target, handles)
    assert outcome["action"] == "restore" and outcome["backup"] == "b-new", outcome
    assert outcome["recovery_point"] == "2026-11-29T12:00:00Z"
    assert isinstance(outcome["recovery_point_age_seconds"], int) and outcome["recovery_point_age_seconds"] > 0
    assert target.calls == ["locate_disks", "backup_list", "backup_prepare", "backup_start",
                            "backup_poll", "power"]
    assert target.vms == {"db": "running"}
    assert kept(handles) == {}  # the VM runs: nothing left to resume


def test_check_mode_shows_the_backup_it_would_restore_and_changes_nothing(handles):
    target = Target([OLD, NEW])
    outcome = move(target, handles, check_mode=True)
    assert outcome["action"] == "restore" and outcome["backup"] == "b-new" and "recovery_point" in outcome
    assert target.calls == ["locate_disks", "backup_list", "backup_prepare"]
    assert target.vms == {} and target.volumes == {} and kept(handles) == {}


def test_a_vm_already_running_on_its_target_is_left_alone(handles):
    target = Target([OLD, NEW], running=True)
    outcome = move(target, handles)
    assert outcome["action"] == "none" and "backup" not in outcome
    assert target.calls == []


def test_without_a_reachable_backup_the_move_fails_naming_the_fix(handles):
    target = Target([artifact("b-half", "2026-11-29T12:00:00Z", complete=False)])
    outcome = move(target, handles)
    assert outcome["action"] == "failed" and outcome["error"]["type"] == "NotFound"
    message = outcome["error"]["message"]
    assert "no completed backup of db" in message and "1 backup(s) of it" in message
    assert "shared storage" in message and "backup_pool" in message, message
    assert target.vms == {} and target.volumes == {}


@pytest.mark.parametrize("poll, power_fails", [("failed", False), ("missing", False), ("completed", True)])
def test_a_failed_restore_leaves_no_vm_and_no_volumes(poll, power_fails, handles):
    target = Target([NEW], poll=poll, power_fails=power_fails)
    outcome = move(target, handles)
    assert outcome["action"] == "failed", outcome
    assert "backup_cancel" in target.calls
    assert target.vms == {} and target.volumes == {} and kept(handles) == {}
    if poll == "failed":
        assert "copy failed" in outcome["error"]["message"]


def test_a_vm_with_some_disks_on_shared_storage_is_not_restored(handles):
    vm = dict(VM, disks=VM["disks"] + [{"path": SHARED, "format": "qcow2", "device": "disk"}])
    target = Target([NEW], located={SHARED: PROVED})
    outcome = move(target, handles, vm=vm)
    assert outcome["action"] == "failed" and outcome["error"]["type"] == "NotSupported"
    assert SHARED in outcome["error"]["message"] and LOCAL in outcome["error"]["message"]
    assert target.calls == ["locate_disks"]


def test_a_vm_not_opted_in_is_refused_as_before_and_told_about_the_option():
    target = Target([NEW])
    outcome = move(target, None)
    assert outcome["action"] == "failed" and "restore_from_backup" in outcome["error"]["message"]
    assert target.calls == ["locate_disks"]


def test_a_disk_in_a_pool_proved_not_shared_counts_as_local(handles):
    target = Target([NEW], located={LOCAL: {"pool": "default", "shared": False, "witness": "libvirt:hv3"}})
    assert move(target, handles)["action"] == "restore"


# -- A run killed during the restore, and the next one
def test_the_handle_is_kept_before_the_restore_starts_and_the_next_run_finishes_it(handles):
    name = restore_record_name("b-new")
    first = Target([OLD, NEW], killed_at="backup_poll")  # killed once the copy has begun
    with pytest.raises(Killed):
        move(first, handles)
    assert first.calls[-3:] == ["backup_prepare", "backup_start", "backup_poll"]
    [record] = kept(handles).values()
    assert record["name"] == name and record["vm"] == "db" and record["provider"] == "libvirt:hv2"
    assert record["handle"] == {"kind": "restore", "name": name, "backup": "b-new"}
    assert stat.S_IMODE(os.stat(handles.store.path).st_mode) == 0o600
    # the next run meets what the killed one left on the target: a half-copied volume
    second = Target([OLD, NEW])
    second.volumes = {name + "-vda.qcow2": "half a copy"}
    outcome = move(second, handles)
    assert outcome["action"] == "restore" and outcome["backup"] == "b-new", outcome
    assert second.calls == ["locate_disks", "backup_list", "backup_start", "backup_poll", "power"]
    assert second.volumes == {name + "-vda.qcow2": "b-new"} and second.vms == {"db": "running"}
    assert kept(handles) == {}


def test_volumes_of_the_restores_names_without_its_record_are_refused_and_left_alone(handles):
    name = restore_record_name("b-new")
    target = Target([NEW])
    target.volumes = {name + "-vda.qcow2": "someone else's"}
    outcome = move(target, handles)
    assert outcome["action"] == "failed" and outcome["error"]["type"] == "Conflict", outcome
    assert name + "-vda.qcow2" in outcome["error"]["message"]
    assert target.volumes == {name + "-vda.qcow2": "someone else's"} and "backup_cancel" not in target.calls
    assert kept(handles) == {}


def test_check_mode_with_a_kept_handle_plans_nothing_new_and_writes_nothing(handles):
    name = restore_record_name("b-new")
    handles.keep("libvirt:hv2", name, "db", {"kind": "restore", "name": name, "backup": "b-new"})
    before = kept(handles)
    target = Target([NEW])
    target.volumes = {name + "-vda.qcow2": "half a copy"}
    outcome = move(target, handles, check_mode=True)
    assert outcome["action"] == "restore" and outcome["backup"] == "b-new", outcome
    assert target.calls == ["locate_disks", "backup_list"]
    assert target.volumes == {name + "-vda.qcow2": "half a copy"} and kept(handles) == before


def test_a_failed_restore_whose_volumes_could_not_be_removed_keeps_its_handle(handles):
    target = Target([NEW], poll="failed", cancel_fails=True)
    outcome = move(target, handles)
    assert outcome["action"] == "failed" and "removing what the restore made failed too" in outcome["error"]["message"]
    assert [record["name"] for record in kept(handles).values()] == [restore_record_name("b-new")]


def test_a_restored_vm_started_by_a_later_run_leaves_no_record_and_others_stay(handles):
    name = restore_record_name("b-new")
    for provider, vm in (("libvirt:hv2", "db"), ("libvirt:hv2", "web"), ("libvirt:hv3", "db")):
        handles.keep(provider, name if vm == "db" else restore_record_name("b-web"), vm, {"name": name})
    target = Target([NEW])
    target.vms = {"db": "stopped"}  # restored and defined; the run was killed before it started it
    outcome = move(target, handles)
    assert outcome["action"] == "recreate" and target.vms == {"db": "running"}, outcome
    assert "backup_prepare" not in target.calls and "backup_start" not in target.calls
    assert sorted((r["provider"], r["vm"]) for r in kept(handles).values()) == [
        ("libvirt:hv2", "web"), ("libvirt:hv3", "db")]
