"""resilient.virt.hypervisor on a vSphere simulator of the test's own (govmomi's vcsim): draining
an ESXi host moves its running VMs to the other hosts of its cluster (vMotion) and puts it in
maintenance mode (EnterMaintenanceMode_Task), as the test's own pyVmomi session sees it; a
second drain changes nothing; ``state: active`` takes it out of maintenance mode. The run is
verbose (-vvv), and the simulator's password is nowhere in what it prints, nor in the state
store.
"""
import uuid

import pytest
from own_simulator import BIN_DIR, vcsim
from playbook_runner import play, run_playbook
from pyVmomi import vim
from simulator_session import Simulator

HOST = "DC0_C0_H1"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("vcsim"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR)
    yield settings
    vcsim.stop(run_dir)


def _in_maintenance(session, host):
    view = session.content.viewManager.CreateContainerView(session.content.rootFolder,
                                                           [vim.HostSystem], True)
    try:
        [ref] = [h for h in view.view if h.name == host]
        return bool(ref.runtime.inMaintenanceMode)
    finally:
        view.Destroy()


def _running_on(session, host):
    view = session.content.viewManager.CreateContainerView(session.content.rootFolder,
                                                           [vim.VirtualMachine], True)
    try:
        return sorted(vm.name for vm in view.view if vm.runtime.host is not None
                      and vm.runtime.host.name == host
                      and str(vm.runtime.powerState) == "poweredOn")
    finally:
        view.Destroy()


def test_a_host_drains_into_maintenance_mode_and_comes_back(tmp_path, sim):
    session = Simulator(sim)
    name = "hvd-%s" % uuid.uuid4().hex[:6]
    try:
        defaults = {"provider": dict(sim, task_timeout="60s"),
                    "state_store": "sqlite://%s" % (tmp_path / "s.db")}
        made = {"name": name, "vcpus": 1, "memory_mb": 64, "state": "running",
                "placement": {"host": HOST}}
        tasks = [{"name": "make", "resilient.virt.vm": made},
                 {"name": "drain", "resilient.virt.hypervisor": {"name": HOST}},
                 {"name": "again", "resilient.virt.hypervisor": {"name": HOST}}]
        run = run_playbook(tmp_path, [play([dict(t, ignore_errors=True) for t in tasks],
                                           module_defaults=defaults)], args=("-vvv",),
                           name="drain")
        assert "Traceback" not in run.output and sim["password"] not in run.output
        drain = run.task("drain")
        assert not drain.failed and drain["changed"], run.describe()
        assert name in [m["vm"] for m in drain["drain"]["moved"]]
        assert _in_maintenance(session, HOST) and _running_on(session, HOST) == []
        ref = session.vm(name)
        assert str(ref.runtime.powerState) == "poweredOn"
        assert session.placement(ref)["host"] in ("DC0_C0_H0", "DC0_C0_H2")
        again = run.task("again")
        assert not again.failed and not again["changed"], run.describe()

        run = run_playbook(tmp_path, [play([{"name": "active", "resilient.virt.hypervisor": {
            "name": HOST, "state": "active"}, "ignore_errors": True}], module_defaults=defaults)],
            name="active")
        assert not run.task("active").failed and run.task("active")["changed"], run.describe()
        assert not _in_maintenance(session, HOST)
        assert sim["password"].encode() not in (tmp_path / "s.db").read_bytes()
    finally:
        session.remove(name)
        session.close()
