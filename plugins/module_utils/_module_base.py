# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base every resilient.virt module builds on.

A module is a small class with an ``argument_spec`` and a ``run()`` that returns its result.
The base owns the common options, the state store, the resilience settings, provider
connections, error handling and the exit: a ``VirtError`` becomes a clean failure with its
type, any other exception an ``Internal`` failure, never a traceback.

Secrets are registered for masking as soon as the arguments are read, before Ansible validates
them, so that no failure (a wrong option, a bad provider, an unreachable store) can print them:
every value under a secret-named key (``masking.is_secret_key``) and every password inside a
URL, in any argument, ``provider``/``providers`` catalogs from ``module_defaults`` included.
So are the secrets of the task's environment (``masking.environment_secrets``: VMWARE_PASSWORD
and the like, which the providers' options read when a provider dict leaves them unset).
Ansible masks the values of ``no_log`` options (``cloud_init.user_data``) itself; like ours,
those shorter than ``MIN_LENGTH`` are left alone.
A failure of Ansible's own argument validation carries ``error.type`` InvalidSpec like ours.
"""


import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.validation import check_type_dict

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, VirtError, classify, field_error, field_errors)
from ansible_collections.resilient.virt.plugins.module_utils._input import shown, text_problem
from ansible_collections.resilient.virt.plugins.module_utils._masking import (
    MIN_LENGTH, environment_secrets, secret_values)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.breaker import (
    BREAKER_FACT, fact, list_breakers)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import (
    option_spec, resolve_settings)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.spans import span_log
from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import summary
from ansible_collections.resilient.virt.plugins.module_utils._state.fallback import policy_store
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils._task_context import TaskContext
from ansible_collections.resilient.virt.plugins.module_utils.providers._environment import environment_provider
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import open_provider, provider_key

RESILIENCE_OPTIONS = option_spec()

COMMON_OPTIONS = dict(
    state_store=dict(type="str"),
    store_failure=dict(type="str", choices=["open", "closed"]),
    resilience=dict(type="dict", options=RESILIENCE_OPTIONS),
    provider=dict(type="raw"),
    providers=dict(type="dict"),
    in_process=dict(type="bool"),  # read by the action plugin; the module itself ignores it
)

ECHO_LIMIT = 100  # longer lists of the arguments are summed up, not echoed, in ``invocation``
STORE_ENV = "RESILIENT_VIRT_STATE_STORE"


def echo(params):
    """The arguments as a result's ``invocation`` shows them: a list longer than ECHO_LIMIT (a
    fleet of VMs) is replaced by how many items it had, so that the result stays bounded."""
    return dict((key, "(%d items, not echoed)" % len(value)
                 if isinstance(value, list) and len(value) > ECHO_LIMIT else value)
                for key, value in params.items())


def _drop_unset(options):
    return dict((key, value) for key, value in (options or {}).items() if value is not None)


class _AnsibleModule(AnsibleModule):
    """AnsibleModule that masks secrets before validation and types its validation failures.

    ``environ`` is the environment the task sees; ``record``, when given, receives the
    formatted result instead of standard output (a task run inside the controller's worker).
    """

    _validated = False

    def __init__(self, environ, record=None, **kwargs):
        self.environ = environ
        self._record = record
        super().__init__(**kwargs)
        self._drop_short_no_log_values()

    def _drop_short_no_log_values(self):
        # Ansible registers every value inside a no_log option (each item of a dict such as
        # cloud_init.user_data, numbers too) and masks it wherever it appears; below MIN_LENGTH
        # that garbles the result (a 1 would hide every number with a 1, a space every space)
        # and protects nothing
        self.no_log_values = set(value for value in self.no_log_values if len(value) >= MIN_LENGTH)

    def _load_params(self):
        super()._load_params()
        self.no_log_values.update(secret_values(self.params))
        self.no_log_values.update(secret_values(self.environ.get(STORE_ENV)))
        self.no_log_values.update(environment_secrets(self.environ))  # VMWARE_PASSWORD, ...
        for name, option in self.argument_spec.items():
            value = self.params.get(name) if isinstance(self.params, dict) else None
            # Ansible itself crashes on a number or a boolean given for options with suboptions
            if option.get("options") and not isinstance(value, (dict, str, type(None))):
                self._fail_field(name, "%s must be a dictionary, not %s" % (name, type(value).__name__))
            if option.get("options") and isinstance(value, str):  # Ansible reads k=v or JSON
                try:
                    check_type_dict(value)
                except (TypeError, ValueError):
                    self._fail_field(name, "%s must be a dictionary such as {%s: ...}, not the "
                                     "string %s" % (name, sorted(option["options"])[0], shown(value)))

    def _fail_field(self, path, message):
        error = dict((key, value) for key, value in field_error(path, message).to_dict().items()
                     if key != "message")
        self.fail_json("InvalidSpec: %s" % message, error=error)

    def fail_json(self, msg, **kwargs):
        self._drop_short_no_log_values()  # Ansible's own checks fail before __init__ returns
        if not self._validated and "error" not in kwargs:  # Ansible's own argument checks
            kwargs["error"] = dict((key, value) for key, value in InvalidSpec(str(msg)).to_dict().items()
                                   if key != "message")
            msg = "InvalidSpec: %s" % msg
        super().fail_json(msg, **kwargs)

    def _record_module_result(self, o):  # ansible-core >= 2.19.1 formats results through it
        if self._record is None:
            super()._record_module_result(o)
        else:
            self._record(o)


class ResilientModule:
    """Base class: subclasses set ``argument_spec`` (and maybe ``module_kwargs``) and ``run()``."""

    argument_spec = {}
    module_kwargs = {}

    def __init__(self, environ=None, record=None):
        spec = dict(COMMON_OPTIONS)
        spec.update(self.argument_spec)
        self.environ = os.environ if environ is None else environ
        self.ansible = _AnsibleModule(self.environ, record, argument_spec=spec,
                                      supports_check_mode=True, **self.module_kwargs)
        self.ansible._validated = True
        self.params = self.ansible.params
        self.check_mode = self.ansible.check_mode
        self.diff_mode = self.ansible._diff
        self.warnings = []
        self._store = None
        self._policy_store = None
        self._settings = None
        self._providers = []
        self._spans = span_log(self.environ)  # each call recorded for traces, when asked for
        self._closed = False

    # -- shared resources -------------------------------------------------------------------
    @property
    def store(self):
        if self._store is None:
            self._store = open_store(self.params.get("state_store"), environ=self.environ,
                                     timeout=self.settings.store_timeout)
            self.warnings.extend(w for w in self._store.warnings if w not in self.warnings)
            if not self.params.get("state_store"):  # AWX or an EE without a shared store: warn
                # imported here: only a task without a state store needs it
                # (tests/unit/modules/test_describe_imports.py)
                from ansible_collections.resilient.virt.plugins.module_utils._awx import store_warning

                warning = store_warning(None, self.environ)
                if warning:
                    self.warnings.append(warning)
        return self._store

    @property
    def settings(self):
        if self._settings is None:
            self._settings = resolve_settings(_drop_unset(self.params.get("resilience")),
                                              environ=self.environ,
                                              store_failure=self.params.get("store_failure"))
        return self._settings

    @property
    def policy_store(self):
        """The store of the providers' breakers and rate limits: the shared one, or under
        ``store_failure: open`` this task's memory once the shared one fails (with a warning)."""
        if self._policy_store is None:
            self._policy_store = policy_store(lambda: self.store, self.settings, self.warnings.append)
        return self._policy_store

    def provider_config(self, reference=None, field="provider"):
        """Return the provider dict named or given by ``reference`` (default: the ``provider`` option;
        when neither it nor ``providers`` is given, the provider the environment names)."""
        reference = self.params.get("provider") if reference is None else reference
        catalog = self.params.get("providers") or {}
        if reference is None:
            if len(catalog) == 1:
                return self.provider_config(next(iter(catalog)), field)
            if not catalog:  # AWX credentials inject the settings (providers/_environment.py)

                config = environment_provider(self.environ, field)
                if config is not None:
                    return config
            raise field_error(field, "is required: give a dict such as {type: libvirt, uri: 'qemu:///system'} "
                              "or the name of an entry of 'providers'")
        if isinstance(reference, str):
            if reference not in catalog:
                reference = self._catalog_name_of_key(reference, catalog) or reference
            if reference not in catalog:
                known = ", ".join(sorted(str(name) for name in catalog)) or "none defined"
                raise field_error(field, "%r names no entry of 'providers' (known: %s); define it under "
                                  "'providers' or give the provider as a dict" % (reference, known))
            entry = catalog[reference]
            if not isinstance(entry, dict):
                raise field_error("providers.%s" % reference, "must be a dict of provider settings such as "
                                  "{type: libvirt, uri: 'qemu:///system'}, not %s" % type(entry).__name__)
            config = dict(entry)
            config.setdefault("name", reference)
            return config
        if isinstance(reference, dict):
            return dict(reference)
        raise field_error(field, "must be a dict or the name of an entry of 'providers', not %s"
                          % type(reference).__name__)

    def check_catalog(self):
        """Refuse a ``providers`` catalog with an entry that is not a dict of settings, or whose
        name is not a name, whether the task uses it or not."""
        problems = []
        for name, entry in sorted((self.params.get("providers") or {}).items(), key=lambda i: str(i[0])):
            problem = text_problem(name, what="a provider name") if isinstance(name, str) else \
                "must be named by a string, not %s" % shown(name)
            path = "providers.%s" % name if not problem else "providers"
            if problem:
                problems.append({"path": path, "message": "entry %s" % problem})
            elif not isinstance(entry, dict):
                problems.append({"path": path, "message": "must be a dict of provider settings "
                                 "such as {type: libvirt, uri: 'qemu:///system'}, not %s"
                                 % type(entry).__name__})
        if problems:
            raise field_errors(problems)

    def _catalog_name_of_key(self, key, catalog):
        """The entry of ``catalog`` whose provider key (``<type>:<name>``, as results give it) is
        ``key``, or None."""
        if ":" not in key:
            return None

        for name, entry in sorted(catalog.items(), key=lambda item: str(item[0])):
            if isinstance(entry, dict) and entry.get("type") == key.split(":", 1)[0]:
                try:
                    config = dict(entry, name=entry.get("name") or name)
                    if provider_key(config, environ=self.environ) == key:
                        return name
                except VirtError:
                    continue
        return None

    def provider_references(self):
        """The providers a task with an ``all_providers`` option works on: every entry of
        ``providers`` (sorted) when it is true, else the ``provider`` option (as None)."""
        if not self.params["all_providers"]:
            return [None]
        if self.params.get("provider") is not None:
            raise field_error("all_providers", "set either provider or all_providers=true, not both")
        catalog = self.params.get("providers") or {}
        if not catalog:
            raise field_error("all_providers", "all_providers=true needs named providers in 'providers'")
        return sorted(str(name) for name in catalog)

    def open_provider(self, reference=None, field="provider"):
        """Connect to a provider through the resilience policy; closed when the module exits."""
        provider = open_provider(self.provider_config(reference, field), self.settings, self.policy_store,
                                 environ=self.environ, spans=self._spans)
        self._providers.append(provider)
        return provider

    def breaker_facts(self):
        """Every breaker of the store in short form, by name, for ``ansible_facts``: a task
        publishes them all, so the fact it replaces loses none of the others."""
        return dict((snap["name"], fact(snap)) for snap in list_breakers(self.store))

    def context(self):
        """The :class:`TaskContext` a task (``_<area>/task.py``) takes: this module's store,
        settings, providers and warnings, and its check and diff modes."""
        return TaskContext(
            open_store=lambda: self.store, read_settings=lambda: self.settings,
            open_provider=self.open_provider, provider_config=self.provider_config,
            provider_references=self.provider_references, environ=self.environ,
            warnings=self.warnings, check_mode=self.check_mode, diff_mode=self.diff_mode)

    # -- life cycle ---------------------------------------------------------------------------
    def run(self):
        """Do the work and return the result dict (``changed`` included)."""
        raise NotImplementedError

    def _facts(self):
        """``ansible_facts`` for a successful task: every breaker of the state store (not only
        those of the providers this task used). None when the task opened neither the store nor
        a provider, when its breakers fell back to memory (``store_failure: open``), or when the
        store cannot be read."""
        try:
            if self._store is None and not self._providers or getattr(self._policy_store, "fell_back", False):
                return {}
            return {BREAKER_FACT: self.breaker_facts()}
        except Exception:  # noqa: BLE001 - facts must never turn a result into a crash
            return {}

    def resilience(self):
        """The ``resilience`` result: what the resilience layer did per provider key
        (``_resilience/stats.py``), from every provider this task opened."""
        return summary(provider.stats for provider in self._providers)

    def _add_spans(self, result):
        """The ``resilience_spans`` result (``_resilience/spans.py``), when the task records its
        calls for traces."""
        if self._spans is not None:
            result["resilience_spans"] = self._spans.result()

    def _close(self):
        if self._closed:
            return
        self._closed = True
        for provider in self._providers:
            self.warnings.extend(w for w in provider.warnings if w not in self.warnings)
            try:
                provider.close()
            except Exception:  # noqa: BLE001 - closing must never mask the result
                pass

    def _warn(self):
        for warning in self.warnings:
            self.ansible.warn(warning)

    @classmethod
    def main(cls, environ=None, record=None):
        """Run the task: as a module process (no arguments), or inside the controller's worker
        with the task's ``environ`` and ``record`` receiving the result; exits either way."""
        module = cls(environ, record)
        try:
            module.check_catalog()
            result = module.run()
        except VirtError as err:
            module.fail(err)
        except Exception as err:  # noqa: BLE001 - users get a clean failure, not a traceback
            module.fail(classify(err))
        module._close()
        result.setdefault("changed", False)
        result["resilience"] = module.resilience()
        module._add_spans(result)
        if BREAKER_FACT not in result.get("ansible_facts", {}):  # one the module set itself wins
            for key, value in module._facts().items():
                result.setdefault("ansible_facts", {})[key] = value
        module._warn()
        result.setdefault("invocation", {"module_args": echo(module.params)})
        module.ansible.exit_json(**result)

    def fail(self, err):
        """Exit with a clean failure describing ``err`` (plus ``err.result``, set by the module).

        The message is given once, in ``msg`` (``<type>: <message>``); ``error`` has the rest.
        No facts: Ansible keeps none from a failed task.
        """
        # imported here: only a failed task needs it (6 ms in a module process, python3 -X importtime)
        from ansible_collections.resilient.virt.plugins.module_utils._required_libraries import explain

        err = explain(err, self.params, self.environ)
        self._close()
        error = err.to_dict()
        del error["message"]
        result = dict(error=error)
        result.update(err.result)
        result["resilience"] = self.resilience()
        self._add_spans(result)
        self._warn()
        result.setdefault("invocation", {"module_args": echo(self.params)})
        self.ansible.fail_json(msg="%s: %s" % (err.type, err.message), **result)
