"""The shipped Grafana dashboard: valid JSON whose every query is PromQL that Prometheus' own
parser accepts (``promtool check rules`` on the queries as recording rules) and names only the
metrics docs/observability.md documents, all of them.
"""
import json
import os
import re
import subprocess

import pytest
import yaml

from paths import ROOT

PROMTOOL = "/usr/bin/promtool"
DASHBOARD = os.path.join(ROOT, "extensions", "observability", "grafana", "resilient-virt.json")
DOC = os.path.join(ROOT, "docs", "observability.md")
METRIC = re.compile(r"\bresilient_virt_[a-z_]+\b")
DOC_ROW = re.compile(r"^\| `(resilient_virt_[a-z_]+)` \| (\w+) \|", re.MULTILINE)
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")
VARIABLES = re.compile(r"\$(provider_type|provider)\b")  # the dashboard's label filters


def _dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def _queries(dashboard):
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"]
            for target in panel.get("targets", ())]


def _documented():
    """{metric: type} from the table of docs/observability.md."""
    with open(DOC) as f:
        return dict(DOC_ROW.findall(f.read()))


def _family(name, documented):
    for suffix in HISTOGRAM_SERIES:
        base = name[:-len(suffix)]
        if name.endswith(suffix) and documented.get(base) == "histogram":
            return base
    return name


def test_the_dashboard_is_grafana_json_with_queries():
    dashboard = _dashboard()
    assert dashboard["uid"] and dashboard["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert len(_queries(dashboard)) >= 10


def test_every_query_names_documented_metrics_and_shows_them_all():
    documented = _documented()
    assert len(documented) >= 20, "the metrics table of docs/observability.md was not read"
    used = set()
    for title, expr in _queries(_dashboard()):
        names = {_family(name, documented) for name in METRIC.findall(expr)}
        assert names, (title, expr)
        assert names <= set(documented), (title, names - set(documented))
        used |= names
    assert used == set(documented), set(documented) - used


def test_promtool_parses_every_query(tmp_path):
    if not os.access(PROMTOOL, os.X_OK):
        pytest.skip("promtool is not installed (lab/install-deps.sh installs it)")
    rules = [{"record": "dashboard:query_%d" % index, "expr": VARIABLES.sub(".*", expr)}
             for index, (_title, expr) in enumerate(_queries(_dashboard()))]
    path = tmp_path / "dashboard-queries.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
