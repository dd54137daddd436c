"""vm_migrate and the hypervisor drain on a simulated Proxmox VE cluster (fakepve with the lab's
migration, ``lab/pvesim.py``) show no secret: the provider's password reaches the play as an
extra variable, as vault or AWX credentials would, and is searched for in ``ansible-playbook
-vvv`` output, the JSON callback's document and the SQLite state store's bytes, after a move
that succeeds, one refused by the prechecks (an offline node), one PVE refuses (a locked VM)
and a drain.
"""
import uuid

from playbook_runner import play, run_playbook


def test_moves_and_their_failures_show_no_password(simulated_pve, tmp_path):
    sim = simulated_pve
    secret = sim.password
    sim.new_vm("sec-ok", "pve1")
    sim.new_vm("sec-locked", "pve1", lock="backup")
    sim.new_vm("sec-drained", "pve3")
    sim.call(lambda: sim.pve.set_node_offline("pve2"))
    provider = dict(sim.provider, password="{{ pve_password }}")
    quick = {"retry_preset": "none"}
    tasks = [{"name": title, "ignore_errors": True, "resilient.virt.vm_migrate": {
        "vm": vm, "target": target, "resilience": quick}}
        for title, vm, target in (("offline", "sec-ok", "pve2"), ("locked", "sec-locked", "pve3"),
                                  ("move", "sec-ok", "pve3"))]
    tasks.append({"name": "drain", "ignore_errors": True, "resilient.virt.hypervisor": {
        "name": "pve3", "state": "maintenance", "targets": ["pve1"], "resilience": quick}})
    store = tmp_path / "s.db"
    run = run_playbook(tmp_path, [play(tasks, module_defaults={
        "provider": provider, "state_store": "sqlite://%s" % store})],
        extra_vars={"pve_password": secret}, args=("-vvv",), shown_with="default",
        name="secrets-%s" % uuid.uuid4().hex[:6])
    assert run.task("offline").failed and run.task("locked").failed, run.describe()
    assert not run.task("move").failed, run.describe()
    assert run.task("drain")["changed"], run.describe()
    for text in (run.output, run.stderr, str(run.document), store.read_bytes().decode("latin-1")):
        assert secret not in text, text[max(0, text.find(secret) - 800):text.find(secret) + 200]
