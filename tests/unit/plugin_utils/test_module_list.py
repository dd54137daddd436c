"""The one list of modules (``meta/runtime.yml``) matches the module and action plugin files."""
import os

from ansible.plugins.loader import action_loader, init_plugin_loader

from ansible_collections.resilient.virt.plugins.plugin_utils._module_list import MODULES

from paths import ROOT


def _names(kind):
    return sorted(name[:-3] for name in os.listdir(os.path.join(ROOT, "plugins", kind))
                  if name.endswith(".py") and not name.startswith("_"))


def test_every_module_file_is_listed_and_has_its_action_plugin():
    assert list(MODULES) == _names("modules")
    assert list(MODULES) == _names("action")


def test_each_action_plugin_runs_the_module_it_is_named_after():
    init_plugin_loader()
    for name in MODULES:
        action = action_loader.get("resilient.virt." + name, class_only=True)
        assert object.__new__(action).module == name  # the property reads only the class
