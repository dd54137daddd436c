"""The shipped Prometheus alert rules, checked by Prometheus' own promtool: the file is valid
(``promtool check rules``) and each alert fires on the series of alert_rules_test.yml that
should fire it, and on no other (``promtool test rules``, which evaluates the rules on those
series without a server).
"""
import os
import subprocess

import pytest

from paths import ROOT

PROMTOOL = "/usr/bin/promtool"
RULES = os.path.join(ROOT, "extensions", "observability", "prometheus", "resilient-virt.rules.yml")
RULE_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alert_rules_test.yml")


def _promtool(*args):
    if not os.access(PROMTOOL, os.X_OK):
        pytest.skip("promtool is not installed (lab/install-deps.sh installs it)")
    done = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_promtool_accepts_the_rules():
    assert "SUCCESS: 6 rules found" in _promtool("check", "rules", RULES)


def test_each_alert_fires_on_its_series_and_no_other():
    assert "SUCCESS" in _promtool("test", "rules", RULE_TESTS)
