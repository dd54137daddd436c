"""Every hook of the ``resilient_virt`` plugin system; these docstrings are the documentation.

A plugin is any object (usually a module) with functions named like the hooks below and marked
with ``HookimplMarker("resilient_virt")`` (:data:`hookimpl` here, or a plugin's own marker with
the same project name, so a third-party package needs only ``pluggy`` to declare hooks).

How plugins are found (see ``_registry.py``):

* built-in backends (``libvirt``, ``vsphere``) are modules of this collection, imported only
  when their provider type is asked for;
* third-party backends are declared in the entry point group ``resilient_virt.providers``
  (``<type name> = "package.module"`` or ``"package.module:object"``); they are loaded only
  when the requested type is not built in;
* observer plugins (metrics, logging, fault injection) are listed, comma separated, in the
  environment variable ``RESILIENT_VIRT_PLUGINS`` as ``package.module`` or
  ``package.module:object``, or passed to ``_registry.open_provider(plugins=...)``.

Arguments are passed by name: an implementation may accept any subset of them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

try:
    import pluggy
except ImportError:  # _registry.plugin_manager() reports it when a provider is opened
    pluggy = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ansible_collections.resilient.virt.plugins.module_utils.errors import VirtError
    from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import Provider

PROJECT = "resilient_virt"


def _unmarked(function: Callable[..., Any] | None = None, **_options: Any) -> Any:
    """Stand-in for pluggy's markers when pluggy is missing: leaves functions unchanged."""
    return _unmarked if function is None else function


hookspec = pluggy.HookspecMarker(PROJECT) if pluggy else _unmarked
hookimpl = pluggy.HookimplMarker(PROJECT) if pluggy else _unmarked


@hookspec
def resilient_virt_provider_types() -> Any:
    """Declare the provider types this plugin implements.

    Return a dict ``{type_name: ProviderSubclass}`` or a list of Provider subclasses (each
    class's ``type_name`` is then used). The classes subclass
    ``plugins.module_utils.providers.contract.Provider``. Called once per process when a
    provider is opened; every plugin's answer is collected (not firstresult). Two plugins
    declaring the same type name is an error that names both.
    """


@hookspec(firstresult=True)
def resilient_virt_classify_error(provider: Provider, exc: BaseException) -> VirtError | None:
    """Map ``exc`` (raised by ``provider``'s library) into the error taxonomy.

    ``provider`` is the Provider instance, ``exc`` the exception. Return a ``VirtError`` from
    ``plugins.module_utils.errors`` (for example ``Unavailable(str(exc))`` so that it is retried
    and counts against the circuit breaker) or None to pass. firstresult: the first non-None
    answer wins. Called only when the provider's own ``classify_error`` returned None; when every
    answer is None the standard classifier decides (network errors -> Unavailable/Timeout, any
    other exception -> Internal).
    """


@hookspec
def resilient_virt_before_call(provider: Provider, operation: str, arguments: dict[str, Any]) -> None:
    """Called before every attempt of a provider operation, inside the attempt.

    ``operation`` is the method name (``describe``, ``create``, ``power``..., or
    ``hold_capacity``/``release_capacity``), ``arguments`` a dict of its arguments (for example
    ``{"name": "web1", "action": "on", "timeout": None}``); do not modify it. The return value
    is ignored. An implementation may raise to inject a fault: the exception is handled exactly
    like a failure of the provider call itself (classified, counted by the circuit breaker,
    retried when retryable) and the provider is not called for this attempt. All
    implementations are called (not firstresult).
    """


@hookspec
def resilient_virt_after_call(provider: Provider, operation: str, arguments: dict[str, Any],
                              outcome: str, error: VirtError | None, duration: float) -> None:
    """Called after every attempt of a provider operation, to observe it (metrics, logging).

    ``outcome`` is ``"ok"``, ``"error"`` (``error`` is then the classified ``VirtError``) or
    ``"timeout"`` (the attempt did not answer within its time limit and was abandoned; ``error``
    is the ``Timeout``). ``duration`` is the attempt's wall time in seconds. A retry answered by
    the look-before-retry (the earlier attempt had done the work) is reported too, although no
    ``resilient_virt_before_call`` preceded it. The return value is ignored and
    exceptions raised here are ignored too, so an observer cannot change the result of an
    operation. All implementations are called (not firstresult).
    """


@hookspec(firstresult=True)
def resilient_virt_hold_capacity(provider: Provider,
                                 reservation: dict[str, Any]) -> dict[str, Any] | None:
    """Hold failover capacity natively on the provider, when it has such a feature.

    ``reservation`` is a dict describing the capacity (for example ``name``, ``hypervisor``,
    ``vcpus``, ``memory_mb``). Return a JSON-able dict identifying what was held (kept with the
    reservation and passed back to ``resilient_virt_release_capacity``), or None when the
    provider cannot hold capacity natively: the collection then tracks the reservation itself.
    firstresult. Called through ``GuardedProvider.hold_capacity`` like a mutating provider call
    (time limit, retries, circuit breaker), so the implementation must be idempotent.
    """


@hookspec(firstresult=True)
def resilient_virt_release_capacity(provider: Provider,
                                    reservation: dict[str, Any]) -> bool | None:
    """Release capacity held by ``resilient_virt_hold_capacity``.

    ``reservation`` is the same dict, with the held value under ``reservation["held"]``.
    Return True when released (releasing something already gone counts as released) or None
    when not supported. firstresult. Called through ``GuardedProvider.release_capacity`` like a
    mutating provider call, so the implementation must be idempotent.
    """
