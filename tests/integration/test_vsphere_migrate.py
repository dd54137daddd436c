"""resilient.virt.vm_migrate on a vSphere simulator of the test's own (govmomi's vcsim, two
datastores): a running VM moves to another host of its cluster with its files to the other
datastore (vMotion and storage vMotion in one RelocateVM_Task) and keeps running, as the test's
own pyVmomi session sees it; check mode moves nothing, a second run nothing either; a running
VM with ``live: false``, an unknown host and a move to another cluster (zone) are refused
before anything moves.
"""
import uuid

import pytest
from own_simulator import BIN_DIR, vcsim
from playbook_runner import play, run_playbook
from simulator_session import Simulator


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("vcsim"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, datastores=2)
    yield settings
    vcsim.stop(run_dir)


@pytest.fixture
def oracle(sim, lab):
    session = Simulator(sim)
    made = []
    yield session, made
    for name in made:
        session.remove(name)
    session.close()


def _run(tmp_path, sim, tasks, check=False, name="vmig"):
    defaults = {"provider": dict(sim, task_timeout="60s"),
                "state_store": "sqlite://%s" % (tmp_path / "s.db")}
    run = run_playbook(tmp_path, [play([dict(t, ignore_errors=True) for t in tasks],
                                       module_defaults=defaults)], check=check, name=name)
    assert "Traceback" not in run.output, run.output
    return run


def _move(title, **args):
    return {"name": title, "resilient.virt.vm_migrate": args}


def test_vmotion_and_storage_vmotion_keep_the_vm_running(tmp_path, sim, oracle):
    session, made = oracle
    name = "vmig-%s" % uuid.uuid4().hex[:6]
    made.append(name)
    run = _run(tmp_path, sim, [{"name": "make", "resilient.virt.vm": {
        "name": name, "vcpus": 1, "memory_mb": 64, "state": "running",
        "placement": {"host": "DC0_C0_H0", "datastore": "LocalDS_0"}}}], name="make")
    assert not run.task("make").failed, run.describe()
    move = _move("move", vm=name, target="DC0_C0_H1", datastore="LocalDS_1")
    run = _run(tmp_path, sim, [move], check=True, name="plan")
    plan = run.task("move")
    assert not plan.failed and plan["changed"] and plan["migration"]["mode"] == "live", \
        run.describe()
    assert session.placement(session.vm(name))["host"] == "DC0_C0_H0"

    run = _run(tmp_path, sim, [move, dict(move, name="again"),
                               _move("not live", vm=name, target="DC0_C0_H0", live=False),
                               _move("unknown", vm=name, target="nohost"),
                               _move("zone", vm=name, target="DC0_C1_H0")])
    moved = run.task("move")
    assert not moved.failed and moved["changed"], run.describe()
    ref = session.vm(name)
    where = session.placement(ref)
    assert (where["host"], where["datastore"]) == ("DC0_C0_H1", "LocalDS_1")
    assert str(ref.runtime.powerState) == "poweredOn"
    assert moved["vm"]["placement"]["host"] == "DC0_C0_H1"
    assert moved["migration"]["downtime_ms"] is None  # vSphere does not report it
    assert moved["migration"]["duration_seconds"] >= 0
    assert not run.task("again")["changed"]
    not_live = run.task("not live")
    assert not_live.failed and "live" in not_live["msg"]
    unknown = run.task("unknown")
    assert unknown.failed and "nohost" in unknown["msg"] and "DC0_C0_H1" in unknown["msg"]
    zone = run.task("zone")
    assert zone.failed and zone["error"]["type"] == "Conflict" and "zone" in zone["msg"]
    assert session.placement(session.vm(name))["host"] == "DC0_C0_H1"
