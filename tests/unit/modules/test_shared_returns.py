"""The RETURN blocks that every module shares are the same text in each: the module base returns
``ansible_facts``, ``error``, ``resilience_spans`` and ``resilience`` the same way for every module."""
import ast
import os
import re

import yaml

from ansible_collections.resilient.virt.plugins.plugin_utils._module_list import MODULES

from paths import ROOT

SHARED = ("ansible_facts", "error", "resilience_spans", "resilience")


def returned_blocks(name):
    """The RETURN text of module ``name`` (read without import), cut into its top-level keys."""
    with open(os.path.join(ROOT, "plugins", "modules", name + ".py")) as handle:
        tree = ast.parse(handle.read())
    text = next(node.value.value for node in tree.body
                if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["RETURN"])
    parts = re.split(r"^(?=[a-z_]+:)", text.strip("\n"), flags=re.MULTILINE)
    return dict((part.split(":", 1)[0], part.rstrip("\n")) for part in parts if part)


def test_the_blocks_every_module_shares_are_the_same_text():
    blocks = dict((name, returned_blocks(name)) for name in MODULES)
    for key in SHARED:
        texts = {}
        for name in MODULES:
            assert key in blocks[name], "%s documents no %s" % (name, key)
            texts.setdefault(blocks[name][key], []).append(name)
        assert len(texts) == 1, "%s differs between %s" % (key, " and ".join(
            ", ".join(names) for names in texts.values()))


def test_the_facts_are_documented_as_the_base_returns_them():
    """A failed task gets no facts (ResilientModule.fail), and the fact holds every breaker of the
    store (ResilientModule.breaker_facts), not only those of the providers the task used."""
    facts = yaml.safe_load(returned_blocks(MODULES[0])["ansible_facts"])["ansible_facts"]
    assert facts["returned"].startswith("success")
    breakers = facts["contains"]["resilient_virt_breakers"]["description"]
    assert " ".join(breakers).startswith("Every circuit breaker of the state store")
