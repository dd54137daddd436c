# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a resilient.virt module inside the controller's worker process: no module process.

Every module has an action plugin (``plugins/action/<module>.py``) built on
:class:`InProcessAction`. When the task runs on the controller, the plugin runs the module's own
class right there: the arguments go through the same JSON encoding and the same AnsibleModule
(argument spec, defaults, check mode, diff, no_log masking, warnings, deprecations), and the
result comes back through the same parsing as a module process's output, so the task's result
does not depend on where it ran. Otherwise the module runs as a module process, as any module
does (:func:`module_path_reason` says why).

This file is imported when Ansible loads the action plugin's class, in the controller's main
process, before any worker is forked: what :func:`load` imports then (the collection's code, the
libraries it can find) is already loaded in every worker, which is where a task's time would
otherwise go. Each task runs in its own forked worker, so nothing a task leaves in memory reaches
the next one; what persists is in the state store.
"""
import json
import os
import re
import sys

from ansible.module_utils import basic
from ansible.module_utils.common import warnings as module_warnings
from ansible.module_utils.common.json import Direction, get_module_decoder, get_module_encoder
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash
from ansible.vars.clean import remove_internal_keys

from ansible_collections.resilient.virt.plugins.module_utils import _required_libraries as libraries
from ansible_collections.resilient.virt.plugins.module_utils._convert import to_bool
from ansible_collections.resilient.virt.plugins.module_utils._masking import scrub, secret_values
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
    BUILTIN_BACKENDS, installed_entry_points, provider_class)
from ansible_collections.resilient.virt.plugins.plugin_utils._module_list import MODULES, module_class

__all__ = ("InProcessAction", "ENV_VAR", "module_path_reason", "run_module", "needed_libraries")

display = Display()

ENV_VAR = "RESILIENT_VIRT_IN_PROCESS"
ENV_PREFIX = "RESILIENT_VIRT_"
PROFILE = "legacy"  # the serialization profile of this collection's modules
# the collection's code every module may reach, loaded once in the controller's main process
PRELOAD = (
    "plugins.module_utils._vm.task", "plugins.module_utils._vm.converge",
    "plugins.module_utils._fleet.task",
    "plugins.module_utils._backup.task",
    "plugins.module_utils._failover.task", "plugins.module_utils._health.task",
    "plugins.module_utils._state.sqlite", "plugins.module_utils._state.redis",
    "plugins.module_utils._state.fallback", "plugins.module_utils._state.memory",
    "plugins.module_utils._awx",
    "plugins.module_utils.providers._environment",
    "plugins.module_utils._resilience.policy", "plugins.module_utils._resilience.breaker",
    "plugins.module_utils.providers._guarded", "plugins.module_utils.providers._vm_schema",
    "plugins.module_utils.providers._libvirt.backend", "plugins.module_utils.providers._libvirt.spec",
    "plugins.module_utils.providers._libvirt.ssh", "plugins.module_utils.providers._libvirt.create",
    "plugins.module_utils.providers._vsphere.backend", "plugins.module_utils.providers._vsphere.spec",
)
_COLLECTION = "ansible_collections.resilient.virt."


AVAILABLE = {}  # library -> importable by the controller's Python (probed at load, or when needed)
CLASSES = {}    # module name -> its ResilientModule class


def load():
    """Import the collection's code and the libraries the controller has (once); a controller
    that runs every task as a module process (RESILIENT_VIRT_IN_PROCESS=false) skips it."""
    if AVAILABLE:
        return
    for name in libraries.CORE + ("libvirt", "pyVmomi", "redis", "sqlite3"):
        AVAILABLE[name] = libraries.importable(name)
    for name in PRELOAD:
        libraries.importable(_COLLECTION + name)
    for name in MODULES:
        if libraries.importable(_COLLECTION + "plugins.modules." + name):
            CLASSES[name] = module_class(sys.modules[_COLLECTION + "plugins.modules." + name])
    for kind in BUILTIN_BACKENDS:  # the plugin manager of each built-in type, hookspecs read
        try:
            provider_class(kind)
        except Exception:  # noqa: BLE001 - pluggy missing: every task says so itself
            pass
    for direction in (Direction.CONTROLLER_TO_MODULE, Direction.MODULE_TO_CONTROLLER):
        get_module_encoder(PROFILE, direction)  # each loads its profile's code on first use
        get_module_decoder(PROFILE, direction)
    for name, module in list(sys.modules.items()):  # re caches them: compiled once, for every worker
        if name.startswith(_COLLECTION):
            for pattern in getattr(module, "PATTERNS", ()):
                re.compile(pattern)
    # everything loaded so far lives as long as the process: out of the garbage collector's
    # sight, so that no worker forked from here spends its task traversing it (about 10 ms a
    # task once the preloaded code grew past a collection threshold, measured by make bench)
    import gc
    gc.freeze()


RECORDS_RESULTS = hasattr(basic.AnsibleModule, "_record_module_result")  # ansible-core >= 2.19.1
try:
    if to_bool(os.environ.get(ENV_VAR) or "true"):
        load()
except ValueError:  # a wrong value: each task says so (module_path_reason)
    pass


def _importable(available, name):
    """``available[name]``; a library only some tasks need (pycdlib, for cloud_init) is not
    probed at load but the first time a task needs it, and remembered."""
    if name not in available:
        available[name] = libraries.importable(name)
    return available[name]


def needed_libraries(args, environ):
    """(libraries the task needs, provider types no installed backend declares)."""
    unknown = set(kind for kind in libraries.provider_types(args) if kind not in BUILTIN_BACKENDS)
    if unknown:
        unknown -= set(ep.name for ep in installed_entry_points())
    return libraries.needed(args, environ), unknown


def module_path_reason(module, local, become, async_val, option, task_environment, environ,
                       args, available=None):
    """Why the task must run as a module process, or None when it can run here.

    ``local``: the connection is local; ``option``: the task's ``in_process``;
    ``task_environment``: the task's ``environment`` (a dict); ``environ``: the environment the
    task sees here (the controller's, updated by the task's).
    """
    if option is None:
        try:
            option = to_bool(environ.get(ENV_VAR, "true") or "true")
        except ValueError:
            return "%s=%r is not true or false" % (ENV_VAR, environ.get(ENV_VAR))
    if not option:
        return "in_process is false"
    if not local:
        return "the task runs on another host"
    if become:
        return "the task uses become"
    if async_val:
        return "the task is async"
    if not RECORDS_RESULTS:
        return "this ansible-core cannot hand a module's result over in process (2.19.1 or later can)"
    load()
    available = AVAILABLE if available is None else available
    if module not in CLASSES:
        return "its module cannot be imported by the controller's Python"
    others = sorted(key for key in task_environment if not str(key).startswith(ENV_PREFIX))
    if others:
        return "the task's environment sets %s, which only a module process sees" % ", ".join(others)
    needed, unknown = needed_libraries(args, environ)
    if unknown:
        return "no backend on the controller declares the provider type(s) %s" % ", ".join(sorted(unknown))
    missing = sorted(name for name in needed if not _importable(available, name))
    if missing:
        return "the controller's Python cannot import %s" % ", ".join(missing)
    return None


def run_module(module, args, environ):
    """Run the module class of ``module`` with ``args`` (the module's arguments, the internal
    ``_ansible_*`` ones included) and ``environ``; return its result as it formats it."""
    recorded = []
    encoder = get_module_encoder(PROFILE, Direction.CONTROLLER_TO_MODULE)
    payload = json.dumps({"ANSIBLE_MODULE_ARGS": args}, cls=encoder).encode()
    saved = basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE
    basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE = payload, PROFILE
    module_warnings._global_warnings.clear()
    module_warnings._global_deprecations.clear()
    try:
        CLASSES[module].main(environ=environ, record=recorded.append)
    except SystemExit:
        pass  # the module's exit, after its result was recorded
    finally:
        basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE = saved
    if not recorded:
        raise RuntimeError("the module ended without a result")
    return recorded[-1]


class InProcessAction(ActionBase):
    """The action plugin of a resilient.virt module: ``plugins/action/<module>.py`` defines
    ``ActionModule`` as a subclass, and :attr:`module` is that file's name. On the module path it
    does what Ansible's own action for modules does (async included)."""

    _supports_check_mode = True
    _supports_async = True

    @property
    def module(self):
        """The module this action runs: the name of the action plugin's file."""
        return type(self).__module__.rsplit(".", 1)[-1]

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        task_environment = {}
        self._compute_environment_string(task_environment)
        environ = dict(os.environ)
        environ.update((str(k), str(v)) for k, v in task_environment.items())
        args = dict(self._task.args)
        reason = module_path_reason(
            self.module, getattr(self._connection, "transport", None) in ("local", "ansible.builtin.local"),
            self._play_context.become, self._task.async_val, args.get("in_process"),
            task_environment, environ, args)
        if reason is not None:
            display.vvv("resilient.virt.%s: a module process runs the task: %s" % (self.module, reason))
            wrap_async = self._task.async_val and not self._connection.has_native_async
            result = merge_hash(result, self._execute_module(module_args=args, task_vars=task_vars,
                                                             wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result
        display.vvv("resilient.virt.%s: the task runs in the controller's worker" % self.module)
        self._update_module_args(self._task.action, args, task_vars)
        try:
            formatted = run_module(self.module, args, environ)
        except Exception as exc:  # noqa: BLE001 - a crash is this task's failure, not the play's
            message = scrub("resilient.virt.%s crashed in the controller's worker: %s: %s" % (
                self.module, type(exc).__name__, exc), secret_values(args) + secret_values(environ))
            return dict(result, failed=True, msg="Internal: " + message,
                        error={"type": "Internal", "retryable": False, "retry_after": None})
        text = json.dumps(formatted, cls=get_module_encoder(PROFILE, Direction.MODULE_TO_CONTROLLER))
        data = self._parse_returned_data({"rc": 0, "stdout": text, "stderr": ""}, PROFILE)
        remove_internal_keys(data)
        return merge_hash(result, data)
