"""The provider calls' spans as an OTLP endpoint receives them from a real ansible-playbook.

One run with the resilience_summary callback's traces on and community.general.opentelemetry
enabled too, both sending over OTLP/HTTP to the test's own receiver (``otlp_receiver.py``: a
receiver that decodes the protobuf requests, not an OpenTelemetry Collector), with a TRACEPARENT
of the test's. The play describes a VM on libvirt's test driver (``test:///default``, inside the
client) as a module process, then, in the worker, three VMs on a hypervisor nobody serves (a
TCP port nothing listens on, as a stopped libvirtd looks to a client) whose URI carries a
password: the first call is retried and opens the breaker, which refuses the next two.

The oracle is the test's own: the task results (each item's error type and attempts), the
retry settings, the TRACEPARENT, and the attribute names a span may carry; the spans must be
in one trace with community.general.opentelemetry's, under the run's span, with their events in
order and no secret, URL or argument anywhere in what the callback sent.
"""
import os

from otlp_receiver import Receiver
from playbook_runner import play, run_playbook

SCOPE = "resilient.virt"
RUN_SPAN = "resilient.virt provider calls"
SECRET = "Tr4ceS3cretPw"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
BASE_DELAY = 0.2
RESILIENCE = {"max_attempts": 2, "base_delay": "%gs" % BASE_DELAY, "failure_threshold": 2,
              "reset_timeout": "10m"}
DEAD_URI = "qemu+tcp://admin:%s@127.0.0.1:1/system" % SECRET
ITEMS = 3
# every attribute a call span may carry: the task's, the provider's, the call's counts
CALL_ATTRIBUTES = {
    "ansible.task.uuid", "ansible.task.name", "ansible.task.host.name", "ansible.task.module",
    "resilient_virt.provider.type", "resilient_virt.provider.name", "resilient_virt.operation",
    "resilient_virt.outcome", "resilient_virt.breaker.refused", "resilient_virt.attempts",
    "resilient_virt.retries", "resilient_virt.retry_wait_seconds", "resilient_virt.rate_limit_waits",
    "resilient_virt.rate_limit_wait_seconds", "resilient_virt.attempt_timeout_seconds"}
STATUS_OK, STATUS_ERROR = 1, 2  # opentelemetry.proto.trace.v1.Status.StatusCode


def _tasks(tmp_path):
    return [
        {"name": "healthy", "resilient.virt.vm_info": {
            "provider": {"type": "libvirt", "name": "otel-ok", "uri": "test:///default"},
            "name": "test", "in_process": False}},
        {"name": "dead", "resilient.virt.vm_info": {
            "provider": {"type": "libvirt", "name": "otel-dead", "uri": DEAD_URI},
            "name": "vm-{{ item }}", "resilience": RESILIENCE},
         "loop": list(range(ITEMS)), "ignore_errors": True},
    ]


def _events(span):
    return [(name, dict((key.split(".", 1)[1], value) for key, value in attributes.items()))
            for name, _time, attributes in span.events()]


def test_each_call_is_a_span_in_the_trace_of_the_play(tmp_path):
    receiver = Receiver()
    try:
        env = {
            "ANSIBLE_CALLBACKS_ENABLED": "resilient.virt.resilience_summary,community.general.opentelemetry",
            "RESILIENT_VIRT_SUMMARY_TRACES": "true",
            "RESILIENT_VIRT_STATE_STORE": "sqlite://%s" % (tmp_path / "state.db"),
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "ANSIBLE_OPENTELEMETRY_HIDE_TASK_ARGUMENTS": "true",
            "TRACEPARENT": "00-%s-%s-01" % (TRACE_ID, PARENT_ID),
        }
        run = run_playbook(tmp_path, [play(_tasks(tmp_path))], env=env, name="traced",
                           shown_with="ansible.builtin.minimal")
    finally:
        receiver.stop()
    assert run.rc == 0, run.describe()

    # the test's own oracle: what each call ended with, from the task results
    healthy = run.task("healthy")
    assert not healthy.get("failed"), healthy.result
    items = run.task("dead").items
    assert [item["error"]["type"] for item in items] == ["Unavailable"] + ["BreakerOpen"] * (ITEMS - 1)
    assert items[0]["error"]["details"]["attempts"] == RESILIENCE["max_attempts"]

    ours = [span for span in receiver.spans if span.scope == SCOPE]
    theirs = [span for span in receiver.spans if span.scope != SCOPE]
    [run_span] = [span for span in ours if span.name == RUN_SPAN]
    calls = sorted((span for span in ours if span.name != RUN_SPAN), key=lambda s: s.span.start_time_unix_nano)
    assert len(calls) == 1 + ITEMS

    # one trace: the TRACEPARENT's, community.general.opentelemetry's playbook span and ours
    # are both children of its span; every call is a child of the run's span
    assert {span.trace_id for span in receiver.spans} == {TRACE_ID}
    assert run_span.parent_id == PARENT_ID
    [playbook_span] = [span for span in theirs if span.name == "traced.yml"]
    assert playbook_span.parent_id == PARENT_ID
    assert {span.parent_id for span in calls} == {run_span.span_id}
    assert all(run_span.span.start_time_unix_nano <= span.span.start_time_unix_nano <=
               span.span.end_time_unix_nano <= run_span.span.end_time_unix_nano for span in calls)
    # each call names its task as community.general.opentelemetry's task span does
    task_spans = dict((span.name, span) for span in theirs if span is not playbook_span)
    for call, task in zip(calls, ["healthy"] + ["dead"] * ITEMS):
        assert call.attributes["ansible.task.name"] == task_spans[task].attributes["ansible.task.name"]
        assert call.attributes["ansible.task.host.name"] == "localhost"
    assert len({call.attributes["ansible.task.uuid"] for call in calls[1:]}) == 1

    ok, first, *refused = calls
    assert ok.name == "describe libvirt:otel-ok" and ok.span.status.code == STATUS_OK
    assert (ok.attributes["resilient_virt.outcome"], ok.attributes["resilient_virt.attempts"]) == ("ok", 1)
    assert [name for name, _attrs in _events(ok)] == ["attempt"]

    assert first.name == "describe libvirt:otel-dead" and first.span.status.code == STATUS_ERROR
    assert (first.attributes["resilient_virt.outcome"], first.attributes["error.type"]) == ("Unavailable",) * 2
    assert (first.attributes["resilient_virt.attempts"], first.attributes["resilient_virt.retries"]) == (2, 1)
    assert first.attributes["resilient_virt.breaker.state"] == "open"
    assert BASE_DELAY <= first.attributes["resilient_virt.retry_wait_seconds"] <= BASE_DELAY * 1.1 + 0.001
    assert _events(first) == [
        ("attempt", {"number": 1, "outcome": "error", "error_type": "Unavailable",
                     "duration_seconds": _events(first)[0][1]["duration_seconds"]}),
        ("retry", {"after_attempt": 1, "error_type": "Unavailable",
                   "delay_seconds": first.attributes["resilient_virt.retry_wait_seconds"]}),
        ("breaker_transition", {"from": "closed", "to": "open"}),
        ("attempt", {"number": 2, "outcome": "error", "error_type": "Unavailable",
                     "duration_seconds": _events(first)[3][1]["duration_seconds"]})]
    times = [first.span.start_time_unix_nano] + [t for _name, t, _attrs in first.events()] + \
        [first.span.end_time_unix_nano]
    assert times == sorted(times)
    for span in refused:
        assert span.span.status.code == STATUS_ERROR
        assert (span.attributes["resilient_virt.outcome"], span.attributes["resilient_virt.attempts"],
                span.attributes["resilient_virt.breaker.refused"]) == ("BreakerOpen", 0, True)
        assert _events(span) == [("breaker_refused", {"state": "open"})]

    # nothing but the attributes above; no secret, URL or argument in what the callback sent
    for call in calls:
        assert set(call.attributes) - CALL_ATTRIBUTES <= {"resilient_virt.breaker.state", "error.type"}
    sent = b"".join(span.span.SerializeToString() for span in ours)
    for forbidden in (SECRET, "qemu+tcp", "127.0.0.1:1", "vm-0", "test:///default"):
        assert forbidden.encode() not in sent, forbidden
    assert SECRET not in run.output and all(SECRET.encode() not in body for body in receiver.bodies)
    assert os.path.basename(run_span.attributes["ansible.playbook"]) == "traced.yml"


# an action of the test's own, run in the worker Ansible forks for its task: which OpenTelemetry
# SDK modules that worker holds, that is, what the controller had imported when it forked it
SDK_PROBE = '''
import sys
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        return {"sdk_modules": sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk"))}
'''


def test_the_tasks_run_in_workers_forked_before_the_sdk_is_imported(tmp_path):
    (tmp_path / "action_plugins").mkdir()
    (tmp_path / "action_plugins" / "sdk_probe.py").write_text(SDK_PROBE)
    receiver = Receiver()
    try:
        env = {"ANSIBLE_CALLBACKS_ENABLED": "resilient.virt.resilience_summary",
               "RESILIENT_VIRT_SUMMARY_TRACES": "true",
               "RESILIENT_VIRT_STATE_STORE": "sqlite://%s" % (tmp_path / "state.db"),
               "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        provider = {"type": "libvirt", "name": "otel-ok", "uri": "test:///default"}
        tasks = [{"name": "healthy", "resilient.virt.vm_info": {"provider": provider, "name": "test"}},
                 {"name": "probe", "sdk_probe": {}}]
        run = run_playbook(tmp_path, [play(tasks)], env=env, name="probed",
                           shown_with="ansible.builtin.minimal")
    finally:
        receiver.stop()
    assert run.rc == 0, run.describe()
    # at most the package found by the check at the start (empty), none of its modules
    assert set(run.task("probe")["sdk_modules"]) <= {"opentelemetry.sdk"}, run.task("probe").result
    # and the spans are sent all the same, the SDK imported at the end
    assert sorted(span.name for span in receiver.spans if span.scope == SCOPE) == sorted(
        ["describe libvirt:otel-ok", RUN_SPAN])
