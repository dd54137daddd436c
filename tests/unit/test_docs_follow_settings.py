"""The resilience settings are declared once (config.SETTINGS); the module option spec, the
documentation fragment and docs/resilience.md must name every one of them."""
import os

import yaml

from ansible_collections.resilient.virt.plugins.doc_fragments.resilience import ModuleDocFragment
from ansible_collections.resilient.virt.plugins.module_utils.config import OPTION_KEYS, SETTINGS
from ansible_collections.resilient.virt.plugins.module_utils.module_base import RESILIENCE_OPTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_option_spec_matches_settings():
    assert sorted(RESILIENCE_OPTIONS) == sorted(OPTION_KEYS)


def test_fragment_documents_every_option_and_variable():
    options = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]
    documented = options["resilience"]["suboptions"]
    assert sorted(documented) == sorted(OPTION_KEYS)
    for setting in SETTINGS:
        if setting.key not in documented:
            continue
        doc = documented[setting.key]
        text = " ".join(doc["description"]) if isinstance(doc["description"], list) else doc["description"]
        assert setting.env in text, "%s does not name %s" % (setting.option, setting.env)
        assert doc["type"] == RESILIENCE_OPTIONS[setting.key]["type"], setting.option


def test_user_docs_name_every_variable():
    with open(os.path.join(ROOT, "docs", "resilience.md")) as f:
        text = f.read()
    missing = [s.env for s in SETTINGS if "`%s`" % s.env not in text]
    assert not missing, "docs/resilience.md does not mention %s" % ", ".join(missing)
