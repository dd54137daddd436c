"""Breaker and rate limiter shared by many processes (each test runs on every store: SQLite,
Redis, Redis through Sentinel, a Redis Cluster).

The workers are this file run as a script (``python test_multiprocess.py ROLE PARAMS``), so it
imports nothing heavy at module level: eight worker start-ups stay cheap. Each worker says
"ready" once its store is open and waits for the parent to send the start: the workers of a test
start together however long the machine took to start them.
"""
import json
import os
import signal
import subprocess
import sys
import time

from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    CircuitBreaker)
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, Unavailable)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.rate_limit import RateLimiter
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

WORKERS = 8
HUGE = 10 ** 9


def _breaker(store, p):
    return CircuitBreaker(store, p["name"], failure_threshold=p.get("threshold", HUGE),
                          reset_timeout=p.get("reset", 3600), probe_lease=p.get("lease", 60),
                          half_open_max_calls=p.get("max_probes", 1))


def _wait_start(p):
    time.sleep(max(0.0, p.get("start_at", 0) - time.time()))


# --- worker roles: each prints one JSON line -----------------------------------------------

def role_count(store, p):
    """n failures and n successes through one closed breaker."""
    breaker = _breaker(store, p)
    _wait_start(p)
    for _dummy in range(p["n"]):
        breaker.on_failure(breaker.before_call(), Unavailable("down"))
        breaker.on_success(breaker.before_call())
    return {}


def role_reject(store, p):
    """n calls against an open breaker; all must be refused."""
    breaker = _breaker(store, p)
    _wait_start(p)
    refused = 0
    for _dummy in range(p["n"]):
        try:
            breaker.before_call()
        except BreakerOpen:
            refused += 1
    return {"refused": refused}


def _track(store, delta):
    def fn(cur, now):
        cur = cur or {"now": 0, "max": 0}
        inflight = cur["now"] + delta
        return {"now": inflight, "max": max(cur["max"], inflight)}, inflight
    return store.update("test", "inflight", fn)


def role_probe(store, p):
    """Until end_at: take a probe slot when free, hold it, release it without a verdict."""
    breaker = _breaker(store, p)
    _wait_start(p)
    probes = 0
    while time.time() < p["end_at"]:
        try:
            permit = breaker.before_call()
        except BreakerOpen:
            time.sleep(0.01)
            continue
        assert permit.probe, "the breaker closed: the test lost its half-open state"
        probes += 1
        _track(store, +1)
        time.sleep(p["hold"])
        _track(store, -1)
        breaker.release(permit)
    return {"probes": probes}


def role_hold_probe(store, p):
    """Take the probe slot, say so, then hang until killed."""
    permit = _breaker(store, p).before_call()
    print(json.dumps({"probe": permit.probe}), flush=True)
    time.sleep(60)
    return {}


def role_rate(store, p):
    """Until end_at: acquire turns as fast as allowed; report for each the earliest and the
    latest time it can have been admitted (a worker paused by the scheduler widens the span)."""
    limiter = RateLimiter(store, p["name"], p["qps"], p["burst"])
    _wait_start(p)
    spans = []
    while time.time() < p["end_at"]:
        asked = time.time()
        waited = limiter.acquire()
        spans.append((asked + waited, time.time()))
    return {"spans": spans}


# --- parent side ------------------------------------------------------------------------------

def _spawn(role, url, env, **params):
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), role, url,
                             json.dumps(params)], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)


def _start(procs, **times):
    """Wait until every worker is ready, then send each the same start (and end) times, the
    given offsets counted from now."""
    for proc in procs:
        assert proc.stdout.readline().strip() == b"ready", "a worker did not start"
    now = time.time()
    line = json.dumps({key: now + offset for key, offset in times.items()}).encode() + b"\n"
    for proc in procs:
        proc.stdin.write(line)
        proc.stdin.flush()


def _run_all(role, url, env, count=WORKERS, start_in=0.2, run_for=None, **params):
    """Run ``count`` workers of ``role`` from one start (``start_in`` s after all are ready),
    until ``run_for`` s after it when given; their results."""
    procs = [_spawn(role, url, env, **params) for dummy in range(count)]
    times = {"start_at": start_in}
    if run_for is not None:
        times["end_at"] = start_in + run_for
    _start(procs, **times)
    results = []
    for proc in procs:
        out, dummy = proc.communicate(timeout=60)
        assert proc.returncode == 0, "worker %s failed" % role
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    return results


def test_counters_are_exact_across_processes(store, store_url, child_env):
    _run_all("count", store_url, child_env, name="mp:count", n=50)
    snap = _breaker(store, {"name": "mp:count"}).snapshot()
    assert (snap["failures_total"], snap["successes_total"]) == (WORKERS * 50, WORKERS * 50)
    assert snap["state"] == "closed"

    _breaker(store, {"name": "mp:count"}).force_open()
    results = _run_all("reject", store_url, child_env, name="mp:count", n=25)
    assert [r["refused"] for r in results] == [25] * WORKERS
    snap = _breaker(store, {"name": "mp:count"}).snapshot()
    assert snap["rejected_total"] == WORKERS * 25
    assert snap["failures_total"] == WORKERS * 50


def test_half_open_admits_at_most_max_probes_at_once(store, store_url, child_env):
    params = {"name": "mp:probe", "reset": 0.05, "max_probes": 2}
    _breaker(store, params).force_open()
    time.sleep(0.1)
    results = _run_all("probe", store_url, child_env, run_for=3, hold=0.15, **params)
    tracked = store.get("test", "inflight")
    assert tracked["now"] == 0
    assert tracked["max"] == 2, tracked
    assert sum(r["probes"] for r in results) >= 10
    snap = _breaker(store, params).snapshot()
    assert (snap["state"], snap["probes_in_flight"]) == ("half_open", 0)


def test_killed_probe_frees_its_slot_when_the_lease_ends(store, store_url, child_env):
    # The lease is long enough for 4 fresh processes to start on a loaded 2-core machine; the
    # rejecting workers start at once, and the test checks they ran before the lease ended.
    params = {"name": "mp:crash", "reset": 0.05, "lease": 10.0}
    breaker = _breaker(store, params)
    breaker.force_open()
    time.sleep(0.1)
    taken_after = breaker.store.now()
    proc = _spawn("hold_probe", store_url, child_env, **params)
    _start([proc])
    assert json.loads(proc.stdout.readline())["probe"]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()
    leased_until = breaker.store.get("breaker", "mp:crash")["probes"]
    leased_until = max(leased_until.values())
    assert taken_after + 10.0 <= leased_until <= breaker.store.now() + 10.0
    results = _run_all("reject", store_url, child_env, count=4, start_in=0, n=5, **params)
    assert breaker.store.now() < leased_until, "the workers outlived the lease: rerun"
    assert [r["refused"] for r in results] == [5] * 4  # the dead probe still holds the slot
    time.sleep(max(0.0, leased_until - breaker.store.now()) + 0.05)
    assert breaker.snapshot()["probes_in_flight"] == 0
    breaker.on_success(breaker.before_call())
    assert breaker.snapshot()["state"] == "closed"


def test_no_one_second_window_admits_more_than_rate_plus_burst(store_url, child_env):
    qps, burst, seconds = 10, 5, 3
    results = _run_all("rate", store_url, child_env, run_for=seconds, name="mp:rate", qps=qps,
                       burst=burst)
    spans = sorted(tuple(span) for r in results for span in r["spans"])
    assert len(spans) >= qps * (seconds - 1) + burst  # the limiter does let calls through
    # the calls certainly admitted inside one second: both ends of their span in it
    worst = max(sum(1 for span in spans[i:] if span[1] < spans[i][0] + 1.0)
                for i in range(len(spans)))
    assert worst <= qps + burst, worst


if __name__ == "__main__":
    _role, _url, _params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    _store = open_store(_url)
    print("ready", flush=True)
    _params.update(json.loads(sys.stdin.readline()))
    print(json.dumps(globals()["role_" + _role](_store, _params)), flush=True)
