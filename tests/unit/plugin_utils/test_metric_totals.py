"""Call totals added up in a real SQLite state store, by runs that end at the same time."""
import multiprocessing

from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import CallStats, summary
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.plugin_utils._metric_totals import add_run, coverage_of

PROCESSES = 4
RUNS = 5


def _run(calls, seconds=0.2):
    """A playbook's ``resilience`` totals: ``calls`` describe calls to libvirt:hv1, one failed."""
    stats = CallStats("libvirt:hv1")
    for index in range(calls):
        stats.on_call()
        stats.on_attempt()
        stats.on_call_end("describe", "Unavailable" if index == 0 else "ok", seconds, 10.0)
    stats.on_transition("closed", "open")
    return summary([stats])


def _runs(url, calls):
    store = open_store(url)
    for _dummy in range(RUNS):
        add_run(store, _run(calls), {})
    store.close()


def test_runs_of_many_processes_all_count(tmp_path):
    url = "sqlite://%s" % (tmp_path / "state.db")
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_runs, args=(url, calls)) for calls in range(1, PROCESSES + 1)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    made = RUNS * sum(range(1, PROCESSES + 1))  # the calls every process made, in all its runs
    store = open_store(url)
    totals, coverage = add_run(store, _run(1), {"team": {"vms_requiring": 4, "vms_covered": 4,
                                                         "coverage_ratio": 1.0}})
    entry = totals["libvirt:hv1"]
    assert entry["calls"] == entry["attempts"] == made + 1
    describe = entry["operations"]["describe"]
    assert describe["outcomes"] == {"Unavailable": PROCESSES * RUNS + 1, "ok": made - PROCESSES * RUNS}
    assert sum(describe["buckets"]) == made + 1
    assert abs(describe["seconds"] - 0.2 * (made + 1)) < 0.01
    assert entry["transitions"] == []  # the breaker's own record counts those
    assert coverage == {"team": {"vms_requiring": 4, "vms_covered": 4, "coverage_ratio": 1.0}}
    # a later run's coverage replaces the earlier one
    _totals, coverage = add_run(store, {}, {"team": {"vms_requiring": 5, "vms_covered": 4,
                                                     "coverage_ratio": 0.8}})
    assert coverage["team"]["coverage_ratio"] == 0.8
    store.close()


def test_coverage_needs_every_figure():
    assert coverage_of({"vms_requiring": 2, "vms_covered": 1, "coverage_ratio": 0.5, "x": 1}) == {
        "vms_requiring": 2, "vms_covered": 1, "coverage_ratio": 0.5}
    assert coverage_of({"vms_requiring": 2, "vms_covered": 1}) is None
    assert coverage_of({"vms_requiring": 2, "vms_covered": True, "coverage_ratio": 1}) is None
    assert coverage_of("hidden") is None
