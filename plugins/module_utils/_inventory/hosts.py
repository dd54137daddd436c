# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory hosts, their variables and groups, from the providers' answers (see scan.py).

:func:`host_records` gives one record per hypervisor and, with VMs, one per VM:
``{"kind": "hypervisor" | "vm", "name": the provider's name for it, "vars": {...},
"groups": [...]}``. Variable names start with ``prefix``; group names are plain (the plugin
adds its group prefix and makes them safe). The inventory plugin then names each host (its
``hostnames``), filters, and adds them. :func:`summary` describes every provider for the
``all`` group, unreachable ones included.
"""
import re

from ansible_collections.resilient.virt.plugins.module_utils._time import format_time

__all__ = ("host_records", "summary", "safe_host_name")

_UNSAFE = re.compile(r"[^\w.@-]+")
# hypervisor dict keys whose variable has another name; the others keep theirs
_HYPERVISOR_RENAMED = {"az": "zone"}


def safe_host_name(text):
    """``text`` usable as an Ansible host name: every run of characters other than letters,
    digits, ``_ . @ -`` (spaces, ``/``, ``:``, ``[``, ``,``...) becomes one ``_``."""
    return _UNSAFE.sub("_", str(text)).strip("_") or "_"


def _when(answer):
    found = {"stale": bool(answer.get("stale")), "scanned_at": format_time(answer["scanned_at"])}
    if answer.get("stale"):
        found["age_seconds"] = answer.get("age_seconds")
    return found


def _free(total, used):
    if isinstance(total, (int, float)) and isinstance(used, (int, float)):
        return round(total - used, 2)
    return None


def _hypervisor(answer, hv, vm_counts, prefix):
    fields = dict(hv)
    values = {"kind": "hypervisor", "provider": answer["name"], "provider_type": answer["type"],
              "provider_key": answer["key"], "breaker": answer["breaker"]}
    for key, value in fields.items():
        values[_HYPERVISOR_RENAMED.get(key, key)] = value
    values.setdefault("free_cpu", _free(fields.get("cpu"), fields.get("used_cpu")))
    values.setdefault("free_memory_mb", _free(fields.get("memory_mb"), fields.get("used_memory_mb")))
    if values.get("vm_count") is None and vm_counts is not None:
        values["vm_count"] = vm_counts.get(fields.get("name"), 0)
    values.update(_when(answer))
    groups = ["hypervisors", "provider_%s" % answer["name"], "type_%s" % answer["type"],
              "state_%s" % fields.get("state")]
    if fields.get("az"):
        groups.append("zone_%s" % fields["az"])
    if answer.get("stale"):
        groups.append("stale")
    return {"kind": "hypervisor", "name": fields.get("name"),
            "vars": dict((prefix + key, value) for key, value in values.items()), "groups": groups}


def _vm(answer, vm, prefix, set_ansible_host, details):
    values = {"kind": "vm", "name": vm.get("name"), "uuid": vm.get("uuid"),
              "provider": answer["name"], "provider_type": answer["type"],
              "provider_key": answer["key"], "hypervisor": vm.get("hypervisor"),
              "zone": vm.get("az"), "power_state": vm.get("state"),
              "enabled": vm.get("state") == "running", "vcpus": vm.get("vcpus"),
              "memory_mb": vm.get("memory_mb"), "tags": vm.get("tags") or [],
              "metadata": vm.get("metadata") or {}, "addresses": vm.get("addresses") or [],
              "guest": vm.get("guest") or {}}
    if details:
        values.update(interfaces=vm.get("interfaces") or [], disks=vm.get("disks") or [])
    values.update(_when(answer))
    variables = dict((prefix + key, value) for key, value in values.items())
    if set_ansible_host and values["addresses"]:
        variables["ansible_host"] = values["addresses"][0]
    groups = ["vms", "provider_%s" % answer["name"], "type_%s" % answer["type"],
              "power_%s" % vm.get("state")]
    if vm.get("az"):
        groups.append("zone_%s" % vm["az"])
    if vm.get("hypervisor"):
        groups.append("hypervisor_%s" % vm["hypervisor"])
    if answer.get("stale"):
        groups.append("stale")
    return {"kind": "vm", "name": vm.get("name"), "vars": variables, "groups": groups}


def host_records(answers, prefix="resilient_virt_", include_vms=False, set_ansible_host=True,
                 details=False):
    """The host records of every answer that has hosts (this run's or a cached one); VMs get
    ``interfaces`` and ``disks`` variables with ``details``."""
    records = []
    for answer in answers:
        if not answer.get("ok"):
            continue
        vm_counts = None
        if include_vms:
            vm_counts = {}
            for vm in answer.get("vms") or []:
                vm_counts[vm.get("hypervisor")] = vm_counts.get(vm.get("hypervisor"), 0) + 1
        records.extend(_hypervisor(answer, hv, vm_counts, prefix)
                       for hv in answer.get("hypervisors") or [])
        if include_vms:
            records.extend(_vm(answer, vm, prefix, set_ansible_host, details)
                           for vm in answer.get("vms") or [])
    return records


def summary(answers):
    """(every provider: name -> what happened, names of the providers that gave no hosts)."""
    providers, unreachable = {}, []
    for answer in answers:
        entry = {"type": answer["type"], "ok": bool(answer["ok"]) and not answer.get("stale"),
                 "stale": bool(answer.get("stale")), "error": answer["error"],
                 "breaker": answer["breaker"], "seconds": answer.get("seconds"),
                 "hypervisors": len(answer.get("hypervisors") or []) if answer["ok"] else 0,
                 "vms": len(answer.get("vms") or []) if answer["ok"] else 0,
                 "warnings": list(answer.get("warnings") or [])}
        entry.update(_when(answer))
        providers[answer["name"]] = entry
        if not answer["ok"]:
            unreachable.append(answer["name"])
    return providers, unreachable
