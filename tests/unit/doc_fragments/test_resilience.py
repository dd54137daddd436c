"""The resilience settings are declared once (config.SETTINGS); the module option spec, the
documentation fragment and docs/resilience.md must name every one of them, and the settings
table of docs/resilience.md is exactly the one rendered here from config.SETTINGS."""
import os

import yaml

from ansible_collections.resilient.virt.plugins.doc_fragments.resilience import ModuleDocFragment
from ansible_collections.resilient.virt.plugins.module_utils._convert import format_duration
from ansible_collections.resilient.virt.plugins.module_utils._resilience import settings as config
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import OPTION_KEYS, SETTINGS
from ansible_collections.resilient.virt.plugins.module_utils._module_base import RESILIENCE_OPTIONS

from paths import ROOT


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


def _value(setting, number):
    if setting.kind in ("duration", "duration?"):
        return format_duration(number) if number else "0"
    return "%d" % number if float(number).is_integer() else "%g" % number


def _range(setting):
    if setting.minimum is None and setting.maximum is None:
        return "-"
    low = "more than 0" if setting.key in config._POSITIVE else (
        "any" if setting.minimum is None else _value(setting, setting.minimum))
    return "%s to %s" % (low, _value(setting, setting.maximum))


def _default(setting):
    if setting.default is None:
        return "unset"
    if setting.kind in ("duration", "duration?"):
        return "`%gs`" % setting.default
    return "`%s`" % setting.default


def settings_table():
    """The settings table of docs/resilience.md, rendered from config.SETTINGS."""
    rows = ["| option | environment variable | default | valid range | meaning |",
            "|---|---|---|---|---|"]
    for setting in SETTINGS:
        rows.append("| `%s` | `%s` | %s | %s | %s |" % (setting.option, setting.env,
                                                        _default(setting), _range(setting),
                                                        setting.description))
    return "\n".join(rows)


def test_user_docs_carry_the_settings_table():
    with open(os.path.join(ROOT, "docs", "resilience.md")) as f:
        text = f.read()
    assert settings_table() in text, "regenerate the table: python -c 'import ...settings_table'"
