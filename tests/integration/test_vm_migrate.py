"""resilient.virt.vm_migrate on the lab's real hypervisors, through real ansible-playbook runs.

A running VM (a tiny TCG domain whose qcow2 disk holds 0x11 in its first 4 MiB) moves live from
hv1 to hv2 with its disk copied: the test's own libvirt-python connections see it running on hv2
with the reason ``migrated`` (it was never booted there), its uuid kept, gone from hv1 with its
volume, and its data on hv2 (``qemu-io``). Check mode moves nothing; a second run changes
nothing. A stopped VM moves cold. A migration whose target's libvirtd is frozen (SIGSTOP) as it
starts fails with Timeout and leaves the VM running on hv1, and nowhere else once hv2 thaws;
one slowed down (``bandwidth_mib``) past its ``timeout`` is cancelled, not retried, and leaves
the VM running on hv1 and nothing on hv2. Bad inputs are refused before anything moves.
"""
import re
import time
import uuid

import libvirt
import pytest
from backup_disks import holds, make_vm, remove_prefixed
from migrate_freeze_plugin import FREEZE_ENV
from playbook_runner import play, plugin_env, run_playbook

RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
THAW_CLEANUP = 60.0  # seconds for hv2 to drop a migration whose client went away (loaded machine)


@pytest.fixture
def two_hvs(lab):
    """(hv1, hv2, conn1, conn2, prefix): the test's own connections; its VMs removed after."""
    hv1, hv2 = lab.hypervisor("hv1"), lab.hypervisor("hv2")
    conn1, conn2 = libvirt.open(hv1.uri), libvirt.open(hv2.uri)
    prefix = "mig-%s-" % uuid.uuid4().hex[:6]
    yield hv1, hv2, conn1, conn2, prefix
    lab.thaw("hv2")
    for conn in (conn1, conn2):
        remove_prefixed(conn, prefix)
        conn.close()


def _providers(hv1, hv2):
    return {"hv1": {"type": "libvirt", "name": "hv1", "uri": hv1.uri, "az": "az1"},
            "hv2": {"type": "libvirt", "name": "hv2", "uri": hv2.uri, "az": "az1"},
            "far": {"type": "libvirt", "name": "far", "uri": hv2.uri, "az": "az9"}}


def _run(tmp_path, hv1, hv2, tasks, check=False, env=None, name="mig"):
    defaults = {"providers": _providers(hv1, hv2), "provider": "hv1",
                "state_store": "sqlite://%s" % (tmp_path / "s.db")}
    named = [dict(task, ignore_errors=True) for task in tasks]
    run = run_playbook(tmp_path, [play(named, module_defaults=defaults)], check=check, env=env,
                       name=name)
    assert "Traceback" not in run.output, run.output
    return run


def _move(title, **args):
    return {"name": title, "resilient.virt.vm_migrate": args}


def _names(conn):
    return set(dom.name() for dom in conn.listAllDomains(0))


def test_a_running_vm_moves_live_with_its_disk_and_keeps_running(tmp_path, two_hvs):
    hv1, hv2, conn1, conn2, prefix = two_hvs
    name = prefix + "live"
    make_vm(conn1, hv1, name, size_mib=16)
    before = conn1.lookupByName(name).UUIDString()
    run = _run(tmp_path, hv1, hv2, [_move("plan", vm=name, target="hv2")], check=True,
               name="plan")
    plan = run.task("plan")
    assert not plan.failed and plan["changed"], run.describe()
    assert plan["migration"]["mode"] == "live"
    assert [c["check"] for c in plan["migration"]["prechecks"]] == [
        "hypervisor", "capacity", "zone", "failover"]
    assert name in _names(conn1) and name not in _names(conn2)  # check mode moved nothing

    run = _run(tmp_path, hv1, hv2, [_move("move", vm=name, target="hv2"),
                                    _move("again", vm=name, target="hv2")])
    moved, again = run.task("move"), run.task("again")
    assert not moved.failed and moved["changed"], run.describe()
    dom = conn2.lookupByName(name)
    assert dom.UUIDString() == before
    assert dom.state() == [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_MIGRATED]
    assert dom.isPersistent()
    assert name not in _names(conn1)
    assert not [v for v in conn1.storagePoolLookupByName("default").listAllVolumes(0)
                if v.name().startswith(prefix)]
    path = conn2.storagePoolLookupByName("default").storageVolLookupByName(
        name + "-disk0.qcow2").path()
    assert holds(hv2, path, "0x11", 0, 4 * 1024 * 1024)
    migration = moved["migration"]
    assert migration["mode"] == "live" and migration["copied_disks"] == [path]
    assert migration["target"] == {"provider": "hv2", "hypervisor": "hv2"}
    assert isinstance(migration["downtime_ms"], int) and migration["downtime_ms"] >= 0
    assert migration["duration_seconds"] > 0
    assert RFC3339.match(migration["started_at"]) and RFC3339.match(migration["ended_at"])
    assert moved["vm"]["hypervisor"] == "hv2" and moved["vm"]["state"] == "running"
    assert not again.failed and not again["changed"], run.describe()
    assert again["migration"]["mode"] == "none"


def test_a_stopped_vm_moves_cold(tmp_path, two_hvs):
    hv1, hv2, conn1, conn2, prefix = two_hvs
    name = prefix + "cold"
    make_vm(conn1, hv1, name, size_mib=16, running=False)
    run = _run(tmp_path, hv1, hv2, [_move("move", vm=name, target="hv2")])
    moved = run.task("move")
    assert not moved.failed and moved["migration"]["mode"] == "cold", run.describe()
    dom = conn2.lookupByName(name)
    assert not dom.isActive() and dom.isPersistent() and name not in _names(conn1)
    path = conn2.storagePoolLookupByName("default").storageVolLookupByName(
        name + "-disk0.qcow2").path()
    assert holds(hv2, path, "0x11", 0, 4 * 1024 * 1024)


def test_a_frozen_target_leaves_the_vm_running_where_it_was(tmp_path, two_hvs, lab):
    hv1, hv2, conn1, conn2, prefix = two_hvs
    name = prefix + "frozen"
    make_vm(conn1, hv1, name, size_mib=16)
    env = dict(plugin_env("migrate_freeze_plugin"), **{FREEZE_ENV: str(hv2.daemon_pid("libvirtd"))})
    quick = {"timeout_mutating": "8s", "retry_preset": "none"}
    run = _run(tmp_path, hv1, hv2, [_move("move", vm=name, target="hv2", timeout="5s",
                                          resilience=quick)], env=env)
    moved = run.task("move")
    assert moved.failed and moved["error"]["type"] == "Timeout", run.describe()
    assert conn1.lookupByName(name).state()[0] == libvirt.VIR_DOMAIN_RUNNING
    lab.thaw("hv2")
    end = time.monotonic() + THAW_CLEANUP
    while name in _names(conn2) and time.monotonic() < end:
        time.sleep(0.5)
    assert name not in _names(conn2)
    dom = conn1.lookupByName(name)
    assert dom.state() == [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_BOOTED]


def test_a_migration_past_its_timeout_is_cancelled_and_the_vm_stays(tmp_path, two_hvs):
    hv1, hv2, conn1, conn2, prefix = two_hvs
    name = prefix + "slow"
    make_vm(conn1, hv1, name, size_mib=16)  # 4 MiB of data: 4 s at 1 MiB/s, past a 2 s timeout
    run = _run(tmp_path, hv1, hv2, [_move("move", vm=name, target="hv2", timeout="2s",
                                          bandwidth_mib=1)])
    moved = run.task("move")
    assert moved.failed and moved["error"]["type"] == "Timeout", run.describe()
    assert "cancelled" in moved["msg"]
    assert moved["resilience"]["libvirt:hv1"]["retries"] == 0  # an answer: not retried
    dom = conn1.lookupByName(name)
    assert dom.state() == [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_BOOTED]
    assert name not in _names(conn2)
    assert not [v for v in conn2.storagePoolLookupByName("default").listAllVolumes(0)
                if v.name().startswith(prefix)]  # the volume it made there is removed again


def test_bad_inputs_are_refused_before_anything_moves(tmp_path, two_hvs):
    hv1, hv2, conn1, conn2, prefix = two_hvs
    name = prefix + "bad"
    make_vm(conn1, hv1, name, size_mib=16)
    run = _run(tmp_path, hv1, hv2, [
        _move("zone", vm=name, target="far"),
        _move("unknown", vm=name, target="nowhere"),
        _move("pool", vm=name, target="hv2", datastore="ds1"),
        _move("absent", vm=prefix + "none", target="hv2"),
        _move("timeout", vm=name, target="hv2", timeout="1h"),
    ])
    zone = run.task("zone")
    assert zone.failed and zone["error"]["type"] == "Conflict", run.describe()
    assert "zone" in zone["msg"] and "allow_zone_change" in zone["msg"]
    unknown = run.task("unknown")
    assert unknown.failed and "target" in unknown["msg"] and "nowhere" in unknown["msg"]
    pool = run.task("pool")
    assert pool.failed and "datastore" in pool["msg"]
    absent = run.task("absent")
    assert absent.failed and absent["error"]["type"] == "NotFound"
    timeout = run.task("timeout")
    assert timeout.failed and "timeout_mutating" in timeout["msg"]
    assert conn1.lookupByName(name).state()[0] == libvirt.VIR_DOMAIN_RUNNING
    assert name not in _names(conn2)
