# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The suite's plugins (``hookspecs.py`` hooks): an observer of attempts and two fault injectors.

Faults go in through ``resilient_virt_before_call``, which runs inside each attempt: whatever it
does happens where the backend's own call would, and whatever it raises is handled as the
backend's own failure.
"""
from __future__ import annotations

import time
from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl

__all__ = ("Attempts", "LostReply", "LateAttempt")


class Attempts:
    """Observer: ``started`` lists the operation of each attempt that reached the backend (or a
    fault), ``ended`` each attempt's ``(operation, outcome, error type or None)``."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.ended: list[tuple[str, str, str | None]] = []

    @hookimpl
    def resilient_virt_before_call(self, operation: str) -> None:
        self.started.append(operation)

    @hookimpl
    def resilient_virt_after_call(self, operation: str, outcome: str, error: Any) -> None:
        self.ended.append((operation, outcome, None if error is None else error.type))

    def outcomes(self, operation: str) -> list[str]:
        return [outcome for op, outcome, _type in self.ended if op == operation]


class LostReply:
    """The first attempt of ``operation`` does the work through the backend, then fails as if
    the reply had been lost on the way back (a reset connection: retryable)."""

    def __init__(self, operation: str):
        self.operation = operation
        self.fired = False

    @hookimpl
    def resilient_virt_before_call(self, provider: Any, operation: str,
                                   arguments: dict[str, Any]) -> None:
        if operation != self.operation or self.fired:
            return
        self.fired = True
        getattr(provider, operation)(**arguments)
        raise ConnectionResetError(104, "connection reset by peer (injected after the %s was done)"
                                   % operation)


class LateAttempt:
    """The first attempt of ``operation`` waits ``delay`` seconds before the backend is called:
    with a time limit shorter than ``delay`` the attempt is abandoned first, and its thread then
    goes on to do the work, as a call answered too late does."""

    def __init__(self, operation: str, delay: float):
        self.operation = operation
        self.delay = delay
        self.fired = False

    @hookimpl
    def resilient_virt_before_call(self, operation: str) -> None:
        if operation != self.operation or self.fired:
            return
        self.fired = True
        time.sleep(self.delay)
