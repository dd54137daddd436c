"""What the resilience_summary callback's metrics and traces cost a task, against the same task
without them, measured in one run.

Five cases, each an ansible-playbook of in-process ``vm_info`` tasks describing one VM on
libvirt's test driver (``test:///default``, inside the client: the provider itself costs little,
so the observability's share is as large as it gets), ``-f 1``, local connection, a SQLite state
store of the case's own:

* ``off``: the callback is not enabled (no observability);
* ``summary``: the callback enabled, neither metrics nor traces (its printed table only);
* ``metrics``: ``metrics_file`` set: the run's totals added in the store and the file written at
  the end of the playbook;
* ``metrics_recorded``: metrics, and every call recorded by its task (``RESILIENT_VIRT_RECORD_SPANS``
  set as the ``traces`` option sets it) but no traces sent: what traces cost while the tasks run;
* ``metrics_traces``: metrics and ``traces``: every call recorded by its task and sent at the end
  as a span, over OTLP/HTTP, to a sink of the bench's own (it answers 200 to every POST and
  counts the spans' bytes; a real collector's own work is not measured). Its CPU above
  ``metrics_recorded`` is what building and sending the spans at the end costs, per task.

Every case runs as a playbook of ``--short`` and of ``--long`` tasks, ``--repeats`` times, cases
interleaved, the median kept. **Per task** (marginal): (long - short) / (long - short tasks), in
wall time and in CPU time (user + system of ansible-playbook and every process it waited for,
which moves far less than the wall time when other programs load the machine). A case's **cost
per task** is its per task figure minus ``off``'s, and its **ratio** its per task figure over
``off``'s. The **one-time** cost of a case is what its short playbook takes above ``off``'s beyond
that per task cost (the OpenTelemetry SDK imported at the start, the store read, the file written
and the spans sent at the end).

Target: metrics and traces together cost under 2 ms of CPU per task.

    python3 bench/bench_observability.py [--quick] [--short N] [--long N] [--repeats N] [--json PATH]
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench_tasks import BenchError, Runner, print_targets, run_and_report

CASES = ("off", "summary", "metrics", "metrics_recorded", "metrics_traces")
CALLBACK = "resilient.virt.resilience_summary"
TARGET_MS = 2.0  # metrics and traces: CPU per task above off's


class Sink:
    """An OTLP/HTTP endpoint that accepts every export (200) and counts requests and bytes."""

    def __init__(self):
        self.requests = 0
        self.bytes = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                sink.requests += 1
                sink.bytes += len(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _env(case, workdir, sink):
    store = "sqlite://%s" % os.path.join(workdir, case + ".db")
    env = {"RESILIENT_VIRT_STATE_STORE": store}
    if case == "off":
        return env
    env.update(ANSIBLE_CALLBACKS_ENABLED=CALLBACK, RESILIENT_VIRT_STATE_STORE=store)
    if case in ("metrics", "metrics_recorded", "metrics_traces"):
        env["RESILIENT_VIRT_SUMMARY_METRICS_FILE"] = os.path.join(workdir, case + ".prom")
    if case == "metrics_recorded":
        env["RESILIENT_VIRT_RECORD_SPANS"] = "true"
    if case == "metrics_traces":
        env.update(RESILIENT_VIRT_SUMMARY_TRACES="true", OTEL_EXPORTER_OTLP_ENDPOINT=sink.endpoint,
                   OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/protobuf")
    return env


def _tasks(count):
    provider = {"type": "libvirt", "name": "bench-obs", "uri": "test:///default"}
    return [{"name": "describe %d" % n, "resilient.virt.vm_info": {"provider": provider, "name": "test"}}
            for n in range(count)]


def run(args):
    with tempfile.TemporaryDirectory(prefix="bench-observability-") as workdir:
        return _measure(args, workdir)


def _measure(args, workdir):
    runner = Runner(workdir)
    playbooks = dict((size, runner.write("describe-%d" % size, _tasks(size))) for size in (args.short, args.long))
    sink = Sink()
    samples = dict(((case, size), {"wall": [], "cpu": []}) for case in CASES for size in playbooks)
    try:
        for _round in range(args.repeats):
            for size, path in playbooks.items():
                for case in CASES:
                    wall, cpu, recap = runner.run(path, env=_env(case, workdir, sink))
                    if recap.get("ok") != size:
                        raise BenchError("%s with %d tasks: %s tasks ok" % (case, size, recap.get("ok")))
                    samples[(case, size)]["wall"].append(wall)
                    samples[(case, size)]["cpu"].append(cpu)
    finally:
        sink.stop()
    if not sink.requests or not os.path.exists(os.path.join(workdir, "metrics_traces.prom")):
        raise BenchError("the metrics_traces case sent no spans or wrote no metrics file")
    median = dict((key, dict((kind, statistics.median(values)) for kind, values in kinds.items()))
                  for key, kinds in samples.items())
    tasks = args.long - args.short
    rows = []
    for case in CASES:
        row = {"case": case}
        for kind in ("wall", "cpu"):
            per_task = (median[(case, args.long)][kind] - median[(case, args.short)][kind]) / tasks
            off = (median[("off", args.long)][kind] - median[("off", args.short)][kind]) / tasks
            row[kind + "_per_task_ms"] = round(per_task * 1000, 3)
            row[kind + "_cost_per_task_ms"] = round((per_task - off) * 1000, 3)
            row[kind + "_ratio"] = round(per_task / off, 3) if off > 0 else None
            row[kind + "_one_time_s"] = round(median[(case, args.short)][kind] - median[("off", args.short)][kind]
                                              - args.short * (per_task - off), 3)
        rows.append(row)
    traced = rows[CASES.index("metrics_traces")]
    return {"short": args.short, "long": args.long, "repeats": args.repeats, "rows": rows,
            "export_bytes_per_request": round(sink.bytes / max(1, sink.requests)),
            "targets": [{"name": "metrics and traces: CPU per task above off's",
                         "measured": "%.3f ms" % traced["cpu_cost_per_task_ms"],
                         "target": "< %g ms" % TARGET_MS,
                         "passed": traced["cpu_cost_per_task_ms"] < TARGET_MS}]}


def print_report(result):
    print("vm_info describing one VM of libvirt's test driver, in-process, per task = (%d-task "
          "playbook - %d-task playbook) / %d, median of %d runs, cases interleaved"
          % (result["long"], result["short"], result["long"] - result["short"], result["repeats"]))
    print("\n| case | wall per task | CPU per task | wall above off | CPU above off | wall ratio "
          "to off | CPU ratio to off | one-time wall | one-time CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in result["rows"]:
        print("| %s | %.3f ms | %.3f ms | %+.3f ms | %+.3f ms | %.3fx | %.3fx | %+.3f s | %+.3f s |" % (
            row["case"], row["wall_per_task_ms"], row["cpu_per_task_ms"], row["wall_cost_per_task_ms"],
            row["cpu_cost_per_task_ms"], row["wall_ratio"] or 0, row["cpu_ratio"] or 0,
            row["wall_one_time_s"], row["cpu_one_time_s"]))
    print("\nOTLP export of the metrics_traces case: %d bytes per request, on average over its runs "
          "of %d and %d tasks" % (result["export_bytes_per_request"], result["short"], result["long"]))
    print_targets(result["targets"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer tasks and runs")
    parser.add_argument("--short", type=int, help="tasks of the short playbook (default 5)")
    parser.add_argument("--long", type=int, help="tasks of the long playbook (default 125, quick 45)")
    parser.add_argument("--repeats", type=int, help="runs per case and size (default 5, quick 3)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    args.short = args.short or 5
    args.long = args.long or (45 if args.quick else 125)
    args.repeats = args.repeats or (3 if args.quick else 5)
    if args.long <= args.short:
        parser.error("--long must be above --short")
    return run_and_report("bench_observability", run, print_report, args)


if __name__ == "__main__":
    sys.exit(main())
