"""Provider outages through real ansible-playbook runs: a killed and a frozen lab libvirtd.

Attempts are counted by an observer plugin (observer_plugin.py, loaded through
RESILIENT_VIRT_PLUGINS), independently of the circuit breaker's own counters.
"""
import calendar
import time

from observer_plugin import ATTEMPTS_ENV, read_attempts
from playbook_runner import play, run_playbook, plugin_env

HV = "hv1"
CALLS = 20
THRESHOLD = 3
ATTEMPTS_PER_CALL = 3
# short waits between attempts: the test counts attempts, not how far apart they are
RETRY = {"max_attempts": ATTEMPTS_PER_CALL, "base_delay": "20ms"}
HUNG_TIMEOUT = 3.0
STARTUP_MARGIN = 10.0  # process start and module payload, on a loaded machine


def _provider(lab, name):
    """hv1 under the provider ``name``: each name has its own breaker, ``libvirt:<name>``."""
    return {"type": "libvirt", "name": name, "uri": lab.hypervisor(HV).uri}


def _observed_run(tmp_path, tasks, store, name, timeout=600):
    """Run ``tasks`` with the observer plugin; return (run, attempts recorded)."""
    attempts = str(tmp_path / (name + "-attempts.jsonl"))
    env = dict(plugin_env("observer_plugin"), **{ATTEMPTS_ENV: attempts})
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": store})],
                       env=env, name=name, timeout=timeout)
    return run, read_attempts(attempts)


def _describe_loop(provider, resilience, calls=CALLS):
    return [
        {"name": "describe", "resilient.virt.vm_info": {
            "provider": provider, "name": "vm-{{ item }}", "resilience": resilience},
         "loop": list(range(calls)), "ignore_errors": True},
        {"name": "breaker", "resilient.virt.circuit_breaker": {"name": "libvirt:" + provider["name"]}},
    ]


def _error_types(loop_result):
    return [item.get("error", {}).get("type") for item in loop_result.items]


def test_breaker_stops_attempts_to_a_dead_hypervisor_then_recovers(lab, outage, tmp_path):
    store = "sqlite:///%s" % (tmp_path / "state.db")
    outage.stop(HV)

    guarded = dict(RETRY, failure_threshold=THRESHOLD, reset_timeout="10m")
    with_breaker, attempts_with = _observed_run(
        tmp_path, _describe_loop(_provider(lab, "hv1-guarded"), guarded), store, "with-breaker")
    unguarded = dict(RETRY, failure_threshold=1000)
    without_breaker, attempts_without = _observed_run(
        tmp_path, _describe_loop(_provider(lab, "hv1-unguarded"), unguarded), store,
        "without-breaker")
    loop_with, loop_without = with_breaker.task("describe"), without_breaker.task("describe")
    print("\n%d describes of a dead hypervisor: with the breaker %d attempts, %.1f s for the loop "
          "(%.1f s for ansible-playbook); without it %d attempts, %.1f s (%.1f s)" % (
              CALLS, len(attempts_with), loop_with.duration, with_breaker.wall,
              len(attempts_without), loop_without.duration, without_breaker.wall))

    assert {a["provider"] for a in attempts_with} == {"libvirt:hv1-guarded"}
    assert len(attempts_with) == THRESHOLD, attempts_with
    types = _error_types(loop_with)
    assert len(types) == CALLS and all(item.get("failed") for item in loop_with.items)
    assert types[0] == "Unavailable" and set(types[1:]) == {"BreakerOpen"}, types
    breaker = with_breaker.task("breaker")["breaker"]
    assert breaker["state"] == "open" and breaker["opened_total"] == 1, breaker
    assert breaker["failures_total"] == THRESHOLD, breaker
    assert breaker["rejected_total"] >= CALLS - THRESHOLD, breaker

    assert len(attempts_without) == CALLS * ATTEMPTS_PER_CALL, len(attempts_without)
    assert set(_error_types(loop_without)) == {"Unavailable"}
    assert without_breaker.task("breaker")["breaker"]["state"] == "closed"
    assert len(attempts_with) * 10 <= len(attempts_without)

    # recovery: a breaker with a 2 s reset timeout opens, the daemon comes back, the breaker
    # half-opens after 2 s and one successful call closes it
    recovering = _provider(lab, "hv1-recovering")
    quick = {"retry_preset": "none", "failure_threshold": THRESHOLD, "reset_timeout": "2s"}
    opened, dummy = _observed_run(tmp_path, _describe_loop(recovering, quick, THRESHOLD), store, "open-quick")
    before = opened.task("breaker")["breaker"]
    # opened once; on a loaded machine its 2 s may have passed before the task read it
    assert before["opened_total"] == 1 and before["state"] in ("open", "half_open"), before
    outage.start(HV)
    half_open_at = calendar.timegm(time.strptime(before["half_open_at"], "%Y-%m-%dT%H:%M:%SZ"))
    time.sleep(max(0.0, half_open_at - time.time()) + 0.2)
    cb = "resilient.virt.circuit_breaker"
    tasks = [
        {"name": "half-open", cb: {"name": "libvirt:hv1-recovering"}},
        {"name": "probe", "resilient.virt.vm_info": {"provider": recovering, "resilience": quick}},
        {"name": "closed", cb: {"name": "libvirt:hv1-recovering"}},
    ]
    recovered, probes = _observed_run(tmp_path, tasks, store, "recover")
    assert recovered.rc == 0, recovered
    assert recovered.task("half-open")["breaker"]["state"] == "half_open"
    assert len(probes) == 1 and probes[0]["operation"] == "list_vms", probes
    after = recovered.task("closed")["breaker"]
    assert after["state"] == "closed", after
    assert after["opened_total"] == before["opened_total"], after
    assert after["failures_total"] == THRESHOLD and after["consecutive_failures"] == 0, after


def test_frozen_hypervisor_times_out_instead_of_hanging(lab, outage, tmp_path, task_path):
    outage.freeze(HV)
    tasks = [{"name": "describe", "resilient.virt.vm_info": {
        "provider": _provider(lab, "hv1-frozen"), "name": "x",
        "resilience": {"timeout_describe": "%gs" % HUNG_TIMEOUT, "retry_preset": "none"}},
        "ignore_errors": True}]
    # a hang would raise subprocess.TimeoutExpired here instead of stalling the test run
    run, attempts = _observed_run(tmp_path, tasks, "sqlite:///%s" % (tmp_path / "state.db"),
                                  "frozen", timeout=120)
    described = run.task("describe")
    print("\ndescribe of a frozen hypervisor: %s after %.1f s in the task, %.1f s for "
          "ansible-playbook" % (described.get("error", {}).get("type"), described.duration,
                                run.wall))
    assert described.failed and described["error"]["type"] == "Timeout", described
    assert len(attempts) == 1
    assert HUNG_TIMEOUT <= described.duration < HUNG_TIMEOUT + STARTUP_MARGIN
    if task_path == "worker":  # the abandoned call's thread does not keep the worker alive
        assert described.duration < HUNG_TIMEOUT + 2, described.duration
        assert run.wall < HUNG_TIMEOUT + STARTUP_MARGIN, run.wall
    assert "Traceback" not in run.output
