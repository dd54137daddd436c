"""Plays run the way AWX runs them: through ansible_runner with a private data directory,
credentials injected as environment variables (env/envvars), extra variables (env/extravars) and
the jsonfile fact cache that AWX configures; and two such jobs at once (two execution nodes
running slices of one job) sharing one Redis store.

Oracles of the tests' own: runner's events and fact cache, the observer plugin's record of every
attempt that reached for a provider (with its time), and the breaker records read from Redis
with redis-py.
"""
import json
import os
import sys
import time

import pytest
import yaml

from observer_plugin import ATTEMPTS_ENV, read_attempts
from playbook_runner import plugin_env

ansible_runner = pytest.importorskip("ansible_runner")

THRESHOLD = 3
CALLS = 10
QPS, BURST = 4, 2


def _provider(lab, hv, name):
    return {"type": "libvirt", "name": name, "uri": lab.hypervisor(hv).uri, "domain_type": "qemu"}


def _private_data_dir(root, name, tasks, envvars, extravars):
    """A private data directory as AWX writes one: project/, inventory/, env/."""
    pdd = os.path.join(str(root), name)
    for sub in ("project", "inventory", "env"):
        os.makedirs(os.path.join(pdd, sub))
    play = [{"name": "job " + name, "hosts": "all", "gather_facts": False, "tasks": tasks}]
    with open(os.path.join(pdd, "project", "play.yml"), "w") as f:
        yaml.safe_dump(play, f)
    with open(os.path.join(pdd, "inventory", "hosts"), "w") as f:
        f.write("localhost ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    for file_name, data in (("envvars", envvars), ("extravars", extravars)):
        with open(os.path.join(pdd, "env", file_name), "w") as f:
            yaml.safe_dump(data, f)
    return pdd


def _envvars(store_url, attempts=None):
    """What the credentials inject (the state store's URL and password), plus the test's
    observer plugin."""
    env = {"RESILIENT_VIRT_STATE_STORE": store_url,
           "ANSIBLE_COLLECTIONS_PATH": os.environ["ANSIBLE_COLLECTIONS_PATH"]}
    if attempts:
        env.update(plugin_env("observer_plugin"), **{ATTEMPTS_ENV: attempts})
    return env


def _run(pdd, **kwargs):
    return ansible_runner.run(private_data_dir=pdd, playbook="play.yml", fact_cache_type="jsonfile",
                              quiet=True, **kwargs)


def _results(runner, task):
    """The results (one per loop item, or the task's own) of ``task`` from runner's events."""
    out = []
    for event in runner.events:
        data = event.get("event_data", {})
        if data.get("task") != task:
            continue
        item = event["event"] in ("runner_item_on_ok", "runner_item_on_failed")
        whole = event["event"] in ("runner_on_ok", "runner_on_failed") and "results" not in data["res"]
        if item or whole:
            out.append(data["res"])
    return out


def _artifacts_text(pdd):
    """What the job's output is made of (runner's events, stdout and the fact cache), as one
    text; runner's ``command`` file, its own record of the environment it set, is left out."""
    text = []
    for root, _dirs, files in os.walk(os.path.join(pdd, "artifacts")):
        for name in files:
            if name == "command":
                continue
            with open(os.path.join(root, name), errors="replace") as f:
                text.append(f.read())
    return "\n".join(text)


def _cached_facts(runner, host):
    """The facts of ``host`` in the job's jsonfile fact cache. ``runner.get_fact_cache`` reads the
    file named after the host; ansible-core 2.19 names it ``s<schema>_<host>`` and wraps the facts
    in a ``__payload__`` string, so that file is read when runner finds none."""
    facts = runner.get_fact_cache(host)
    if facts:
        return facts
    names = [n for n in os.listdir(runner.config.fact_cache) if n.endswith("_" + host) and n.startswith("s")]
    assert len(names) == 1, os.listdir(runner.config.fact_cache)
    with open(os.path.join(runner.config.fact_cache, names[0])) as f:
        return json.loads(json.load(f)["__payload__"])


def _breaker_record(server, name):
    """The breaker record ``name`` as Redis holds it, found by key pattern (redis-py)."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=server.port, password=server.password)
    try:
        keys = [k for k in client.scan_iter(match="*breaker*%s" % name) if client.type(k) == b"string"]
        assert len(keys) == 1, keys
        return json.loads(client.get(keys[0]))
    finally:
        client.close()


def test_a_job_run_through_ansible_runner_lands_its_breakers_in_the_fact_cache(lab, start_redis, tmp_path):
    server = start_redis()
    tasks = [{"name": "describe", "resilient.virt.vm_info": {"provider": "{{ hypervisor }}"}},
             {"name": "list breakers", "resilient.virt.circuit_breaker": {}}]
    pdd = _private_data_dir(tmp_path, "job", tasks, _envvars(server.url()),
                            {"hypervisor": _provider(lab, "hv1", "hv1-awx")})
    runner = _run(pdd)
    assert runner.status == "successful" and runner.rc == 0, runner.stdout.read()
    described = _results(runner, "describe")
    assert len(described) == 1 and isinstance(described[0]["vms"], list), described
    stats = [e for e in runner.events if e["event"] == "playbook_on_stats"]
    assert stats and stats[0]["event_data"]["ok"] == {"localhost": 2}, stats
    facts = _cached_facts(runner, "localhost")
    breaker = facts["resilient_virt_breakers"]["libvirt:hv1-awx"]
    assert breaker["state"] == "closed" and breaker["consecutive_failures"] == 0, facts
    assert _breaker_record(server, "libvirt:hv1-awx")["successes_total"] == 1
    assert server.password not in _artifacts_text(pdd)  # events, stdout, fact cache


def _describe_loop(provider, resilience, calls):
    return [{"name": "describe", "resilient.virt.vm_info": {
        "provider": provider, "name": "vm-{{ item }}", "resilience": resilience},
        "loop": list(range(calls)), "ignore_errors": True}]


START_LEAD = 12.0  # seconds for both runner jobs to start, on a loaded machine


def _two_nodes_at_once(tmp_path, tasks, store_url, extravars):
    """Two runner jobs started together, each with its own private data directory and attempts
    file, whose tasks begin at one moment (a first task waits for it: a job may take seconds
    longer than the other to start); return ((runner, attempts) for each) once both have ended."""
    start_at = time.time() + START_LEAD
    tasks = [{"name": "wait for the common start", "ansible.builtin.wait_for": {
        "timeout": "{{ [0, %r - now().timestamp()] | max | round(0, 'ceil') | int }}" % start_at}}] + tasks
    jobs = []
    for node in ("node1", "node2"):
        attempts = str(tmp_path / ("%s-attempts.jsonl" % node))
        pdd = _private_data_dir(tmp_path, node, tasks, _envvars(store_url, attempts), extravars)
        thread, runner = ansible_runner.run_async(private_data_dir=pdd, playbook="play.yml",
                                                  fact_cache_type="jsonfile", quiet=True)
        jobs.append((thread, runner, attempts))
    out = []
    for thread, runner, attempts in jobs:
        thread.join(600)
        assert not thread.is_alive() and runner.status in ("successful", "failed"), runner.status
        out.append((runner, read_attempts(attempts)))
    return out


@pytest.mark.parametrize("fault", ["stop", "freeze"])
def test_two_nodes_share_one_breaker_and_a_dead_hypervisor_sees_threshold_attempts(
        lab, outage, start_redis, tmp_path, fault):
    """A killed daemon refuses at once; a frozen one keeps both nodes' attempts under way for
    their whole timeout, so without shared slots both would be let through at once."""
    server = start_redis()
    getattr(outage, fault)("hv2")
    resilience = {"failure_threshold": THRESHOLD, "max_attempts": 3, "base_delay": "100ms",
                  "reset_timeout": "10m", "timeout_describe": "2s"}
    tasks = _describe_loop("{{ hypervisor }}", resilience, CALLS)
    jobs = _two_nodes_at_once(tmp_path, tasks, server.url(), {"hypervisor": _provider(lab, "hv2", "hv2-awx")})
    attempts = [a for _runner, node_attempts in jobs for a in node_attempts]
    errors = [r.get("error", {}).get("type") for runner, _a in jobs for r in _results(runner, "describe")]
    print("\ntwo nodes, %d describes each of a hypervisor (%s): %d attempts reached it (%s), errors %s"
          % (CALLS, fault, len(attempts), [len(a) for _r, a in jobs], sorted(set(errors))))
    assert len(errors) == 2 * CALLS and set(errors) <= {"Unavailable", "Timeout", "BreakerOpen"}, errors
    assert len(attempts) == THRESHOLD, attempts  # between both nodes, not per node
    assert all(len(node_attempts) < CALLS for _r, node_attempts in jobs)
    record = _breaker_record(server, "libvirt:hv2-awx")
    assert record["state"] == "open" and record["opened_total"] == 1, record
    assert record["failures_total"] == THRESHOLD, record
    assert errors.count("BreakerOpen") >= 2 * CALLS - 2  # at most each node's first call ended otherwise


def test_two_nodes_share_one_rate_limit(lab, start_redis, tmp_path):
    server = start_redis()
    resilience = {"rate_limit_qps": QPS, "rate_limit_burst": BURST}
    tasks = _describe_loop("{{ hypervisor }}", resilience, 12)
    jobs = _two_nodes_at_once(tmp_path, tasks, server.url(), {"hypervisor": _provider(lab, "hv3", "hv3-awx")})
    assert all(runner.status == "successful" for runner, _a in jobs)
    times = sorted(a["at"] for _runner, node_attempts in jobs for a in node_attempts)
    assert len(times) == 24, len(times)
    spans = [(min(a["at"] for a in node), max(a["at"] for a in node)) for _r, node in jobs]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1], spans  # the nodes overlapped
    busiest = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
    print("\ntwo nodes, 24 describes at %g qps + %d burst: busiest second %d calls, %.1f s in all"
          % (QPS, BURST, busiest, times[-1] - times[0]))
    assert busiest <= QPS + BURST, busiest
    assert times[-1] - times[0] >= (24 - BURST) / QPS - 0.5  # held back, not merely spread out
