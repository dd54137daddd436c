"""The vCenter password stays out of what an evacuation that recovers vSphere VMs shows and keeps:
the ``-vvv`` output of ``ansible-playbook``, the task results, and the state store, on a vSphere
simulator of the test's own (lab/vcsim/main.go; the host's failure is its lab-only
``/lab/host-connection``); the oracle of the recovery is a pyVmomi session of the test's own."""
import pytest
from own_simulator import BIN_DIR, vcsim
from simulator_session import Simulator

from playbook_runner import play, run_playbook

pytestmark = pytest.mark.lab

FO = "resilient.virt.failover_reservation"
LOST = "DC0_C0_H0"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("vcsim"))
    yield vcsim.start(run_dir, bin_dir=BIN_DIR, vms=1)
    vcsim.stop(run_dir)


def test_the_password_is_in_no_output_result_or_store_of_a_recovering_evacuation(sim, tmp_path):
    settings = sim
    store = tmp_path / "state.db"
    defaults = {"state_store": "sqlite:///%s" % store, "provider": settings}
    setup = [
        {"name": "create", "resilient.virt.vm": {
            "name": "sec-web", "vcpus": 1, "memory_mb": 256, "metadata": {"flavor": "web"},
            "placement": {"host": LOST}, "state": "running"}},
        {"name": "reserve", FO: {"requirements": {"web": 1}, "creator": "sec",
                                 "limit_one_new_per_hypervisor": False}},
    ]
    first = run_playbook(tmp_path, [play(setup, module_defaults=defaults)], name="setup")
    assert first.rc == 0, first
    evacuate = {"name": "evacuate", FO: {"creator": "sec", "state": "evacuated", "failed_hosts": [LOST],
                                         "allow_partial": True}}
    vcsim.set_host_connection(settings, LOST, "notResponding")
    try:
        run = run_playbook(tmp_path, [play([evacuate], module_defaults=defaults)], name="evacuate",
                           args=("-vvv",), shown_with="default")
    finally:
        vcsim.set_host_connection(settings, LOST, "connected")
    assert run.rc == 0, run
    [moved] = [m for m in run.task("evacuate")["evacuation"]["moves"] if m["name"] == "sec-web"]
    assert moved["action"] == "recover", moved
    session = Simulator(settings)
    try:
        [ref] = session.vms_named("sec-web")
        assert ref.runtime.host.name == moved["to_host"]
    finally:
        session.close()
    secret = settings["password"]
    assert secret not in run.output
    assert secret not in run.document
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("state.db*"))
    assert stored and secret.encode() not in stored
