"""Every figure README.md and docs/benchmarks.md quote from the bench is in the documented run.

docs/bench-report.md is the report ``bench/run.py`` wrote; the "How fast" section of the README,
the "Reading the results" section of docs/benchmarks.md, the "Performance" sections of
docs/inventory.md, docs/fleet.md and docs/backup.md and the costs in docs/execution.md quote it. A number there that the
report does not contain was measured by hand, mixed from several runs, or left over from an
older run.
"""
import os
import re

import pytest

from paths import ROOT

NUMBER = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)x?(?![\w])")  # 1.18x: 1.18


def _section(path, heading):
    with open(os.path.join(ROOT, path)) as handle:
        text = handle.read()
    start = text.index("\n" + heading + "\n")
    end = text.find("\n## ", start + len(heading) + 2)
    return text[start:end if end != -1 else None]


def _numbers(text):
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets are not figures
    return set(number.replace(",", "") for number in NUMBER.findall(text))


@pytest.mark.parametrize("path, heading", [("README.md", "## How fast"),
                                           ("docs/benchmarks.md", "## Reading the results"),
                                           ("docs/inventory.md", "## Performance"),
                                           ("docs/fleet.md", "## Performance"),
                                           ("docs/backup.md", "## Performance"),
                                           ("docs/execution.md",
                                            "## What it costs, and what it does not leak")])
def test_quoted_figures_come_from_the_documented_run(path, heading):
    with open(os.path.join(ROOT, "docs", "bench-report.md")) as handle:
        printed = _numbers(handle.read())
    quoted = _numbers(_section(path, heading))
    assert quoted, "no figures found: the section moved?"
    missing = sorted(quoted - printed, key=float)
    assert not missing, "%s (%s) quotes figures the documented run does not print: %s" % (
        path, heading, ", ".join(missing))
