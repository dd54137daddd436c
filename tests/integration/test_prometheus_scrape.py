"""The metrics as a real Prometheus sees them, through node_exporter's textfile collector.

node_exporter (the textfile collector alone, on the test's directory) and Prometheus (scraping
it and evaluating the shipped alert rules every second) run as the test's own processes while
real ansible-playbook, with the resilience_summary callback on, describes VMs on a healthy
hypervisor and on a stopped one whose breaker opens. Prometheus' HTTP API must then give the
calls by outcome and the attempts the test counted itself (the task results and the observer
plugin), and the open-breaker alert must fire for the stopped hypervisor only. A second run
after that first scrape makes the counters grow between two scrapes: the error-rate alert must
then fire for the stopped hypervisor only, whose calls all failed, and not for the healthy one,
whose calls were answers (NotFound).

The rules are those of extensions/observability/, loaded from a copy whose ``for`` durations
are 2 s instead of minutes, so the alert fires within the test; promtool's tests check the
rules as shipped (tests/unit/extensions/test_alert_rules.py).
"""
import collections
import os
import time

import prometheus_stack
import yaml
from paths import ROOT
from playbook_runner import store_records
from test_resilience_summary import HOSTS, outage_tasks, run_with_summary

RULES = os.path.join(ROOT, "extensions", "observability", "prometheus", "resilient-virt.rules.yml")
SHORT_FOR = "2s"
DEADLINE = 120.0  # seconds for a scrape and a rule evaluation to show, on a loaded machine
BREAKER_ALERT = "ResilientVirtCircuitBreakerOpen"
ERROR_RATE_ALERT = "ResilientVirtProviderErrorRate"
CALLS_BY_OUTCOME = 'sum by (provider, outcome) (resilient_virt_provider_calls_total{provider_type="libvirt"})'


def _rules_with_short_for(path):
    """A copy of the shipped rules at ``path`` whose ``for`` durations are SHORT_FOR."""
    with open(RULES) as f:
        rules = yaml.safe_load(f)
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = SHORT_FOR
    with open(path, "w") as f:
        yaml.safe_dump(rules, f, sort_keys=False)
    return path


def _wait_for(what, probe):
    """probe()'s first true answer, asked every half second until DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while True:
        answer = probe()
        if answer:
            return answer
        assert time.monotonic() < deadline, "Prometheus never showed %s" % what
        time.sleep(0.5)


def _firing(server, name):
    return [alert for alert in prometheus_stack.alerts(server)
            if alert["labels"]["alertname"] == name and alert["state"] == "firing"]


def _expected_calls(parsed, hosts):
    """{(provider, outcome): calls} of a run: each dead item's error type, each host's NotFound
    on hv2."""
    items = [item for task in parsed.tasks if task.name == "dead" for item in task.items]
    expected = collections.Counter(("sum-hv1", item["error"]["type"]) for item in items)
    expected[("sum-hv2", "NotFound")] = len(hosts)
    return expected


def test_prometheus_scrapes_the_outage_and_fires_the_breaker_alert(lab, outage, tmp_path):
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    store = "sqlite://%s" % (tmp_path / "state.db")
    metrics = str(textfiles / "resilient_virt.prom")
    exporter = prometheus_stack.node_exporter(str(tmp_path), str(textfiles))
    try:
        server = prometheus_stack.prometheus(
            str(tmp_path), ["127.0.0.1:%d" % exporter.port],
            rule_files=[_rules_with_short_for(str(tmp_path / "rules.yml"))])
        try:
            outage.stop("hv1")
            run, parsed, outcomes = run_with_summary(tmp_path, outage_tasks(lab), store, metrics, "scraped")
            assert run.rc == 0, run.describe()

            # the test's own counts: each item's error type, each host's NotFound on hv2, and
            # the attempts the observer plugin saw
            expected = _expected_calls(parsed, HOSTS)
            attempts = collections.Counter(o["provider"].split(":", 1)[1] for o in outcomes)

            calls = _wait_for("the calls", lambda: prometheus_stack.query(server, CALLS_BY_OUTCOME))
            assert {(labels["provider"], labels["outcome"]): number for labels, number in calls} == expected
            assert "BreakerOpen" in {outcome for _provider, outcome in expected}
            seen = prometheus_stack.query(server, "resilient_virt_provider_attempts_total")
            assert {labels["provider"]: number for labels, number in seen} == attempts
            assert all(labels["job"] == "resilient_virt" for labels, _number in seen)

            fired = _wait_for("the open-breaker alert firing", lambda: _firing(server, BREAKER_ALERT))
            assert store_records(store, "breaker")["libvirt:sum-hv1"]["state"] == "open"
            assert [(alert["labels"]["provider_type"], alert["labels"]["provider"], alert["labels"]["severity"])
                    for alert in fired] == [("libvirt", "sum-hv1", "critical")]
            # one scrape saw the first run's counters, whose increase over the window is nothing yet
            assert not _firing(server, ERROR_RATE_ALERT)

            # the second run: the counters grow between two scrapes
            again, parsed_again, _outcomes = run_with_summary(
                tmp_path, outage_tasks(lab), store, metrics, "scraped-again")
            assert again.rc == 0, again.describe()
            expected.update(_expected_calls(parsed_again, HOSTS))
            _wait_for("the second run's calls", lambda: {
                (labels["provider"], labels["outcome"]): number
                for labels, number in prometheus_stack.query(server, CALLS_BY_OUTCOME)} == expected)
            fired = _wait_for("the error-rate alert firing", lambda: _firing(server, ERROR_RATE_ALERT))
            assert [(alert["labels"]["provider_type"], alert["labels"]["provider"], alert["labels"]["severity"])
                    for alert in fired] == [("libvirt", "sum-hv1", "warning")]
            assert float(fired[0]["value"]) == 1.0  # every call to it in the window failed
        finally:
            server.stop()
    finally:
        exporter.stop()
    assert server.proc.returncode is not None and exporter.proc.returncode is not None
