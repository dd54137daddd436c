"""The recovery of a failed Proxmox VE node's VMs (failover_reservation state=evacuated on a
simulated cluster: fakepve with the lab's simulation of PVE's HA manager, ``lab/pvesim_ha.py``)
shows no secret: the provider's password reaches the play as an extra variable, as vault or AWX
credentials would, and is searched for in ``ansible-playbook -vvv`` output, the JSON callback's
document and the SQLite state store's bytes, after a recovery that succeeds and one refused (a
disk on storage that is not shared).
"""
import uuid

import pytest

import pve_simulator
from playbook_runner import play, run_playbook
from pvesim_ha import with_ha_recovery  # lab/ is on sys.path (conftest.py)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch, \
            pve_simulator.started(tmp_path_factory.mktemp("pverecoversecrets"), monkeypatch) as sim:
        sim.call(lambda: with_ha_recovery(sim.pve))
        sim.call(lambda: sim.pve.storages.update(shared={
            "type": "dir", "shared": 1, "active": 1, "content": "images", "files": set(),
            "path": "/mnt/pve/shared"}))
        for name, disk in (("sec-shared", "shared:%d/vm-%d-disk-0.qcow2"), ("sec-local", "local-lvm:vm-%d-disk-0")):
            vmid = sim.new_vm(name, "pve2")
            sim.call(lambda v=vmid, d=disk: sim.pve.vm(v).config.update(
                scsi0="%s,size=4G" % (d % ((v, v) if d.count("%d") == 2 else (v,))),
                smbios1="uuid=%s" % uuid.uuid4(), description='resilient.virt metadata: {"flavor":"small"}'))
        yield sim


def test_a_recovery_and_a_refusal_show_no_password(cluster, tmp_path):
    sim = cluster
    secret = sim.password
    store = tmp_path / "s.db"
    defaults = {"provider": dict(sim.provider, password="{{ pve_password }}"),
                "state_store": "sqlite://%s" % store}
    fo = "resilient.virt.failover_reservation"
    plan = [{"name": "plan", fo: {"creator": "sec", "requirements": {"*": 1}}}]
    evacuate = [{"name": "evacuate", fo: {
        "creator": "sec", "state": "evacuated", "failed_hosts": ["pve2"], "allow_partial": True}}]
    texts = [store]
    for name, tasks in (("plan", plan), ("evacuate", evacuate)):
        run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)],
                           extra_vars={"pve_password": secret}, args=("-vvv",), shown_with="default",
                           name="secrets-%s" % name)
        assert run.rc == 0, run.describe()
        texts += [run.output, run.stderr, str(run.document)]
        if name == "plan":
            sim.call(lambda: sim.pve.set_node_offline("pve2"))
    moves = dict((move["name"], move["action"]) for move in run.task("evacuate")["evacuation"]["moves"])
    assert moves == {"sec-shared": "recover", "sec-local": "failed"}, moves
    texts[0] = store.read_bytes().decode("latin-1")
    for text in texts:
        assert secret not in text, text[max(0, text.find(secret) - 800):text.find(secret) + 200]
