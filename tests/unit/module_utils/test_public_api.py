"""The public modules export exactly the names docs/providers.md lists in its public API table."""
import importlib
import os
import re

import pytest

from paths import ROOT

PREFIX = "ansible_collections.resilient.virt.plugins.module_utils."


def documented_names():
    """Module -> the names in backticks of its row of the "Public API" table."""
    with open(os.path.join(ROOT, "docs", "providers.md")) as handle:
        section = handle.read().split("\n## Public API\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`" + PREFIX):
            rows[cells[0].strip("`")] = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[1]))
    return rows


@pytest.mark.parametrize("module", ["errors", "providers.contract"])
def test_all_is_the_documented_api(module):
    exported = importlib.import_module(PREFIX + module).__all__
    assert len(set(exported)) == len(exported)
    assert set(exported) == documented_names()[PREFIX + module]
