# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the conformance suite needs to know of a backend's test environment: :class:`Backend`."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

__all__ = ("Backend",)


@dataclass
class Backend:
    """A backend under test, as its test environment can offer it.

    ``provider``: the provider dict of a working endpoint, secrets included (give each secret
    option a distinctive value: the suite looks for it everywhere it must not be). ``spec``: the
    smallest VM spec that endpoint takes, without ``name`` (the suite changes ``memory_mb`` and
    powers the VM on and off, so it should start and stop quickly). ``environ``: the task
    environment the provider is opened with (its options' environment fallbacks).

    What the environment can fake, each None when it cannot (the cases that need it are then
    skipped, saying why): ``unreachable``, the provider dict of an endpoint that refuses
    connections; ``wrong_credentials``, the provider dict of the working endpoint with
    credentials it refuses; ``hanging``, a function returning a context manager that yields the
    provider dict of an endpoint that accepts calls and never answers (see
    :class:`~.silent.SilentEndpoint`), for as long as the context lasts.
    """

    provider: dict[str, Any]
    spec: dict[str, Any] = field(default_factory=lambda: {"vcpus": 1, "memory_mb": 64})
    environ: Mapping[str, str] = field(default_factory=dict)
    unreachable: dict[str, Any] | None = None
    wrong_credentials: dict[str, Any] | None = None
    hanging: Callable[[], AbstractContextManager[dict[str, Any]]] | None = None
