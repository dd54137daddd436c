"""The resilience_summary callback in real ansible-playbook runs against the lab.

Four hosts (forks 4) describe VMs on a healthy hypervisor and, in a loop, on a stopped one whose
breaker opens. The printed summary and the Prometheus file are checked against oracles of the
test's own: the attempts the observer plugin saw, the task and item results in the JSON output
(the retry loop's ``error.details.attempts``), the breaker records read from the SQLite file with
sqlite3, and the retry settings for the seconds waited. A second run adds to the counters of the
first and pushes them to a real Pushgateway. The file runs on both task paths (``task_path``: in
the controller's worker and as module processes).
"""
import collections
import os
import stat

import prometheus_stack
from observer_plugin import OUTCOMES_ENV, read_attempts
from playbook_runner import PlaybookRun, local_inventory, play, plugin_env, run_playbook, store_records
from prometheus_samples import parse, samples, value

CALLBACK = "resilient.virt.resilience_summary"
HOSTS = ("h1", "h2", "h3", "h4")
ITEMS = 3
BASE_DELAY = 0.2
RESILIENCE = {"max_attempts": 2, "base_delay": "%gs" % BASE_DELAY, "failure_threshold": 2,
              "reset_timeout": "10m"}
BANNER = "RESILIENCE SUMMARY"
PREFIX = "resilient_virt_circuit_breaker_"
CALLS = "resilient_virt_provider_calls_total"
DURATION = "resilient_virt_provider_call_duration_seconds"
SECRET = "Summ4ryS3cretPw"


def _summary(stdout):
    """The summary's rows by provider key: {key: {column: text}}, read from the printed table."""
    lines = stdout[stdout.index(BANNER):].splitlines()[1:]
    header = lines[0].split()
    assert header[0] == "provider", lines
    rows = {}
    for line in lines[1:]:
        if not line.strip():
            break
        cells = line.split(None, len(header) - 1)
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def run_with_summary(tmp_path, tasks, store, metrics, name, extra_env=None):
    """ansible-playbook with the callback on; the JSON document is read from the part of
    stdout before the summary (both callbacks print to stdout)."""
    env = dict(plugin_env("observer_plugin"), ANSIBLE_CALLBACKS_ENABLED=CALLBACK,
               RESILIENT_VIRT_STATE_STORE=store, RESILIENT_VIRT_SUMMARY_METRICS_FILE=metrics,
               **{OUTCOMES_ENV: str(tmp_path / (name + "-outcomes.jsonl"))})
    env.update(extra_env or {})
    run = run_playbook(tmp_path, [play(tasks, hosts="all", module_defaults={"state_store": store})],
                       inventory=local_inventory(HOSTS), forks=len(HOSTS), env=env, name=name)
    assert BANNER in run.stdout, run.describe()
    parsed = PlaybookRun(run.rc, run.stdout[:run.stdout.index(BANNER)], run.stderr, run.wall)
    return run, parsed, read_attempts(env[OUTCOMES_ENV])


def _read(path):
    with open(path) as f:
        return f.read()


def _provider(lab, hv):
    return {"type": "libvirt", "name": "sum-" + hv, "uri": lab.hypervisor(hv).uri}


def outage_tasks(lab):
    """A healthy hypervisor described once per host, then a loop of VMs on hv1 (which the test
    stops) whose breaker opens, and the breaker's record read back."""
    return [
        {"name": "healthy", "resilient.virt.vm_info": {"provider": _provider(lab, "hv2"), "name": "none-here"}},
        {"name": "dead", "resilient.virt.vm_info": {
            "provider": _provider(lab, "hv1"), "name": "vm-{{ item }}", "resilience": RESILIENCE},
         "loop": list(range(ITEMS)), "ignore_errors": True},
        {"name": "breakers", "resilient.virt.circuit_breaker": {"name": "libvirt:sum-hv1"}, "run_once": True},
    ]


def test_summary_and_metrics_count_an_outage(lab, outage, tmp_path, task_path):
    store = "sqlite://%s" % (tmp_path / "state.db")
    metrics = str(tmp_path / "resilient_virt.prom")
    outage.stop("hv1")
    tasks = outage_tasks(lab)
    run, parsed, outcomes = run_with_summary(tmp_path, tasks, store, metrics, "outage")
    print("\n" + run.stdout[run.stdout.index(BANNER):])
    assert run.rc == 0, run.describe()
    rows = _summary(run.stdout)
    assert set(rows) == {"libvirt:sum-hv1", "libvirt:sum-hv2"}, rows
    records = store_records(store, "breaker")

    # the healthy hypervisor: one call and one attempt per host, nothing else
    healthy = rows["libvirt:sum-hv2"]
    seen = [o for o in outcomes if o["provider"] == "libvirt:sum-hv2"]
    assert len(seen) == len(HOSTS)  # each one an answer: NotFound
    assert (healthy["tasks"], healthy["calls"], healthy["attempts"]) == ("4", "4", "4")
    assert (healthy["retries"], healthy["failures"], healthy["refused"], healthy["failed"]) == ("0", "0", "0", "0")
    assert (healthy["breaker"], healthy["transitions"]) == ("closed", "-")

    # the dead one: every item of every host failed with one call each
    items = [item for task in parsed.tasks if task.name == "dead" for item in task.items]
    assert len(items) == len(HOSTS) * ITEMS and all(item.get("failed") for item in items)
    types = [item["error"]["type"] for item in items]
    assert set(types) <= {"Unavailable", "BreakerOpen"} and "BreakerOpen" in types, types
    retries = sum(item["error"]["details"]["attempts"] - 1 for item in items)
    dead = rows["libvirt:sum-hv1"]
    record = records["libvirt:sum-hv1"]
    assert dead["tasks"] == dead["calls"] == dead["failed"] == str(len(items))
    assert int(dead["attempts"]) == len([o for o in outcomes if o["provider"] == "libvirt:sum-hv1"])
    assert int(dead["retries"]) == retries
    assert retries * BASE_DELAY - 0.01 <= float(dead["backoff_s"]) <= retries * BASE_DELAY * 1.1 + 0.01
    assert int(dead["failures"]) == record["failures_total"] >= RESILIENCE["failure_threshold"]
    assert int(dead["refused"]) == record["rejected_total"] == types.count("BreakerOpen")
    assert dead["breaker"] == record["state"] == "open"
    assert dead["transitions"] == "closed->open x%d" % record["opened_total"]
    assert record["opened_total"] == 1

    # each item's own numbers add up to the row
    assert sum(item["resilience"]["libvirt:sum-hv1"]["refused"] for item in items) == int(dead["refused"])

    # the metrics file: the store's breakers, in the text format, readable by node_exporter
    assert stat.S_IMODE(os.stat(metrics).st_mode) == 0o644
    families = parse(_read(metrics))
    for key, state in (("libvirt:sum-hv1", "open"), ("libvirt:sum-hv2", "closed")):
        labels = dict(provider_type="libvirt", provider=key.split(":", 1)[1])
        assert [value(families, PREFIX + "state", state=s, **labels) for s in ("closed", "open", "half_open")] == [
            float(s == state) for s in ("closed", "open", "half_open")]
        for counter in ("failures_total", "opened_total", "rejected_total"):
            assert value(families, PREFIX + counter, **labels) == records[key][counter], counter
    assert sorted(os.listdir(tmp_path)).count("resilient_virt.prom") == 1
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]

    # the calls: vm_info describes each VM once; one call per host and per item
    hv2 = dict(provider_type="libvirt", provider="sum-hv2")
    hv1 = dict(provider_type="libvirt", provider="sum-hv1")
    assert {o["operation"] for o in outcomes} == {"describe"}
    assert value(families, CALLS, operation="describe", outcome="NotFound", **hv2) == len(HOSTS)
    assert len(samples(families, CALLS, **hv2)) == 1
    for outcome, count in collections.Counter(types).items():
        assert value(families, CALLS, operation="describe", outcome=outcome, **hv1) == count, outcome
    assert len(samples(families, CALLS, **hv1)) == len(set(types))
    assert value(families, DURATION + "_count", operation="describe", **hv1) == len(items)
    assert value(families, DURATION + "_bucket", operation="describe", le="+Inf", **hv2) == len(HOSTS)
    for key, labels in (("libvirt:sum-hv1", hv1), ("libvirt:sum-hv2", hv2)):
        attempts = len([o for o in outcomes if o["provider"] == key])
        assert value(families, "resilient_virt_provider_attempts_total", **labels) == attempts
    assert value(families, "resilient_virt_provider_retries_total", **hv1) == retries
    assert value(families, "resilient_virt_provider_retries_total", **hv2) == 0
    # the retries of hv1 waited, and their time is in the calls': more than the retries' waits
    assert value(families, DURATION + "_sum", operation="describe", **hv1) >= float(dead["backoff_s"])
    assert value(families, "resilient_virt_rate_limit_waits_total", **hv2) == 0

    # a second run adds to the first and pushes the totals to a Pushgateway
    gateway = prometheus_stack.pushgateway(str(tmp_path))
    try:
        again, _parsed, _outcomes = run_with_summary(tmp_path, tasks[:1], store, metrics, "again", extra_env={
            "RESILIENT_VIRT_SUMMARY_PUSHGATEWAY_URL": gateway.url,
            "RESILIENT_VIRT_SUMMARY_PUSHGATEWAY_JOB": "virt-test"})
        assert again.rc == 0 and "WARNING" not in again.stderr, again.describe()
        pushed = parse("".join(line + "\n" for line in gateway.get("/metrics").splitlines()
                               if "resilient_virt_" in line.split("{")[0]))  # the gateway's own aside
    finally:
        gateway.stop()
    grown = parse(_read(metrics))
    assert value(grown, CALLS, operation="describe", outcome="NotFound", **hv2) == 2 * len(HOSTS)
    for outcome, count in collections.Counter(types).items():
        assert value(grown, CALLS, operation="describe", outcome=outcome, **hv1) == count, outcome
    assert value(grown, DURATION + "_count", operation="describe", **hv2) == 2 * len(HOSTS)
    for family in grown.values():
        for sample, labels, number in family["samples"]:
            assert value(pushed, sample, job="virt-test", **labels) == number, (sample, labels)


def test_an_unreadable_store_falls_back_to_the_results(lab, tmp_path, task_path):
    store = "sqlite://%s" % (tmp_path / "state.db")
    metrics = str(tmp_path / "resilient_virt.prom")
    tasks = [{"name": "healthy", "resilient.virt.vm_info": {"provider": _provider(lab, "hv2"), "name": "none-here"}}]
    # the callback reads a Redis store nobody listens on (with a password that must not show);
    # the tasks keep theirs (module_defaults)
    env = {"RESILIENT_VIRT_STATE_STORE": "redis://:%s@127.0.0.1:1/0" % SECRET}
    run, parsed, outcomes = run_with_summary(tmp_path, tasks, store, metrics, "fallback", extra_env=env)
    assert run.rc == 0, run.describe()
    assert "could not be read from the state store" in run.stderr, run.stderr
    assert SECRET not in run.output and "Traceback" not in run.output
    assert _summary(run.stdout)["libvirt:sum-hv2"]["calls"] == "4"
    families = parse(_read(metrics))
    labels = dict(provider_type="libvirt", provider="sum-hv2")
    assert value(families, PREFIX + "state", state="closed", **labels) == 1
    assert value(families, PREFIX + "failures_total", **labels) == 0
