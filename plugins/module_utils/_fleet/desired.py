# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The desired fleet: the ``vms`` list checked entry by entry, each VM with its provider's key
and a hash of what is wanted of it.

Every problem of the list is reported at once, by its path (``vms[3].memory_mb``), before
anything is contacted. A VM is identified by its provider's key and its name; the same VM twice
in the list is an error naming both entries.
"""
import hashlib
import json
import re

from ansible_collections.resilient.virt.plugins.module_utils._convert import to_bool
from ansible_collections.resilient.virt.plugins.module_utils._input import (
    int_problem, spec_problems, text_problem)
from ansible_collections.resilient.virt.plugins.module_utils._vm.converge import SPEC_FIELDS
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, field_error, field_errors)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import OWNER_KEY

__all__ = ("STATES", "FIELDS", "PATTERNS", "DesiredVM", "check_owner", "desired_fleet")

STATES = ("present", "running", "stopped", "absent")
FIELDS = ("name", "provider", "state", "adopt") + SPEC_FIELDS
_OWNER = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
PATTERNS = (_OWNER,)  # compiled ahead by a controller that preloads the collection
MAX_REPORTED = 50  # problems listed in one error; the count says how many more there were


class DesiredVM:
    """One entry of ``vms``: ``index``, ``name``, ``state``, ``spec`` (the spec fields given),
    ``config`` (the provider dict), ``provider`` (its key), ``provider_ref`` (the name of its
    ``providers`` entry, or None for a dict), ``id`` (``provider/name``), ``adopt`` (the owner
    marker is to be written on the VM even when it exists already) and ``spec_hash``."""

    __slots__ = ("index", "name", "state", "spec", "config", "provider", "provider_ref", "id",
                 "adopt", "spec_hash")

    def __init__(self, index, name, state, spec, config, provider, provider_ref, adopt=False):
        self.index = index
        self.name = name
        self.state = state
        self.spec = spec
        self.config = config
        self.provider = provider
        self.provider_ref = provider_ref
        self.adopt = bool(adopt)
        self.id = "%s/%s" % (provider, name)
        wanted = {"name": name, "provider": provider, "state": state, "spec": spec}
        if self.adopt:  # hashed only when set: entries without it keep their hash
            wanted["adopt"] = True
        self.spec_hash = hashlib.sha256(
            json.dumps(wanted, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:32]

    def marker(self, owner):
        """The metadata that marks a VM as ``owner``'s fleet's."""
        return {OWNER_KEY: owner}

    def create_spec(self, owner):
        """The spec a create sends: the fields given, the owner marker in ``metadata``."""
        spec = dict(self.spec)
        spec["metadata"] = dict(spec.get("metadata") or {}, **self.marker(owner))
        return spec

    def wanted_spec(self, owner):
        """The spec an existing VM is brought to: the fields given, and the owner marker only
        when the entry adopts the VM (a VM the fleet did not create is never marked, so never
        pruned, unless adopted)."""
        return self.create_spec(owner) if self.adopt else dict(self.spec)


def check_owner(owner):
    if not isinstance(owner, str) or not re.match(_OWNER, owner):
        raise field_error("owner", "%r: use 1 to 63 letters, digits, '.', '_' or '-', starting "
                          "with a letter or digit (it marks the VMs this fleet creates)" % (owner,))
    return owner


def _bounded(value, path, problems):
    number, problem = int_problem(value, path.rsplit(".", 1)[-1])
    if problem:
        problems.append((path, problem))
    return number


def _strings(value, path, problems):
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        problems.append((path, "must be a list of non-empty strings"))
    return value


def _dicts(value, path, problems):
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        problems.append((path, "must be a list of dicts"))
    return value


def _bool(value, path, problems):
    try:
        return to_bool(value)
    except ValueError:
        problems.append((path, "must be true or false, not %r" % (value,)))
        return value


def _text(value, path, problems):
    if not isinstance(value, str) or not value:
        problems.append((path, "must be a non-empty string"))
    return value


def _dict(value, path, problems):
    if not isinstance(value, dict):
        problems.append((path, "must be a dict"))
    return value


def _placement(value, path, problems):
    """A dict; ``esxi_hostname`` (community.vmware's name, an alias as in the vm module) is
    given as ``host``."""
    if not isinstance(value, dict):
        problems.append((path, "must be a dict"))
        return value
    if value.get("esxi_hostname") is None:
        return dict((k, v) for k, v in value.items() if k != "esxi_hostname")
    if value.get("host") is not None:
        problems.append((path + ".esxi_hostname", "is another name of %s.host, which is given "
                         "too; give one of them" % path))
        return value
    placement = dict(value, host=value["esxi_hostname"])
    del placement["esxi_hostname"]
    return placement


def _metadata(value, path, problems):
    if not isinstance(value, dict):
        problems.append((path, "must be a dict of key: value"))
    elif OWNER_KEY in value:
        entry = path[:-len(".metadata")]
        problems.append(("%s.%s" % (path, OWNER_KEY), "is reserved: vm_fleet writes it from the "
                         "owner option on the VMs it creates, and a prune deletes only VMs that "
                         "carry it; remove it, and to mark a VM that exists already as this "
                         "fleet's (a prune may then delete it) set %s.adopt: true" % entry))
    return value


_CHECKS = {"vcpus": _bounded, "memory_mb": _bounded, "disks": _dicts, "interfaces": _dicts,
           "boot": _strings, "tags": _strings, "metadata": _metadata, "autostart": _bool,
           "placement": _placement, "template": _text, "guest_id": _text, "customization": _dict,
           "libvirt": _dict, "cloud_init": _dict}


def _entry(index, entry, problems):
    """(name, state, spec) of one entry; its problems appended to ``problems``."""
    path = "vms[%d]" % index
    if not isinstance(entry, dict):
        problems.append((path, "must be a dict such as {name: web1, vcpus: 1, memory_mb: 512}, "
                         "not %s" % type(entry).__name__))
        return None
    for key in sorted(set(entry) - set(FIELDS), key=str):
        problems.append(("%s.%s" % (path, key), "unknown field (a typo?); known fields: %s"
                         % ", ".join(FIELDS)))
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append((path + ".name", "is required: a non-empty string"))
    else:
        problem = text_problem(name, what="a VM name")
        if problem:
            problems.append((path + ".name", problem))
    state = entry.get("state", "present")
    if state is None:
        state = "present"
    if state not in STATES:
        problems.append((path + ".state", "must be one of %s, not %r" % (", ".join(STATES), state)))
    spec = {}
    for field in SPEC_FIELDS:
        if entry.get(field) is not None:
            spec[field] = _CHECKS[field](entry[field], "%s.%s" % (path, field), problems)
    problems.extend(problem for problem in spec_problems(
        dict((field, entry.get(field)) for field in ("disks", "tags", "metadata")), path)
        if problem not in problems)
    adopt = entry.get("adopt")
    adopt = False if adopt is None else _bool(adopt, path + ".adopt", problems)
    return name, state, spec, adopt


def _under(path, field):
    """``provider.uri`` of a provider error -> ``vms[3].provider.uri``."""
    if field == "provider" or field.startswith(("provider.", "vms[")):
        return path + field[len("provider"):] if field.startswith("provider") else field
    return path


class _Providers:
    """Provider references resolved once each: (config, key, name or None) or the error."""

    def __init__(self, resolve, key_of):
        self.resolve = resolve
        self.key_of = key_of
        self.seen = {}

    def get(self, reference, path):
        memo = json.dumps(reference, sort_keys=True, default=str)
        if memo not in self.seen:
            try:
                config = self.resolve(reference, path)
                self.seen[memo] = (config, self.key_of(config), config.get("name") if
                                   isinstance(reference, str) else None)
            except InvalidSpec as err:
                self.seen[memo] = err
        found = self.seen[memo]
        if isinstance(found, InvalidSpec):
            errors = (found.details or {}).get("errors") or [{"path": path, "message": found.message}]
            raise field_errors([dict(e, path=_under(path, e["path"])) for e in errors])
        return found


def desired_fleet(entries, default_provider, resolve, key_of):
    """The DesiredVM of every entry of ``entries`` (the ``vms`` option).

    ``resolve(reference, path)`` turns a provider name or dict into the provider dict (raising
    InvalidSpec naming ``path``); ``key_of(config)`` gives its key. An entry without
    ``provider`` uses ``default_provider``. Raises one InvalidSpec listing every problem.
    """
    if not isinstance(entries, list):
        raise field_error("vms", "must be a list of VM dicts")
    providers = _Providers(resolve, key_of)
    problems, fleet, seen = [], [], {}
    for index, entry in enumerate(entries):
        parsed = _entry(index, entry, problems)
        if parsed is None:
            continue
        name, state, spec, adopt = parsed
        path = "vms[%d].provider" % index
        reference = entry.get("provider", default_provider)
        try:
            config, key, ref_name = providers.get(reference, path)
        except InvalidSpec as err:
            problems.extend((e["path"], e["message"]) for e in err.details["errors"])
            continue
        if not isinstance(name, str) or not name.strip() or state not in STATES:
            continue
        vm = DesiredVM(index, name, state, spec, config, key, ref_name, adopt=adopt is True)
        if vm.id in seen:
            problems.append(("vms[%d].name" % index, "%r on %s is already vms[%d]; list each VM "
                             "once" % (name, key, seen[vm.id])))
            continue
        seen[vm.id] = index
        fleet.append(vm)
    if problems:
        unique = []
        for path, message in problems:
            if {"path": path, "message": message} not in unique:
                unique.append({"path": path, "message": message})
        more = len(unique) - MAX_REPORTED
        err = field_errors(unique[:MAX_REPORTED], "invalid vms%s" % (
            " (%d more problems not shown)" % more if more > 0 else ""))
        raise err
    return fleet
