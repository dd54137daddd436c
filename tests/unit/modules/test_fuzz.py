"""Fuzzing every module's arguments: any input ends in success or in an error whose type is one
of the taxonomy, never Internal, never a traceback.

Each example runs a module the way Ansible does, in this process: arguments handed over as
``ANSIBLE_MODULE_ARGS`` (``ansible.module_utils.testing.patch_module_args``), the result read
from what the module prints before it exits. Providers are libvirt's in-process
``test:///default`` driver, so nothing outside this process is touched; the state store is a
SQLite file per test. Inputs mix well-formed values with the malformed ones users really send:
wrong types, empty and huge strings, path components, control characters, huge and negative
numbers, nested junk.
"""
import contextlib
import importlib
import io
import json
import string
import sys

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible.module_utils.common import warnings as ansible_warnings
from ansible.module_utils.testing import patch_module_args

from ansible_collections.resilient.virt.plugins.module_utils import errors
from ansible_collections.resilient.virt.plugins.module_utils._module_base import COMMON_OPTIONS
from ansible_collections.resilient.virt.plugins.plugin_utils import _module_list

MODULES = dict((name, _module_list.module_class(importlib.import_module(
    "ansible_collections.resilient.virt.plugins.modules." + name))) for name in _module_list.MODULES)
TAXONOMY = {name for name in errors.__all__ if isinstance(getattr(errors, name), type)
            and issubclass(getattr(errors, name), errors.VirtError)} - {"VirtError", "Retryable",
                                                                        "StoreUnavailable"}
TAXONOMY.discard("Internal")
GOOD_PROVIDER = {"type": "libvirt", "uri": "test:///default", "name": "fuzz"}
DOCUMENTED = dict((name, set(yaml.safe_load(sys.modules[klass.__module__].RETURN)))
                  for name, klass in MODULES.items())
# what Ansible itself documents for every module
STANDARD = {"changed", "failed", "msg", "invocation", "warnings", "deprecations", "exception"}

nasty_text = st.one_of(
    st.sampled_from(["", ".", "..", " ", "   ", "a/b", "../../etc", "nul\x00byte", "tab\tx",
                     "x" * 300, "\u200b", "-1", "1e300", "99999999h", "none", "started", "yes",
                     "weird", "*", "libvirt", "vsphere", "qemu:///system", "redis://:p@h:1/0",
                     "sqlite://relative", "1s", "30m", "fuzz"]),
    st.text(alphabet=string.printable + "\x00\x7f\u00e9", max_size=20),
)
numbers = st.one_of(st.integers(min_value=-10 ** 20, max_value=10 ** 20),
                    st.floats(allow_nan=False, allow_infinity=False, width=64),
                    st.sampled_from([0, 1, -1, 2, 64, 10 ** 6, 1e300, -1e300, 0.5]))
scalars = st.one_of(st.none(), st.booleans(), numbers, nasty_text)
junk = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(nasty_text, inner, max_size=3)), max_leaves=6)


def _value(option):
    """Values for one option: mostly of its declared type (or choices), sometimes anything."""
    kind = option.get("type", "str")
    typed = {
        "str": nasty_text, "int": numbers, "float": numbers, "bool": st.booleans(),
        "raw": scalars, "dict": st.dictionaries(nasty_text, scalars, max_size=3),
        "list": st.lists(scalars, max_size=3),
    }.get(kind, scalars)
    if option.get("choices"):
        typed = st.one_of(st.sampled_from(option["choices"]), typed)
    if option.get("options"):
        typed = st.one_of(st.fixed_dictionaries({}, optional=dict(
            (key, _value(sub)) for key, sub in option["options"].items())), typed)
    return st.one_of(typed, junk)


FLEET = {"hypervisors": [{"name": "h1", "az": "a", "cpu": 8, "memory_mb": 8192},
                         {"name": "h2", "az": "a", "cpu": 8, "memory_mb": 8192}],
         "vms": [{"uuid": "u1", "host": "h1", "az": "a", "flavor": "small", "vcpus": 1,
                  "memory_mb": 512}]}
VALID = {  # a working call of each module, for fuzzing one field at a time
    "vm": {"provider": GOOD_PROVIDER, "name": "fuzz-vm", "vcpus": 1, "memory_mb": 64},
    "vm_info": {"provider": GOOD_PROVIDER},
    "provider": {"provider": GOOD_PROVIDER},
    "circuit_breaker": {},
    "failover_reservation": dict(FLEET, requirements={"*": 1}),
    "vm_fleet": {"provider": GOOD_PROVIDER, "owner": "fuzz",
                 "vms": [{"name": "fuzz-fleet", "vcpus": 1, "memory_mb": 64}]},
    "backup": {"provider": GOOD_PROVIDER, "vm": "test", "wait": False},
    "backup_status": {"mode": "reconcile", "provider": GOOD_PROVIDER},
    "vm_snapshot": {"provider": GOOD_PROVIDER, "vm": "test", "name": "fuzz-snap", "state": "absent"},
    "vm_migrate": {"provider": GOOD_PROVIDER, "vm": "test",
                   "target": dict(GOOD_PROVIDER, name="fuzz-target")},
    "hypervisor": {"provider": GOOD_PROVIDER, "targets": [dict(GOOD_PROVIDER, name="fuzz-target")]},
}


def _spec(name):
    spec = dict(COMMON_OPTIONS)
    spec.update(MODULES[name].argument_spec)
    spec.pop("state_store")
    return spec


def _one_field_changed(name):
    """A working call with one field replaced or added: reaches the code behind validation."""
    spec = _spec(name)
    fields = sorted(spec)
    return st.sampled_from(fields).flatmap(lambda field: _value(spec[field]).map(
        lambda value: dict(VALID[name], **{field: value})))


def _module_args(name):
    spec = _spec(name)
    optional = dict((key, _value(option)) for key, option in spec.items())
    variants = st.dictionaries(st.sampled_from(["az", "traits", "uri", "password", "bogus",
                                                "storage_pool", "domain_type"]), junk, max_size=3)
    optional["provider"] = st.one_of(st.just(GOOD_PROVIDER), st.just("fuzz"),
                                     st.builds(lambda extra: dict(GOOD_PROVIDER, **extra), variants),
                                     junk)
    optional["providers"] = st.one_of(st.just({"fuzz": GOOD_PROVIDER}),
                                      st.dictionaries(nasty_text, junk, max_size=2), junk)
    return st.one_of(st.fixed_dictionaries({}, optional=optional), _one_field_changed(name))


def run_module(module_class, args):
    """Run ``module_class`` as Ansible would in a module process; return (result dict, everything
    it printed). A test that imported controller code (an action plugin) has made this process a
    controller, where warnings are displayed instead of returned: a module process is not one."""
    from ansible.module_utils import _internal

    ansible_warnings._global_warnings.clear()
    ansible_warnings._global_deprecations.clear()
    out = io.StringIO()
    was_controller, _internal.is_controller = _internal.is_controller, False
    try:
        with patch_module_args(args), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(out), pytest.raises(SystemExit):
            module_class.main()
    finally:
        _internal.is_controller = was_controller
    printed = out.getvalue()
    return json.loads(printed.strip().splitlines()[-1]), printed


def _check(name, args, store):
    args = dict(args, state_store=store, _ansible_diff=True)  # diff mode adds keys to check
    result, printed = run_module(MODULES[name], args)
    assert "Traceback" not in printed, printed
    undocumented = set(result) - STANDARD - DOCUMENTED[name]
    assert not undocumented, "%s returns keys its RETURN does not document: %s" % (name, undocumented)
    if not result.get("failed"):
        return
    error = result.get("error")
    assert error, "a failure without an error type: %s" % printed
    assert error["type"] in TAXONOMY, "%s failed with %s" % (name, result["msg"])
    assert result["msg"].startswith(error["type"] + ": ") and "message" not in error
    # the message once: in msg (error.details.errors lists the bad fields, by path, and a
    # backup's record keeps its errors, on purpose)
    message = json.dumps(result["msg"].split(": ", 1)[1])[1:-1]  # as the result encodes it
    rest = dict(result, error=dict(error, details=None), record=None)
    assert json.dumps(rest).count(message) == 1, "the message is repeated: %s" % printed


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    return "sqlite://%s" % (tmp_path_factory.mktemp("fuzz") / "state.db")


@pytest.fixture
def short_backoff(monkeypatch):
    """Retries wait 10 ms, doubling, where an example does not set the wait itself: a refused
    provider is retried as it would be, without the default half second before the first retry
    (the test is about how a call ends, not how long it waits)."""
    monkeypatch.setenv("RESILIENT_VIRT_RETRY_BASE_DELAY", "10ms")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_any_arguments_end_in_success_or_a_typed_error(name, store_url, short_backoff):
    @settings(max_examples=300, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(args=_module_args(name))
    def fuzz(args):
        _check(name, args, store_url)

    fuzz()


@pytest.mark.parametrize("name, args", [
    ("vm", {"provider": GOOD_PROVIDER, "name": "..", "vcpus": 1, "memory_mb": 64}),
    ("vm", {"provider": GOOD_PROVIDER, "name": "x", "state": "started"}),
    ("vm_info", {"provider": "a", "providers": {"a": "notadict"}}),
    ("vm_info", {"provider": GOOD_PROVIDER, "filters": {"state": "weird"}}),
    ("vm_info", {"provider": GOOD_PROVIDER, "resilience": {"reset_timeout": 1e300}}),
    ("vm_info", {"provider": GOOD_PROVIDER, "resilience": {"timeout_describe": "99999999h"}}),
    ("vm_info", {"provider": 1, "providers": {1: GOOD_PROVIDER, "b": GOOD_PROVIDER}}),
    ("failover_reservation", {"requirements": {"*": 1}, "max_vms_to_process": -3,
                              "hypervisors": [], "vms": []}),
    ("failover_reservation", {"requirements": {"*": 1}, "hypervisors": [], "vms": None}),
    ("vm_fleet", {"provider": GOOD_PROVIDER, "owner": "a|b", "vms": []}),
    ("vm_fleet", {"provider": GOOD_PROVIDER, "owner": "o", "vms": [{"name": "x", "vcpu": 1}]}),
    ("vm_fleet", {"provider": GOOD_PROVIDER, "owner": "o", "vms": [], "max_prune": "200%"}),
    ("vm_fleet", {"provider": GOOD_PROVIDER, "owner": "o", "vms": [], "round_size": 0}),
    ("vm_fleet", {"provider": GOOD_PROVIDER, "owner": "o", "vms": [], "backoff_min": "2h"}),
    ("backup", {"provider": GOOD_PROVIDER, "vm": "test", "keep_last": 0}),
    ("backup", {"provider": GOOD_PROVIDER, "vm": "test", "timeout": "-1"}),
    ("backup", {"provider": GOOD_PROVIDER, "vm": "test", "name": "a/b"}),
    ("backup", {"provider": GOOD_PROVIDER, "state": "restored"}),
    ("backup", {"provider": GOOD_PROVIDER, "state": "absent"}),
    ("backup", {"provider": GOOD_PROVIDER, "vm": "test", "resource_timeout": "0"}),
    ("backup", {"provider": GOOD_PROVIDER, "vm": "test", "lease": "soon"}),
    ("backup_status", {"mode": "wait"}),
    ("backup_status", {"mode": "set", "name": "x"}),
])
def test_known_bad_inputs_are_invalid_spec(name, args, store_url):
    result, printed = run_module(MODULES[name], dict(args, state_store=store_url))
    assert result["failed"] and result["error"]["type"] == "InvalidSpec", printed
