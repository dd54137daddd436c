"""hypervisor state=fenced with the IPMI fence agent, through ``ansible-playbook -vvv``: the
hypervisor is fenced and marked, and neither the BMC's password nor its key (Kg) shows - in the
output, the results or the state store.

The hypervisor is a libvirt provider whose socket nobody serves (in the test's directory):
unreachable at every check. Its BMC is the IPMI BMC simulator (``ipmi_bmc_simulator.py``, as no
BMC runs here), which the test reads as its oracle. The secrets reach the play as extra
variables, as vault or AWX credentials would. Both task paths: the controller's worker and a
module process.
"""
import uuid

import pytest
from ipmi_bmc_simulator import Simulator
from playbook_runner import play, run_playbook, store_records


@pytest.fixture(scope="module")
def secrets():
    return dict((name, "%s-S3cret-%s" % (name, uuid.uuid4().hex[:10])) for name in ("bmc", "kg"))


@pytest.fixture(scope="module")
def bmc(tmp_path_factory, secrets):
    simulator = Simulator(tmp_path_factory.mktemp("bmc"), "fence", secrets["bmc"], kg=secrets["kg"])
    yield simulator
    simulator.stop()


@pytest.mark.parametrize("in_process", ["true", "false"], ids=["worker", "module"])
def test_an_ipmi_fence_marks_the_hypervisor_and_shows_no_secret(tmp_path, bmc, secrets, in_process):
    bmc.set_power("on")
    store = tmp_path / "s.db"
    providers = {"gone": {"type": "libvirt", "name": "gone", "az": "az1",
                          "uri": "qemu+unix:///system?socket=%s" % (tmp_path / "none.sock")}}
    fencing = {"type": "ipmi", "address": "127.0.0.1", "port": bmc.port, "username": "fence",
               "password": "{{ bmc }}", "kg": "{{ kg }}"}
    tasks = [{"name": "fence", "resilient.virt.hypervisor": {
        "provider": "gone", "state": "fenced", "grace": 2, "confirm_interval": 1,
        "fence_timeout": 20, "fencing": fencing}}]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={
        "providers": providers, "state_store": "sqlite://%s" % store})],
        extra_vars=secrets, args=("-vvv",), env={"RESILIENT_VIRT_IN_PROCESS": in_process},
        shown_with="default", name="secrets")
    result = run.task("fence")
    assert not result.failed and result["changed"], run.describe()
    assert result["hypervisor"]["fenced"] is True and result["hypervisor"]["reachable"] is False
    assert result["fence"]["agent"] == "ipmi" and result["fence"]["action"] == "power down"
    assert "power off after Chassis Control power down" in result["fence"]["evidence"]
    assert bmc.power() == "off"
    assert list(store_records("sqlite://%s" % store, "fenced")) != []
    stored = "".join(path.read_bytes().decode("latin-1") for path in tmp_path.glob("s.db*"))
    for text in (run.output, run.stderr, str(run.document), stored):
        for kind, value in secrets.items():
            assert value not in text, "the %s secret is shown:\n%s" % (
                kind, text[max(0, text.find(value) - 800):text.find(value) + 200])
