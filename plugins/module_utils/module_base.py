# -*- coding: utf-8 -*-
# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base every resilient.virt module builds on.

A module is a small class with an ``argument_spec`` and a ``run()`` that returns its result.
The base owns the common options, the state store, the resilience settings, provider
connections, error handling and the exit: a ``VirtError`` becomes a clean failure with its
type, any other exception an ``Internal`` failure, never a traceback.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.resilient.virt.plugins.module_utils.errors import Internal, InvalidSpec, VirtError

RESILIENCE_OPTIONS = dict(
    retry_preset=dict(type="str", choices=["default", "aggressive", "conservative", "none"]),
    max_attempts=dict(type="int"),
    base_delay=dict(type="raw"),
    max_delay=dict(type="raw"),
    multiplier=dict(type="float"),
    deadline=dict(type="raw"),
    failure_threshold=dict(type="int"),
    reset_timeout=dict(type="raw"),
    half_open_max_calls=dict(type="int"),
    success_threshold=dict(type="int"),
    rate_limit_qps=dict(type="float"),
    rate_limit_burst=dict(type="int"),
    timeout_describe=dict(type="raw"),
    timeout_mutating=dict(type="raw"),
    timeout_validate=dict(type="raw"),
    timeout_task_status=dict(type="raw"),
)

COMMON_OPTIONS = dict(
    state_store=dict(type="str"),
    resilience=dict(type="dict", options=RESILIENCE_OPTIONS),
    provider=dict(type="raw"),
    providers=dict(type="dict"),
)

SECRET_KEY_MARKERS = ("password", "passwd", "secret", "token", "api_key", "private_key")

BREAKER_FACT = "resilient_virt_breakers"


def _secret_values(value, key=""):
    """Yield every secret string inside a provider configuration."""
    if isinstance(value, dict):
        for sub_key, sub_value in value.items():
            yield from _secret_values(sub_value, str(sub_key).lower())
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _secret_values(item, key)
    elif value not in (None, "") and any(marker in key for marker in SECRET_KEY_MARKERS):
        yield str(value)


def _drop_unset(options):
    return dict((key, value) for key, value in (options or {}).items() if value is not None)


class ResilientModule:
    """Base class: subclasses set ``argument_spec`` (and maybe ``module_kwargs``) and ``run()``."""

    argument_spec = {}
    module_kwargs = {}

    def __init__(self):
        spec = dict(COMMON_OPTIONS)
        spec.update(self.argument_spec)
        self.ansible = AnsibleModule(argument_spec=spec, supports_check_mode=True, **self.module_kwargs)
        self.params = self.ansible.params
        self.check_mode = self.ansible.check_mode
        self.diff_mode = self.ansible._diff
        self.warnings = []
        self._store = None
        self._settings = None
        self._providers = []
        for name in ("provider", "providers"):
            self.ansible.no_log_values.update(_secret_values(self.params.get(name)))

    # -- shared resources -------------------------------------------------------------------
    @property
    def store(self):
        if self._store is None:
            from ansible_collections.resilient.virt.plugins.module_utils.state_store import open_store

            self._store = open_store(self.params.get("state_store"))
        return self._store

    @property
    def settings(self):
        if self._settings is None:
            from ansible_collections.resilient.virt.plugins.module_utils.config import resolve_settings

            self._settings = resolve_settings(_drop_unset(self.params.get("resilience")))
        return self._settings

    def provider_config(self, reference=None, field="provider"):
        """Return the provider dict named or given by ``reference`` (default: the ``provider`` option)."""
        reference = self.params.get("provider") if reference is None else reference
        catalog = self.params.get("providers") or {}
        if reference is None:
            if len(catalog) == 1:
                return self.provider_config(next(iter(catalog)), field)
            raise InvalidSpec(
                "%s is required: give a dict such as {type: libvirt, uri: 'qemu:///system'} "
                "or the name of an entry of 'providers'" % field
            )
        if isinstance(reference, str):
            if reference not in catalog:
                known = ", ".join(sorted(catalog)) or "none defined"
                raise InvalidSpec(
                    "%s=%r names no entry of 'providers' (known: %s); define it under 'providers' "
                    "or give the provider as a dict" % (field, reference, known)
                )
            config = dict(catalog[reference])
            config.setdefault("name", reference)
            return config
        if isinstance(reference, dict):
            return dict(reference)
        raise InvalidSpec("%s must be a dict or the name of an entry of 'providers', not %s" % (field, type(reference).__name__))

    def provider_references(self):
        """The providers a task with an ``all_providers`` option works on: every entry of
        ``providers`` (sorted) when it is true, else the ``provider`` option (as None)."""
        if not self.params["all_providers"]:
            return [None]
        if self.params.get("provider") is not None:
            raise InvalidSpec("set either provider or all_providers=true, not both")
        catalog = self.params.get("providers") or {}
        if not catalog:
            raise InvalidSpec("all_providers=true needs named providers in 'providers'")
        return sorted(catalog)

    def open_provider(self, reference=None, field="provider"):
        """Connect to a provider through the resilience policy; closed when the module exits."""
        from ansible_collections.resilient.virt.plugins.module_utils.providers.registry import open_provider

        provider = open_provider(self.provider_config(reference, field), self.settings, self.store)
        self._providers.append(provider)
        return provider

    def breaker_facts(self, names=None):
        """Breaker snapshots for ``ansible_facts``; every breaker of the store when ``names`` is None."""
        from ansible_collections.resilient.virt.plugins.module_utils.circuit_breaker import list_breakers

        wanted = None if names is None else set(names)
        return dict(
            (snap["name"], snap) for snap in list_breakers(self.store) if wanted is None or snap["name"] in wanted
        )

    # -- life cycle ---------------------------------------------------------------------------
    def run(self):
        """Do the work and return the result dict (``changed`` included)."""
        raise NotImplementedError

    def _breaker_names(self):
        return [provider.key for provider in self._providers]

    def _facts(self):
        try:
            if self._store is None and not self._providers:
                return {}
            return {BREAKER_FACT: self.breaker_facts(self._breaker_names())}
        except VirtError:
            return {}

    def _close(self):
        for provider in self._providers:
            self.warnings.extend(w for w in getattr(provider.provider, "warnings", ()) if w not in self.warnings)
            try:
                provider.close()
            except Exception:  # noqa: BLE001 - closing must never mask the result
                pass

    def _warn(self):
        for warning in self.warnings:
            self.ansible.warn(warning)

    @classmethod
    def main(cls):
        module = cls()
        try:
            result = module.run()
        except VirtError as err:
            module.fail(err)
        except Exception as err:  # noqa: BLE001 - users get a clean failure, not a traceback
            module.fail(Internal("%s: %s" % (type(err).__name__, err), cause=err))
        module._close()
        result.setdefault("changed", False)
        facts = module._facts()
        for key, value in facts.items():  # facts the module set itself win
            result.setdefault("ansible_facts", {}).setdefault(key, value)
        module._warn()
        module.ansible.exit_json(**result)

    def fail(self, err):
        """Exit with a clean failure describing ``err`` (plus ``err.result``, set by the module)."""
        self._close()
        result = dict(error=err.to_dict())
        result.update(getattr(err, "result", None) or {})
        facts = self._facts()
        if facts:
            result["ansible_facts"] = facts
        self._warn()
        self.ansible.fail_json(msg="%s: %s" % (err.type, err.message), **result)
