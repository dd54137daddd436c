"""Restores on a simulated Proxmox VE cluster (fakepve with the lab's vzdump archives and
qmrestore, ``lab/pvesim.py``) show no secret: the provider's password reaches the play as an
extra variable, as vault or AWX credentials would, and is searched for in ``ansible-playbook
-vvv`` output, the JSON callback's document and the SQLite state store's files, after a backup,
a restore to a new name, one refused (the VM runs) and one whose archive is gone.
"""
import uuid

from playbook_runner import play, run_playbook
from pvesim import with_qmrestore  # lab/ is on sys.path (conftest.py)


def test_restores_and_their_failures_show_no_password(simulated_pve, tmp_path):
    sim = simulated_pve
    sim.call(lambda: with_qmrestore(sim.pve))
    secret = sim.password
    sim.new_vm("sec-r", "pve1")
    provider = dict(sim.provider, password="{{ pve_password }}")

    def task(title, **args):
        return {"name": title, "ignore_errors": True, "resilient.virt.backup": args}
    store = tmp_path / "s.db"

    def run(tasks, name):
        return run_playbook(tmp_path, [play(tasks, module_defaults={
            "provider": provider, "state_store": "sqlite://%s" % store})],
            extra_vars={"pve_password": secret}, args=("-vvv",), shown_with="default",
            name="%s-%s" % (name, uuid.uuid4().hex[:6]))
    first = run([task("take", vm="sec-r", name="sec-b1"),
                 task("restore", vm="sec-r", name="sec-r1", state="restored", target="sec-copy"),
                 task("running", vm="sec-r", name="sec-r2", state="restored")], "restore")
    assert first.task("restore")["record"]["phase"] == "Completed", first.describe()
    assert first.task("running").failed, first.describe()

    def forget_archives():
        sim.pve.storages["local"]["volumes"] = {}
    sim.call(forget_archives)
    second = run([task("gone", vm="sec-r", name="sec-r3", state="restored", backup="sec-b1",
                       target="sec-gone")], "gone")
    assert second.task("gone")["error"]["type"] == "NotFound", second.describe()
    stored = [path.read_bytes().decode("latin-1") for path in tmp_path.glob("s.db*")]  # -wal too
    for played in (first, second):
        for text in [played.output, played.stderr, str(played.document)] + stored:
            assert secret not in text, text[max(0, text.find(secret) - 800):text.find(secret) + 200]
