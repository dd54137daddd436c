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
interleaved (their order reversed every other round), the median kept. **Per task** (marginal):
(long - short) / (long - short tasks), in wall time and in CPU time (user + system of
ansible-playbook and every process it waited for, which moves far less than the wall time when
other programs load the machine). A case's **cost
per task** is its per task figure minus ``off``'s, and its **ratio** its per task figure over
``off``'s. The **one-time** cost of a case is what its short playbook takes above ``off``'s beyond
that per task cost (the store read, the file written, the OpenTelemetry SDK imported and the spans
sent at the end).

The playbook figures carry the noise of whole ansible-playbook runs (a few ms per task between
runs on an idle machine), so the two parts of what traces add are also measured alone, in this
process, ``--part-tasks`` tasks at a time, ``--repeats`` times, alternated with the same work
untraced, the median kept:

* **in the worker**: a task's provider calls through a ``Policy`` (memory store, default
  settings, a call that returns at once) with a ``SpanLog`` recording them and the
  ``resilience_spans`` result encoded as JSON (as the task returns it), against the same calls
  with nothing recorded; each task makes as many calls as the traced playbooks' tasks did (the
  spans the sink received per task);
* **in the controller**: what the callback does for them: the task's attributes taken from a
  real ``TaskResult`` of a ``vm_info`` task (``task_of``: its name with secrets masked), and
  at the end every recorded call built as a span and sent to the sink, per task.

Targets: each part alone, measured as above, under 2 ms of CPU per task. The playbooks' figure for
metrics and traces is printed beside them with its spread from run to run (each round's
playbooks against ``off``'s of the same round), not held to the target: that spread is larger.

    python3 bench/bench_observability.py [--quick] [--short N] [--long N] [--repeats N] [--json PATH]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench_tasks import COLLECTIONS, BenchError, Runner, print_targets, run_and_report

sys.path.insert(0, COLLECTIONS)

CASES = ("off", "summary", "metrics", "metrics_recorded", "metrics_traces")
CALLBACK = "resilient.virt.resilience_summary"
TARGET_MS = 2.0  # each part of traces: CPU per task


class Sink:
    """An OTLP/HTTP endpoint that accepts every export (200) and counts requests, bytes and
    spans."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        self.requests = 0
        self.bytes = 0
        self.spans = 0
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                sink.requests += 1
                sink.bytes += len(body)
                sink.spans += sum(len(scope.spans) for resource in request.resource_spans
                                  for scope in resource.scope_spans)
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


def _worker_part(tasks, calls, repeats):
    """CPU seconds of ``tasks`` tasks of ``calls`` provider calls each, untraced and traced
    (the medians), and the records of the last traced tasks."""
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
    from ansible_collections.resilient.virt.plugins.module_utils._resilience.spans import SpanLog
    from ansible_collections.resilient.virt.plugins.module_utils._state.memory import MemoryStore

    settings = resolve_settings({}, environ={})
    store = MemoryStore("bench-observability")
    samples = {False: [], True: []}
    results = []
    for _round in range(repeats):
        for traced in (False, True):
            results = []
            began = time.process_time()
            for _task in range(tasks):
                spans = SpanLog() if traced else None
                policy = Policy(store, "libvirt:bench", settings, spans=spans)
                for _call in range(calls):
                    policy.call(lambda: None, operation="describe")
                if spans is not None:
                    results.append(json.loads(json.dumps(spans.result())))
            samples[traced].append(time.process_time() - began)
    return statistics.median(samples[False]), statistics.median(samples[True]), results


def _controller_part(results, repeats, sink):
    """CPU seconds the callback spends on the traced tasks' ``results``: their attributes from
    a real TaskResult, then their spans built and sent to ``sink`` (the median)."""
    from ansible.executor.task_result import TaskResult
    from ansible.inventory.host import Host
    from ansible.playbook.task import Task

    from ansible_collections.resilient.virt.plugins.plugin_utils._traces import export, sdk, task_of

    task = Task()  # what a play's vm_info task is once its action is resolved
    task.name, task.action = "describe", "resilient.virt.vm_info"
    task.args = {"name": "test", "provider": {"type": "libvirt", "name": "bench-obs",
                                              "uri": "test:///default", "password": "not-shown"}}
    host = Host("bench")
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.endpoint
    otel = sdk()
    samples = []
    for _round in range(repeats):
        began = time.process_time()
        calls = [(task_of(TaskResult(host, task, {}, task_fields={}), "play"), result)
                 for result in results]
        export(otel, calls)
        samples.append(time.process_time() - began)
    return statistics.median(samples)


def _parts(args, sink, calls):
    untraced, traced, results = _worker_part(args.part_tasks, calls, args.repeats)
    controller = _controller_part(results, args.repeats, sink)
    return {"tasks": args.part_tasks, "calls_per_task": calls,
            "worker_untraced_ms": round(untraced / args.part_tasks * 1000, 4),
            "worker_traced_ms": round(traced / args.part_tasks * 1000, 4),
            "worker_cost_ms": round((traced - untraced) / args.part_tasks * 1000, 4),
            "controller_cost_ms": round(controller / args.part_tasks * 1000, 4)}


def run(args):
    with tempfile.TemporaryDirectory(prefix="bench-observability-") as workdir:
        return _measure(args, workdir)


def _measure(args, workdir):
    runner = Runner(workdir)
    playbooks = dict((size, runner.write("describe-%d" % size, _tasks(size))) for size in (args.short, args.long))
    sink = Sink()
    samples = dict(((case, size), {"wall": [], "cpu": []}) for case in CASES for size in playbooks)
    try:
        for repeat in range(args.repeats):
            for size, path in playbooks.items():
                for case in CASES if repeat % 2 == 0 else CASES[::-1]:  # no case always first
                    wall, cpu, recap = runner.run(path, env=_env(case, workdir, sink))
                    if recap.get("ok") != size:
                        raise BenchError("%s with %d tasks: %s tasks ok" % (case, size, recap.get("ok")))
                    samples[(case, size)]["wall"].append(wall)
                    samples[(case, size)]["cpu"].append(cpu)
        if not sink.requests or not os.path.exists(os.path.join(workdir, "metrics_traces.prom")):
            raise BenchError("the metrics_traces case sent no spans or wrote no metrics file")
        playbook_spans, playbook_requests, playbook_bytes = sink.spans, sink.requests, sink.bytes
        runs = args.repeats * len(playbooks)  # each sends one run span above its call spans
        calls = (playbook_spans - runs) / (args.repeats * sum(playbooks))
        parts = _parts(args, sink, max(1, round(calls)))
    finally:
        sink.stop()
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
            runs = [((case_long - case_short) - (off_long - off_short)) / tasks * 1000
                    for case_long, case_short, off_long, off_short in zip(
                        samples[(case, args.long)][kind], samples[(case, args.short)][kind],
                        samples[("off", args.long)][kind], samples[("off", args.short)][kind])]
            row[kind + "_cost_range_ms"] = [round(min(runs), 3), round(max(runs), 3)]
            row[kind + "_one_time_s"] = round(median[(case, args.short)][kind] - median[("off", args.short)][kind]
                                              - args.short * (per_task - off), 3)
        rows.append(row)
    return {"short": args.short, "long": args.long, "repeats": args.repeats, "rows": rows,
            "export_bytes_per_request": round(playbook_bytes / max(1, playbook_requests)),
            "spans_per_task": round(calls, 2), "parts": parts,
            "targets": [{"name": "traces alone, in the worker: CPU per task",
                         "measured": "%.3f ms" % parts["worker_cost_ms"],
                         "target": "< %g ms" % TARGET_MS,
                         "passed": parts["worker_cost_ms"] < TARGET_MS},
                        {"name": "traces alone, in the controller: CPU per task",
                         "measured": "%.3f ms" % parts["controller_cost_ms"],
                         "target": "< %g ms" % TARGET_MS,
                         "passed": parts["controller_cost_ms"] < TARGET_MS}]}


def print_report(result):
    print("vm_info describing one VM of libvirt's test driver, in-process, per task = (%d-task "
          "playbook - %d-task playbook) / %d, median of %d runs, cases interleaved"
          % (result["long"], result["short"], result["long"] - result["short"], result["repeats"]))
    print("\n| case | wall per task | CPU per task | wall above off | CPU above off | CPU above "
          "off, run by run | wall ratio to off | CPU ratio to off | one-time wall | one-time CPU |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in result["rows"]:
        print("| %s | %.3f ms | %.3f ms | %+.3f ms | %+.3f ms | %+.3f to %+.3f ms | %.3fx | %.3fx "
              "| %+.3f s | %+.3f s |" % (
                  row["case"], row["wall_per_task_ms"], row["cpu_per_task_ms"],
                  row["wall_cost_per_task_ms"], row["cpu_cost_per_task_ms"],
                  row["cpu_cost_range_ms"][0], row["cpu_cost_range_ms"][1], row["wall_ratio"] or 0,
                  row["cpu_ratio"] or 0, row["wall_one_time_s"], row["cpu_one_time_s"]))
    print("\nThe playbooks' figures above off are not held to the target: they move between runs "
          "(run by run: each round's own playbooks against off's of the same round) by more than "
          "it; the parts below are.")
    print("\nOTLP export of the metrics_traces case: %d bytes per request, on average over its runs "
          "of %d and %d tasks; %.2f call spans per task" % (
              result["export_bytes_per_request"], result["short"], result["long"],
              result["spans_per_task"]))
    parts = result["parts"]
    print("\nTraces' two parts alone, in process, %d tasks of %d calls, CPU per task (median of %d):"
          % (parts["tasks"], parts["calls_per_task"], result["repeats"]))
    print("\n| part | untraced | traced | cost |")
    print("|---|---:|---:|---:|")
    print("| worker: calls through a Policy, result as JSON | %.4f ms | %.4f ms | %+.4f ms |" % (
        parts["worker_untraced_ms"], parts["worker_traced_ms"], parts["worker_cost_ms"]))
    print("| controller: task attributes, spans built and sent | - | - | %+.4f ms |"
          % parts["controller_cost_ms"])
    print_targets(result["targets"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer tasks and runs")
    parser.add_argument("--short", type=int, help="tasks of the short playbook (default 5)")
    parser.add_argument("--long", type=int, help="tasks of the long playbook (default 125, quick 45)")
    parser.add_argument("--repeats", type=int, help="runs per case and size (default 5, quick 3)")
    parser.add_argument("--part-tasks", type=int, default=500,
                        help="tasks of each in-process measure of the two parts (default 500)")
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
