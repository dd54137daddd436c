# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's modules, as the one place that lists them says: the ``all`` action group of
``meta/runtime.yml``, through which ``module_defaults`` reaches every module. The action plugins,
the in-worker preload and the tests read the list here."""
import os

import yaml

__all__ = ("MODULES", "RUNTIME", "module_class")

RUNTIME = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "meta", "runtime.yml")


def _read(path):
    with open(path) as handle:
        return tuple(sorted(yaml.safe_load(handle)["action_groups"]["all"]))


MODULES = _read(RUNTIME)  # sorted


def module_class(module):
    """The module class (a ResilientModule) that the Python module of a module file defines."""
    return next(value for key, value in vars(module).items()
                if key.endswith("Module") and isinstance(value, type)
                and value.__module__ == module.__name__)
