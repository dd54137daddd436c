"""The resilience_summary callback's adding up, fed results as Ansible hands them over."""
import sys

from ansible_collections.resilient.virt.plugins.callback.resilience_summary import CallbackModule, table


class _Task:
    def __init__(self, action, check_mode):
        self.resolved_action = action
        self.check_mode = check_mode


class _Result:
    """What a callback receives: the task result dict in ``_result``, the task in ``_task``."""

    def __init__(self, data, action="resilient.virt.vm_info", check_mode=False):
        self._result = data
        self._task = _Task(action, check_mode)


class _Display:
    """Keeps what the callback would show."""

    verbosity = 0

    def __init__(self):
        self.warnings = []
        self.lines = []

    def warning(self, text):
        self.warnings.append(text)

    def display(self, text):
        self.lines.append(text)

    def banner(self, text):
        self.lines.append(text)


def _entry(**counts):
    entry = {"calls": 0, "attempts": 0, "retries": 0, "backoff_seconds": 0.0, "rate_limit_waits": 0,
             "rate_limit_seconds": 0.0, "failures": 0, "refused": 0, "failed_calls": 0, "transitions": []}
    entry.update(counts)
    return entry


def test_tasks_loop_items_and_failures_add_up():
    callback = CallbackModule()
    callback.v2_runner_on_ok(_Result({"resilience": {"libvirt:hv1": _entry(calls=1, attempts=1)},
                                      "ansible_facts": {"resilient_virt_breakers": {
                                          "libvirt:hv1": {"state": "closed"}}}}))
    callback.v2_runner_on_failed(_Result({"failed": True, "results": [
        {"resilience": {"libvirt:hv1": _entry(calls=1, attempts=2, retries=1, backoff_seconds=0.5, failures=2,
                                              failed_calls=1,
                                              transitions=[{"from": "closed", "to": "open", "count": 1}])}},
        {"resilience": {"libvirt:hv1": _entry(calls=1, refused=1, failed_calls=1)}},
        {"skipped": True},
    ]}), ignore_errors=True)
    callback.v2_runner_on_ok(_Result({"resilience": {}, "ansible_facts": {"resilient_virt_breakers": {
        "libvirt:hv1": {"state": "open"}, "libvirt:other": {"state": "closed"}}}}))
    total = callback.totals["libvirt:hv1"]
    assert (total["tasks"], total["calls"], total["attempts"], total["retries"], total["failures"],
            total["refused"], total["failed_calls"]) == (3, 3, 3, 1, 2, 1, 2)
    assert total["backoff_seconds"] == 0.5 and total["state"] == "open"
    assert set(callback.totals) == {"libvirt:hv1"}  # a breaker only published is not a row
    header, row = table(callback.totals)
    assert header.split()[0] == "provider" and header.split()[-1] == "transitions"
    assert row.split()[:4] == ["libvirt:hv1", "3", "3", "3"] and row.endswith("open  closed->open x1")


def test_a_result_something_else_changed_counts_nothing():
    callback = CallbackModule()
    callback.v2_runner_on_ok(_Result({"resilience": "hidden"}))
    callback.v2_runner_on_ok(_Result({"censored": "the output has been hidden"}))
    callback.v2_runner_on_ok(_Result({"resilience": {"libvirt:hv1": {"calls": "x", "transitions": [None]}}}))
    assert callback.totals["libvirt:hv1"]["calls"] == 0 and table({}) == [table({})[0]]


def _failover(creator, ratio, **task):
    return _Result({"summary": {"vms_requiring": 4, "vms_covered": int(4 * ratio), "coverage_ratio": ratio},
                    "invocation": {"module_args": {"creator": creator}}, "resilience": {}},
                   action=task.get("action", "resilient.virt.failover_reservation"),
                   check_mode=task.get("check_mode", False))


def test_the_last_failover_coverage_of_each_creator_is_kept():
    callback = CallbackModule()
    callback.v2_runner_on_ok(_failover("team", 0.5))
    callback.v2_runner_on_ok(_failover("team", 0.75))
    callback.v2_runner_on_ok(_failover("planned", 0.25, check_mode=True))
    callback.v2_runner_on_ok(_failover("other", 0.25, action="resilient.virt.vm_info"))
    assert callback.coverage == {"team": {"vms_requiring": 4, "vms_covered": 3, "coverage_ratio": 0.75}}


def test_without_prometheus_client_a_warning_and_no_file(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # what Python does for a missing one
    display = _Display()
    callback = CallbackModule(display=display)
    callback._plugin_options = {"metrics_file": str(tmp_path / "m.prom"), "pushgateway_url": None,
                                "pushgateway_job": "resilient_virt",
                                "state_store": "sqlite://%s" % (tmp_path / "state.db")}
    callback.v2_runner_on_ok(_Result({"resilience": {"libvirt:hv1": _entry(calls=1, attempts=1)}}))
    callback.v2_playbook_on_stats(None)
    assert len(display.warnings) == 1 and "prometheus_client" in display.warnings[0], display.warnings
    assert "pip install prometheus-client" in display.warnings[0]
    assert list(tmp_path.iterdir()) == []  # neither the file nor the store was written
