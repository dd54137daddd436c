"""A play on a state store behind Redis Sentinel goes on when the primary dies mid-play.

One real ``ansible-playbook`` run, with ``RESILIENT_VIRT_STATE_STORE`` set to a
``redis+sentinel://`` URL of a private primary, replica and three Sentinels: tasks that go
through the circuit breakers of the lab's hv1 and hv2, a breaker forced open, then a task that
waits for the replica to hold every write (``WAIT``) and SIGKILLs the primary; a task that needs
the store is retried until the Sentinels have promoted the replica, and the tasks after it succeed at once on
the new primary, where the breaker state written before the kill still is. A task during
the failover whose provider answers is not failed by the store's absence (a warning).
"""
import sys

from playbook_runner import play, run_playbook
from redis_server import REDIS_PASSWORD
from redis_topologies import REDIS_CLI, SENTINEL_PASSWORD, raw_client

INFO = "resilient.virt.vm_info"
CB = "resilient.virt.circuit_breaker"


def _kill_task(setup):
    """A task that waits until the replica acknowledged every write, then SIGKILLs the primary."""
    port = setup.primary_port()
    pid = setup.server(port).proc.pid
    script = ("import subprocess, os, signal, sys\n"
              "acked = subprocess.run([%r, '-h', '127.0.0.1', '-p', '%d', 'WAIT', '1', '5000'],"
              " capture_output=True, text=True, check=True).stdout.strip()\n"
              "os.kill(%d, signal.SIGKILL)\n"
              "print(acked)\n" % (REDIS_CLI, port, pid))
    return {"name": "kill the primary", "ansible.builtin.command": {"argv": [sys.executable, "-c", script]},
            "environment": {"REDISCLI_AUTH": REDIS_PASSWORD}}, port


def test_the_play_goes_on_after_the_primary_is_killed(lab, lab_module, redis_sentinel, tmp_path):
    url = redis_sentinel.url()
    providers = dict((name, lab_module.provider_config(lab.hypervisor(name))) for name in ("hv1", "hv2"))
    kill, old_port = _kill_task(redis_sentinel)
    tasks = [
        {"name": "list hv1 before", INFO: {"provider": "hv1"}},
        {"name": "list hv2 before", INFO: {"provider": "hv2"}},
        {"name": "open a breaker",
         CB: {"provider": {"type": "libvirt", "name": "spare-hv", "uri": "qemu+tcp://spare-hv/system"},
              "state": "open"}},
        kill,
        {"name": "list hv1 during the failover", INFO: {"provider": "hv1"}},
        {"name": "breakers during the failover", CB: {}, "register": "during",
         "until": "during is succeeded", "retries": 40, "delay": 0.5},
        {"name": "list hv1 after", INFO: {"provider": "hv1"}},
        {"name": "list hv2 after", INFO: {"provider": "hv2"}},
        {"name": "breakers after", CB: {}},
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"providers": providers})],
                       env={"RESILIENT_VIRT_STATE_STORE": url})
    assert run.rc == 0, [(t.name, t.result.get("msg")) for t in run.tasks if t.failed]
    assert run.task("kill the primary")["stdout"] == "1"  # the replica held every write
    new_port = redis_sentinel.wait_failover(old_port)
    assert new_port != old_port

    # the provider still answers while the store is away: a warning, not a failure
    during = run.task("list hv1 during the failover")  # the Sentinels wait 1 s before acting
    assert not during.failed
    assert any("is unavailable" in w and "store_failure=open" in w for w in during["warnings"]), during
    assert not run.task("breakers during the failover").failed  # once the Sentinels promoted
    for title in ("list hv1 after", "list hv2 after", "breakers after"):
        result = run.task(title)
        assert not result.failed, result
        assert result.get("attempts") is None  # no retry needed: the new primary answers
        assert not [w for w in result.get("warnings", []) if "state store" in w], result
    breakers = dict((b["name"], b) for b in run.task("breakers after")["breakers"])
    assert breakers["libvirt:spare-hv"]["state"] == "open"  # written before the kill
    assert breakers["libvirt:hv1"]["state"] == "closed"
    assert breakers["libvirt:hv1"]["successes_total"] >= 2  # before and after (during: maybe not)
    assert breakers["libvirt:hv2"]["successes_total"] >= 2

    # the test's own reading of the new primary: the records are there
    client = raw_client(url)
    assert client.connection_pool.connection_kwargs["port"] == new_port
    assert b'"state":"open"' in client.get("resilient_virt:breaker:libvirt:spare-hv")
    client.close()
    for secret in (REDIS_PASSWORD, SENTINEL_PASSWORD):
        assert secret not in run.output
    assert "Traceback" not in run.output
