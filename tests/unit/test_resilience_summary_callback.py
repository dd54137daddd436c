"""The resilience_summary callback's adding up, fed results as Ansible hands them over."""
from ansible_collections.resilient.virt.plugins.callback.resilience_summary import CallbackModule, table


class _Result:
    """What a callback receives: the task result dict in ``_result``."""

    def __init__(self, data):
        self._result = data


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
