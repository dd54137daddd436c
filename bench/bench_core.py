"""Benchmark of the resilience core: cost of a guarded call and of importing the core.

Times per call (median and p95 over many calls, after a warm-up):

* ``Policy.call`` of a trivial function with circuit breaker and rate limiter (a rate so high
  that it never waits), on the SQLite store, on a private redis-server, through Redis Sentinel
  (a primary, a replica and three Sentinels) and on a three-primary Redis Cluster;
* a bare breaker (``before_call`` + ``on_success``) and a bare limiter (``acquire``);
* one ``StateStore.update``, the unit the above are made of.

Failover through Sentinel (``--failover-rounds``): a loop of guarded calls (``Policy.call``,
which fails while the store is away; a failed call opens the store again, as the next task
would) while the primary is SIGKILLed; the time from the kill to the first call that
succeeds on the new primary, and the calls that failed meanwhile. The Sentinels declare a
primary down after 1 s without an answer (``down-after-milliseconds 1000``).

Import time of the resilience core alone: in fresh interpreters, what importing its modules adds
after ``ansible.module_utils.basic`` (median of ``--runs``), every module compiled from source
as in an AnsiballZ payload (nothing read from or written to ``__pycache__``). It is a part of a
module's code path, shown to follow the core's own weight; what a task pays for its whole code
path (this collection and the libraries it loads) is measured, with its target, by
``bench_tasks.py`` on the real module processes.

    python3 bench/bench_core.py [--calls N] [--runs N] [--failover-rounds N] [--json PATH]

Prints a markdown table with targets and pass/fail; exits 1 when a target is missed.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from checkout import COLLECTIONS, ROOT, use_checkout
REDIS_SERVER = "/usr/bin/redis-server"
CORE = ("errors", "_resilience.settings", "_state.store", "_resilience.breaker",
        "_resilience.rate_limit", "_resilience.retry", "_resilience.deadline", "_resilience.policy",
        "_conditions")
TARGET_CALL_MS = 0.5


use_checkout()
sys.path.insert(0, os.path.join(ROOT, "tests"))  # the tests' Sentinel and Cluster setups

from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (  # noqa: E402
    CircuitBreaker)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (  # noqa: E402
    resolve_settings)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy  # noqa: E402
from ansible_collections.resilient.virt.plugins.module_utils._resilience.rate_limit import (  # noqa: E402
    RateLimiter)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import (  # noqa: E402
    open_store)


def _percentiles(samples):
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def time_calls(fn, calls):
    """(median, p95) in milliseconds of ``fn()`` over ``calls`` calls after a warm-up."""
    for _dummy in range(max(50, calls // 10)):
        fn()
    samples = []
    clock = time.perf_counter
    for _dummy in range(calls):
        started = clock()
        fn()
        samples.append((clock() - started) * 1000.0)
    return _percentiles(samples)


def _store_cases(store):
    settings = resolve_settings({"rate_limit_qps": 1e6, "rate_limit_burst": 1000000},
                                environ={})
    policy = Policy(store, "bench:policy", settings)
    breaker = CircuitBreaker(store, "bench:breaker")
    limiter = RateLimiter(store, "bench:limiter", qps=1e6, burst=1000000)

    def trivial():
        return 1

    def guarded():
        policy.call(trivial)

    def bare_breaker():
        breaker.on_success(breaker.before_call())

    def store_update():
        store.update("bench", "counter", lambda cur, now: ({"n": (cur or {"n": 0})["n"] + 1}, None))

    return [("guarded call (Policy.call: rate limit + breaker)", guarded),
            ("bare breaker (before_call + on_success)", bare_breaker),
            ("bare limiter (acquire)", limiter.acquire),
            ("one StateStore.update", store_update)]


class _Redis:
    """A private redis-server on a free loopback port, without persistence."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="bench-redis-")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.dir,
             "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.url = "redis://127.0.0.1:%d/0" % self.port
        for _dummy in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def measure_failover(rounds):
    """Per round: seconds from SIGKILL of the Sentinel primary to the first guarded call that
    succeeds, and the calls that failed meanwhile (see the module docstring)."""
    from ansible_collections.resilient.virt.plugins.module_utils.errors import VirtError
    from redis_topologies import SentinelSetup

    settings = resolve_settings({"rate_limit_qps": 1e6, "rate_limit_burst": 1000000}, environ={})
    setup = SentinelSetup()
    results = []
    try:
        url = setup.url()
        for _dummy in range(rounds):
            policy = Policy(open_store(url), "bench:failover", settings)
            for _dummy_call in range(50):
                policy.call(lambda: 1)
            killed_port = setup.kill_primary()
            killed = time.monotonic()
            failed = 0
            while True:
                try:
                    Policy(open_store(url), "bench:failover", settings).call(lambda: 1)
                    break
                except VirtError:
                    failed += 1
                    time.sleep(0.01)
            results.append({"seconds": time.monotonic() - killed, "failed_calls": failed})
            setup.wait_failover(killed_port)
            setup.restart(killed_port)
            time.sleep(1.0)  # the old primary, now a replica, is seen by the Sentinels again
    finally:
        setup.stop()
    return results


_IMPORT_PROBE = """
import sys, time
sys.path.insert(0, %r)
t0 = time.perf_counter()
import ansible.module_utils.basic
t1 = time.perf_counter()
for name in %r:
    __import__("ansible_collections.resilient.virt.plugins.module_utils." + name)
t2 = time.perf_counter()
print((t1 - t0) * 1000.0, (t2 - t1) * 1000.0)
"""


def measure_import(runs):
    """Medians (ms) over fresh interpreters: import of basic, then what the core adds."""
    code = _IMPORT_PROBE % (COLLECTIONS, CORE)
    basic, core = [], []
    empty = tempfile.mkdtemp(prefix="bench-pyc-")  # no cached bytecode: compiled like AnsiballZ
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=empty)
    for _dummy in range(runs):
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True, env=env)
        b, c = (float(x) for x in out.stdout.split())
        basic.append(b)
        core.append(c)
    os.rmdir(empty)
    return _percentiles(basic), _percentiles(core)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--calls", type=int, default=3000, help="timed calls per case")
    parser.add_argument("--runs", type=int, default=15, help="fresh interpreters for imports")
    parser.add_argument("--failover-rounds", type=int, default=3,
                        help="Sentinel failovers timed (0: none)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()

    rows = []
    workdir = tempfile.mkdtemp(prefix="bench-core-")
    redis = None
    setups = []
    failover = []
    try:
        stores = [("SQLite", "sqlite://" + os.path.join(workdir, "state.db"))]
        if os.access(REDIS_SERVER, os.X_OK):
            from redis_topologies import ClusterSetup, SentinelSetup

            redis = _Redis()
            setups = [SentinelSetup(), ClusterSetup()]
            stores += [("Redis", redis.url), ("Redis Sentinel", setups[0].url()),
                       ("Redis Cluster", setups[1].url())]
        else:
            rows.append({"case": "Redis store", "note": "redis-server not installed: skipped"})
        for label, url in stores:
            store = open_store(url)
            try:
                for name, fn in _store_cases(store):
                    median, p95 = time_calls(fn, args.calls)
                    target = TARGET_CALL_MS if label == "SQLite" and name.startswith(
                        "guarded") else None
                    rows.append({"case": "%s, %s" % (name, label), "median_ms": median,
                                 "p95_ms": p95, "target_ms": target})
            finally:
                store.close()
        for setup in setups:
            setup.stop()
        setups = []
        if redis is not None and args.failover_rounds:
            failover = measure_failover(args.failover_rounds)
    finally:
        if redis is not None:
            redis.stop()
        for setup in setups:
            setup.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if failover:
        seconds = [r["seconds"] for r in failover]
        rows.append({"case": "guarded calls lost to a Sentinel failover: SIGKILL of the primary to "
                             "the first successful call (%d rounds: %s s; %s failed calls)" % (
                                 len(failover), ", ".join("%.2f" % x for x in seconds),
                                 ", ".join(str(r["failed_calls"]) for r in failover)),
                     "median_ms": _percentiles(seconds)[0] * 1000.0,
                     "p95_ms": _percentiles(seconds)[1] * 1000.0, "target_ms": None})

    (basic, basic_p95), (core, core_p95) = measure_import(args.runs)
    rows.append({"case": "import ansible.module_utils.basic (reference)", "median_ms": basic,
                 "p95_ms": basic_p95, "target_ms": None})
    rows.append({"case": "import of the resilience core alone over ansible.module_utils.basic "
                         "(%d modules; the whole code path is in the tasks bench)" % len(CORE),
                 "median_ms": core, "p95_ms": core_p95, "target_ms": None})

    failed = False
    print("| case | median | p95 | target | result |")
    print("|---|---:|---:|---:|---|")
    for row in rows:
        if "note" in row:
            print("| %s | | | | %s |" % (row["case"], row["note"]))
            continue
        target = row["target_ms"]
        row["passed"] = None if target is None else row["median_ms"] < target
        failed = failed or row["passed"] is False
        print("| %s | %.3f ms | %.3f ms | %s | %s |" % (
            row["case"], row["median_ms"], row["p95_ms"],
            "< %g ms" % target if target is not None else "",
            {None: "", True: "pass", False: "FAIL"}[row["passed"]]))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"rows": rows, "calls": args.calls, "import_runs": args.runs,
                       "core_modules": list(CORE), "failover": failover}, handle, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
