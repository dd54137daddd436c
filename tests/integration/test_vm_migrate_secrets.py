"""vm_migrate shows no secret: in ``ansible-playbook -vvv`` output, its results or the state store.

The source and the target are lab hypervisors reached through URIs that carry a password (the
lab's daemons ask for none, so the password only travels), given in a ``providers`` catalog
through ``module_defaults`` so that every task receives both; a third target is unreachable
with its own password in its URI. The secrets reach the play as extra variables, as vault or AWX
credentials would. One move succeeds (live, with the disk copied), one fails at the unreachable
target, one is refused by the prechecks (another zone); the default callback's output, the JSON
callback's document and the SQLite state store's bytes are searched for every secret.
"""
import uuid

import libvirt
import pytest
from backup_disks import make_vm, remove_prefixed
from playbook_runner import play, run_playbook


@pytest.fixture
def hvs(lab):
    hv1, hv2 = lab.hypervisor("hv1"), lab.hypervisor("hv2")
    conn1, conn2 = libvirt.open(hv1.uri), libvirt.open(hv2.uri)
    prefix = "migsec-%s-" % uuid.uuid4().hex[:6]
    yield hv1, hv2, conn1, prefix
    for conn in (conn1, conn2):
        remove_prefixed(conn, prefix)
        conn.close()


def _with_password(uri, variable):
    return uri.replace("qemu+unix:///", "qemu+unix://bob:{{ %s }}@/" % variable)


def test_a_move_and_its_failures_show_no_secret(tmp_path, hvs):
    hv1, hv2, conn1, prefix = hvs
    secrets = dict((name, "%s-S3cret-%s" % (name, uuid.uuid4().hex[:10]))
                   for name in ("source", "target", "down"))
    name = prefix + "vm"
    make_vm(conn1, hv1, name, size_mib=16)
    store = tmp_path / "s.db"
    providers = {
        "hv1": {"type": "libvirt", "name": "hv1", "az": "az1",
                "uri": _with_password(hv1.uri, "source")},
        "hv2": {"type": "libvirt", "name": "hv2", "az": "az1",
                "uri": _with_password(hv2.uri, "target")},
        "down": {"type": "libvirt", "name": "down", "az": "az1",
                 "uri": "qemu+tcp://bob:{{ down }}@127.0.0.1:1/system"},
        "far": {"type": "libvirt", "name": "far", "az": "az9",
                "uri": _with_password(hv2.uri, "target")},
    }
    quick = {"retry_preset": "none", "timeout_validate": "5s", "timeout_describe": "5s"}
    tasks = [{"name": title, "ignore_errors": True, "resilient.virt.vm_migrate": dict(
        vm=name, target=target, resilience=quick)}
        for title, target in (("down", "down"), ("far", "far"), ("move", "hv2"))]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={
        "providers": providers, "provider": "hv1", "state_store": "sqlite://%s" % store})],
        extra_vars=secrets, args=("-vvv",), shown_with="default", name="secrets")
    assert run.task("down").failed and run.task("far").failed, run.describe()
    assert not run.task("move").failed, run.describe()
    assert run.task("move")["migration"]["mode"] == "live"
    texts = (run.output, run.stderr, str(run.document), store.read_bytes().decode("latin-1"))
    for text in texts:
        for kind, value in secrets.items():
            assert value not in text, "the %s secret is shown:\n%s" % (
                kind, text[max(0, text.find(value) - 800):text.find(value) + 200])
