# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One case's hold on the backend: providers opened as a task opens them, VMs removed after.

Every provider is opened with the collection's ``open_provider``, so each call goes through the
hooks and the resilience policy, with a SQLite state store in the case's own directory and the
backend's ``environ`` as the task environment (``RESILIENT_VIRT_*`` variables of the process
running the suite are not read).
"""
from __future__ import annotations

import os
import uuid
from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import open_provider
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.backend import Backend

__all__ = ("Harness", "RESILIENCE")

# short waits between attempts, a breaker that a case's own failures do not open
RESILIENCE = {"max_attempts": 3, "base_delay": "50ms", "max_delay": "200ms",
              "failure_threshold": 100}


class Harness:
    """Opens ``backend``'s providers and names VMs for one case; ``close()`` deletes every VM it
    named that exists and closes every provider (use it as a context manager)."""

    def __init__(self, backend: Backend, directory: Any):
        self.backend = backend
        self.directory = str(directory)
        self.store_path = os.path.join(self.directory, "state.db")
        self.opened: list[Any] = []
        self.names: list[str] = []

    def open(self, provider: dict[str, Any] | None = None, plugins: tuple[Any, ...] = (),
             **resilience: Any) -> Any:
        """A GuardedProvider for ``provider`` (default: the backend's), with :data:`RESILIENCE`
        and ``resilience`` (setting name -> value) and ``plugins`` registered."""
        settings = resolve_settings(dict(RESILIENCE, **resilience), environ={})
        store = open_store("sqlite:///%s" % self.store_path, environ={})
        guarded = open_provider(dict(provider or self.backend.provider), settings, store,
                                plugins=plugins, environ=dict(self.backend.environ))
        self.opened.append(guarded)
        return guarded

    def name(self, case: str) -> str:
        """A new VM name for ``case`` (letters, digits and hyphens), deleted by :meth:`close`."""
        name = "conformance-%s-%s" % (case, uuid.uuid4().hex[:6])
        self.names.append(name)
        return name

    def spec(self, name: str, **fields: Any) -> dict[str, Any]:
        """The backend's small VM spec named ``name``, with ``fields`` changed."""
        return dict(self.backend.spec, name=name, **fields)

    def close_provider(self, guarded: Any) -> None:
        """Close ``guarded`` now (a case that times the close)."""
        self.opened.remove(guarded)
        guarded.close()

    def close(self) -> None:
        janitor = self.open() if self.names else None
        try:
            for name in self.names:
                try:
                    janitor.delete(name)
                except NotFound:
                    pass
        finally:
            for guarded in self.opened:
                guarded.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()
