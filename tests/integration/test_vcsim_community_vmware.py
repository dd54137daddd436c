"""community.vmware against the lab's vSphere simulator (lab/vcsim, govmomi's simulator).

govmomi's simulator as Debian ships it crashes on unset properties that community.vmware's
modules read; the lab builds it from a copy patched by ``lab/vcsim/*.patch``. Here
``community.vmware.vmware_guest_info`` runs through a real ansible-playbook against a simulator
of the test's own (HTTPS, the certificate verified with the lab CA): the task must succeed, say
what the test's own pyVmomi session reads of the VM, and leave no panic in the simulator's log.
"""
import importlib.util

import pytest
from own_simulator import BIN_DIR, vcsim
from playbook_runner import play, run_playbook
from simulator_session import Simulator

VM = "DC0_C0_RP0_VM0"  # runs VMware Tools (lab/vcsim/main.go): it reports an address

if importlib.util.find_spec("ansible_collections.community.vmware") is None:
    pytest.fail("needs community.vmware (pip install -r tests/requirements.txt: the ansible "
                "package bundles it)", pytrace=False)


@pytest.fixture
def sim(tmp_path):
    """(run_dir, provider settings) of a simulator of the test's own."""
    run_dir = str(tmp_path / "vcsim")
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=1)
    yield run_dir, settings
    vcsim.stop(run_dir)


def test_vmware_guest_info_reads_a_vm_of_the_lab_simulator(tmp_path, sim):
    run_dir, settings = sim
    task = {"name": "info", "community.vmware.vmware_guest_info": {
        "hostname": settings["host"], "port": settings["port"],
        "username": settings["username"], "password": settings["password"],
        "validate_certs": True, "datacenter": "DC0", "name": VM}}
    # community.vmware has no CA option: OpenSSL's default trust reads SSL_CERT_FILE
    run = run_playbook(tmp_path, [play([task])], env={"SSL_CERT_FILE": settings["ca_path"]})
    with open(vcsim.status(run_dir)["log"]) as handle:
        log = handle.read()
    assert "panic" not in log, log[-4000:]
    assert run.rc == 0, run.describe()
    instance = run.task("info")["instance"]

    session = Simulator(settings)
    try:
        ref, = session.vms_named(VM)
        assert instance["hw_name"] == VM
        assert instance["instance_uuid"] == ref.config.instanceUuid
        assert instance["hw_product_uuid"] == ref.config.uuid
        assert instance["hw_power_status"] == str(ref.runtime.powerState)
        assert instance["ipv4"] == ref.guest.ipAddress and ref.guest.ipAddress
    finally:
        session.close()
