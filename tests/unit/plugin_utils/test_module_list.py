"""The one list of modules (``meta/runtime.yml``) matches the module and action plugin files."""
import importlib
import os

from ansible_collections.resilient.virt.plugins.plugin_utils._module_list import MODULES

from paths import ROOT


def _names(kind):
    return sorted(name[:-3] for name in os.listdir(os.path.join(ROOT, "plugins", kind))
                  if name.endswith(".py") and not name.startswith("_"))


def test_every_module_file_is_listed_and_has_its_action_plugin():
    assert list(MODULES) == _names("modules")
    assert list(MODULES) == _names("action")


def test_each_action_plugin_runs_the_module_it_is_named_after():
    """Ansible loads a collection's action plugin as the Python module of its file."""
    for name in MODULES:
        action = importlib.import_module("ansible_collections.resilient.virt.plugins.action." + name)
        assert object.__new__(action.ActionModule).module == name  # the property reads only the class
