"""The metrics text, read back with prometheus_client's parser and compared with the figures the
test put in."""
import os
import stat

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import (
    DURATION_BUCKETS, CallStats, summary)
from ansible_collections.resilient.virt.plugins.plugin_utils._metrics import (
    client, exposition, families, write_textfile)

from prometheus_samples import parse, samples, value

NASTY = 'lab "one"\\two\nthree'
BREAKERS = [
    {"name": "libvirt:hv1", "state": "open", "failures_total": 7, "opened_total": 2, "rejected_total": 11},
    {"name": "vsphere:" + NASTY, "state": "half_open", "failures_total": 0, "opened_total": 0,
     "rejected_total": 0},
    {"name": "libvirt:hv2", "state": None, "failures_total": 1, "opened_total": True, "rejected_total": 3},
]
BREAKER = "resilient_virt_circuit_breaker_"
PROMETHEUS = client()


def _text(breakers=(), totals=None, state=None):
    return exposition(PROMETHEUS, families(PROMETHEUS[1], breakers, totals, state))


def test_every_breaker_in_the_four_families_of_before():
    found = parse(_text(BREAKERS))
    assert {name: family["type"] for name, family in found.items()} == {
        BREAKER + "state": "gauge", BREAKER + "failures": "counter",
        BREAKER + "opened": "counter", BREAKER + "rejected": "counter"}
    assert all(family["help"] for family in found.values())
    state = BREAKER + "state"
    assert [value(found, state, provider="hv1", state=s) for s in ("closed", "open", "half_open")] == [0, 1, 0]
    assert value(found, state, provider_type="vsphere", provider=NASTY, state="half_open") == 1
    assert value(found, BREAKER + "failures_total", provider_type="libvirt", provider="hv1") == 7
    assert value(found, BREAKER + "opened_total", provider="hv1") == 2
    assert value(found, BREAKER + "rejected_total", provider="hv1") == 11
    assert value(found, BREAKER + "rejected_total", provider="hv2") == 3
    # a state nobody knows and a counter that is not a count give no sample
    assert not samples(found, state, provider="hv2")
    assert value(found, BREAKER + "opened_total", provider="hv2") is None


def test_nothing_known_is_an_empty_text():
    assert _text() == "" and parse("") == {}


def _calls(key, *calls):
    """The ``resilience`` entries of a task that made ``calls`` (operation, outcome, seconds)."""
    stats = CallStats(key)
    for operation, outcome, seconds in calls:
        stats.on_call()
        stats.on_attempt()
        stats.on_call_end(operation, outcome, seconds, 30.0)
    stats.on_retry(0.5)
    stats.on_rate_limit_wait(0.25)
    return summary([stats])


def test_provider_calls_by_operation_and_outcome_with_their_durations():
    made = [("describe", "ok", 0.01), ("describe", "ok", 0.3), ("describe", "Unavailable", 12.0),
            ("describe", "BreakerOpen", 0.0), ("power", "ok", 700.0)]
    found = parse(_text(totals=_calls("libvirt:hv1", *made)))
    calls = "resilient_virt_provider_calls_total"
    assert found["resilient_virt_provider_calls"]["type"] == "counter"
    for operation, outcome in {(o, r) for o, r, _s in made}:
        expected = len([1 for o, r, _s in made if (o, r) == (operation, outcome)])
        assert value(found, calls, provider_type="libvirt", provider="hv1", operation=operation,
                     outcome=outcome) == expected
    assert len(samples(found, calls)) == 4
    histogram = "resilient_virt_provider_call_duration_seconds"
    assert found[histogram]["type"] == "histogram"
    for operation in ("describe", "power"):
        durations = [s for o, _r, s in made if o == operation]
        for bound in DURATION_BUCKETS:
            assert value(found, histogram + "_bucket", operation=operation, le=str(float(bound))) == \
                len([s for s in durations if s <= bound]), (operation, bound)
        assert value(found, histogram + "_bucket", operation=operation, le="+Inf") == len(durations)
        assert value(found, histogram + "_count", operation=operation) == len(durations)
        assert value(found, histogram + "_sum", operation=operation) == pytest.approx(sum(durations))
    assert value(found, "resilient_virt_provider_operation_timeout_seconds", operation="power") == 30
    assert value(found, "resilient_virt_provider_attempts_total", provider="hv1") == len(made)
    assert value(found, "resilient_virt_provider_retries_total", provider="hv1") == 1
    assert value(found, "resilient_virt_provider_retry_backoff_seconds_total", provider="hv1") == 0.5
    assert value(found, "resilient_virt_rate_limit_waits_total", provider="hv1") == 1
    assert value(found, "resilient_virt_rate_limit_wait_seconds_total", provider="hv1") == 0.25


def test_state_gauges_by_their_labels():
    state = {"fleet_vms": {("web", "libvirt:hv1", "done"): 3, ("web", "libvirt:hv1", "error"): 1},
             "backup_records": {("libvirt:hv1", "backup", "Completed"): 4, ("libvirt:hv1", "backup", "Failed"): 1},
             "unfinished_backups": {("libvirt:hv1", "restore"): 1700000000.0},
             "reserved_capacity": {"capacity-team": (2, 8, 4096)},
             "coverage": {"capacity-team": {"vms_requiring": 4, "vms_covered": 3, "coverage_ratio": 0.75}}}
    found = parse(_text(state=state))
    assert value(found, "resilient_virt_fleet_vms", fleet="web", provider="hv1", status="done") == 3
    assert value(found, "resilient_virt_fleet_vms", fleet="web", status="error") == 1
    assert value(found, "resilient_virt_backup_records", kind="backup", phase="Completed") == 4
    assert value(found, "resilient_virt_backup_records", kind="backup", phase="Failed") == 1
    assert value(found, "resilient_virt_backup_oldest_unfinished_created_timestamp_seconds",
                 kind="restore") == 1700000000.0
    assert value(found, "resilient_virt_failover_reservations", creator="capacity-team") == 2
    assert value(found, "resilient_virt_failover_reserved_cpus", creator="capacity-team") == 8
    assert value(found, "resilient_virt_failover_reserved_memory_bytes", creator="capacity-team") == 4096 * 2 ** 20
    assert value(found, "resilient_virt_failover_coverage_ratio", creator="capacity-team") == 0.75
    assert value(found, "resilient_virt_failover_vms_covered", creator="capacity-team") == 3
    assert all(family["type"] == "gauge" for family in found.values())


def test_the_file_is_replaced_whole_and_readable_by_all(tmp_path):
    path = tmp_path / "resilient_virt.prom"
    path.write_text("old\n")
    os.chmod(path, 0o600)
    write_textfile(str(path), _text(BREAKERS))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert parse(path.read_text()) == parse(_text(BREAKERS))
    assert sorted(os.listdir(tmp_path)) == ["resilient_virt.prom"]  # no temporary file left


def test_a_missing_directory_raises_and_leaves_nothing(tmp_path):
    with pytest.raises(OSError):
        write_textfile(str(tmp_path / "nowhere" / "m.prom"), "x 1\n")
    assert os.listdir(tmp_path) == []
