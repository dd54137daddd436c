"""hypervisor state=fenced with a fence agent that cannot fence: the task fails with the agent's
reason, nothing is marked, and no secret shows - in ``ansible-playbook -vvv`` output, the results
or the state store.

The hypervisor is a libvirt provider whose socket nobody serves (in the test's directory, with a
password in its URI): unreachable at every check. The agent is the built-in Redfish one, with a
password, at an address of this machine where nothing listens. The secrets reach the play as
extra variables, as vault or AWX credentials would.
"""
import uuid

from playbook_runner import play, run_playbook, store_records
from redis_server import _free_port


def test_a_fence_that_fails_marks_nothing_and_shows_no_secret(tmp_path):
    secrets = dict((name, "%s-S3cret-%s" % (name, uuid.uuid4().hex[:10])) for name in ("bmc", "uri"))
    store = tmp_path / "s.db"
    providers = {"gone": {"type": "libvirt", "name": "gone", "az": "az1",
                          "uri": "qemu+unix://bob:{{ uri }}@/system?socket=%s" % (tmp_path / "none.sock")}}
    fencing = {"type": "redfish", "address": "https://127.0.0.1:%d" % _free_port(),
               "username": "fence", "password": "{{ bmc }}"}
    tasks = [{"name": "fence", "ignore_errors": True, "resilient.virt.hypervisor": {
        "provider": "gone", "state": "fenced", "grace": 2, "confirm_interval": 1,
        "fence_timeout": 10, "fencing": fencing}}]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={
        "providers": providers, "state_store": "sqlite://%s" % store})],
        extra_vars=secrets, args=("-vvv",), shown_with="default", name="secrets")
    result = run.task("fence")
    assert result.failed, run.describe()
    assert result["error"]["type"] == "Conflict"
    assert "did not answer" in result["msg"] and "never recovered automatically" in result["msg"]
    assert result["hypervisor"]["fenced"] is False and result["hypervisor"]["reachable"] is False
    assert result["hypervisor"]["checks"] >= 2
    assert result["fence"]["agent"] == "redfish" and result["fence"]["fenced"] is False
    assert "did not answer" in result["fence"]["reason"]
    assert store_records("sqlite://%s" % store, "fenced") == {}
    stored = "".join(path.read_bytes().decode("latin-1") for path in tmp_path.glob("s.db*"))
    for text in (run.output, run.stderr, str(run.document), stored):
        for kind, value in secrets.items():
            assert value not in text, "the %s secret is shown:\n%s" % (
                kind, text[max(0, text.find(value) - 800):text.find(value) + 200])
