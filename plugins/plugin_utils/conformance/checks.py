# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cases hold a backend's answers against: the contract's shapes, written out here.

A failed check raises AssertionError with a message that says what was wrong. A case that
cannot run on a backend raises ``unittest.SkipTest`` with a reason starting with
``intended:`` (pytest reports it as a skip), so the suite needs nothing of pytest to import.
"""
from __future__ import annotations

import json
import unittest
from typing import Any, NoReturn

from ansible_collections.resilient.virt.plugins.module_utils.errors import NotFound, VirtError
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import (
    VM_FIELDS, VM_STATES)

__all__ = ("HYPERVISOR_FIELDS", "expect", "same", "skip", "declared", "check_vm", "missing",
           "raised", "named", "check_hidden")

HYPERVISOR_FIELDS = ("name", "az", "cpu", "memory_mb", "used_cpu", "used_memory_mb", "state",
                     "traits")


def expect(condition: Any, message: Any) -> None:
    """Fail the case with ``message`` unless ``condition`` holds (the collection's code takes no
    ``assert`` statement: ansible-test's sanity test no-assert)."""
    if not condition:
        raise AssertionError(message)


def same(have: Any, want: Any, what: str) -> None:
    """Fail the case unless ``have`` equals ``want`` and is of its type (``True``, not ``1``)."""
    expect(have == want and type(have) is type(want), "%s is %r, not %r" % (what, have, want))


def skip(reason: str) -> NoReturn:
    raise unittest.SkipTest("intended: " + reason)


def declared(guarded: Any, capability: str) -> None:
    """Skip the case unless the provider lists ``capability`` in its capabilities."""
    if capability not in guarded.capabilities:
        skip("the %s provider does not declare %s (Provider.capabilities)"
             % (guarded.type_name, capability))


def check_vm(vm: Any, guarded: Any, name: str, spec: dict[str, Any]) -> None:
    """``vm`` is a VM dict of ``guarded`` named ``name`` with the vCPUs and memory of ``spec``."""
    expect(isinstance(vm, dict), "a VM dict is a dict, not %r" % (vm,))
    absent = [key for key in VM_FIELDS if key not in vm]
    expect(not absent, "the VM dict of %r lacks %s (contract.VM_FIELDS)" % (
        name, ", ".join(absent)))
    expect(vm["name"] == name, "the VM dict of %r names %r" % (name, vm["name"]))
    expect(vm["state"] in VM_STATES, "state %r is none of %s" % (vm["state"], ", ".join(VM_STATES)))
    for field in ("vcpus", "memory_mb"):
        if spec.get(field) is not None:
            expect(vm[field] == spec[field], "%s of %r is %r, the spec gave %r" % (
                field, name, vm[field], spec[field]))
    expect(vm["provider_key"] == guarded.key, "provider_key %r is not the provider's key %r" % (
        vm["provider_key"], guarded.key))
    json.dumps(vm)  # results go to Ansible as JSON


def missing(guarded: Any, name: str) -> bool:
    """True when ``guarded`` has no VM ``name``."""
    try:
        guarded.describe(name)
    except NotFound:
        return True
    return False


def raised(call: Any, *args: Any, **kwargs: Any) -> VirtError:
    """The VirtError ``call`` raises; AssertionError when it returns instead."""
    try:
        answer = call(*args, **kwargs)
    except VirtError as err:
        return err
    raise AssertionError("%s returned %r instead of failing" % (
        getattr(call, "__name__", call), answer))


def named(guarded: Any, name: str) -> int:
    """How many VMs named ``name`` the provider lists (1 when it cannot list: ``describe``
    answered for the one it has)."""
    if "list_vms" not in guarded.capabilities:
        guarded.describe(name)
        return 1
    return len([vm for vm in guarded.list_vms({"name": name}) if vm["name"] == name])


def check_hidden(secrets: list[str], texts: dict[str, Any]) -> None:
    """No value of ``secrets`` in any of ``texts`` (where -> text or bytes); the failure names
    where, and shows the text with the secret replaced."""
    for secret in secrets:
        for where, text in texts.items():
            found = secret.encode() in text if isinstance(text, bytes) else secret in str(text)
            expect(not found, "a secret of the provider settings appears in %s: %s" % (
                where, "(binary)" if isinstance(text, bytes) else str(text).replace(
                    secret, "<the secret>")[:2000]))
