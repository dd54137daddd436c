# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a module's task reaches of the module that runs it: a :class:`TaskContext`.

A task (the ``run_<module>`` function of ``_<area>/task.py``) takes the module's options as a
plain dict and this context, never the module object.
"""
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class TaskContext:
    """The shared resources of one task, each reached through the module that runs it.

    ``store``: the task's state store, opened on first use (``open_store()``). ``settings``:
    the resilience settings, resolved on first use (``read_settings()``).
    ``open_provider(reference=None, field="provider")``: a provider connected through the
    resilience policy, closed when the task ends. ``provider_config(reference=None,
    field="provider")``: the provider dict a reference stands for (None: the ``provider``
    option; a string: an entry of ``providers``; a dict: itself). ``provider_references()``:
    the references a task with an ``all_providers`` option works on. ``environ``: the
    environment the task sees. ``warnings``: the task's warnings, appended to.
    """

    open_store: Callable[[], Any]
    open_provider: Callable[..., Any]
    provider_config: Callable[..., dict]
    provider_references: Callable[[], list[Any]]
    read_settings: Callable[[], Any]
    environ: Mapping[str, str]
    warnings: list[str]
    check_mode: bool = False
    diff_mode: bool = False

    @property
    def store(self):
        return self.open_store()

    @property
    def settings(self):
        return self.read_settings()
