# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: hypervisors
short_description: Hypervisors (and their VMs) of every provider, in one inventory source
version_added: 0.2.0
description:
  - Lists the hypervisors of one or more providers of any registered backend (libvirt hosts,
    vCenter clusters, third-party backends) as inventory hosts, and with O(include_vms) their
    VMs too. The provider settings are those of the modules' O(providers) catalog.
  - Every provider is asked at the same time (at most O(concurrency) at once), each through the
    collection's resilience policy with its own circuit breaker, and each within O(timeout), so a
    provider that is down, hangs or whose breaker is open never delays the others for longer.
  - A provider that gives no answer yields a warning. With the inventory cache on, its last
    good answer (kept in the state store up to O(max_stale_age), whatever O(cache_timeout) is)
    gives its hosts, marked stale with their age; otherwise its hosts are missing, and the
    V(resilient_virt_unreachable_providers) variable of the C(all) group names it.
    O(fail_on_errors) (or O(strict)) makes that an error. The
    V(resilient_virt_provider_answers) variable of C(all) tells, for every provider, whether it
    answered, in how long, its breaker state, its error and its warnings.
  - What a provider that answered tells the user is a warning too, such as a Proxmox VE node that
    is offline (its VMs listed with state V(unknown)) or in maintenance.
  - A VM or host deleted while the inventory is read is left out, never an error.
  - Uses any file whose name ends in C(hypervisors.yml) or C(hypervisors.yaml), so that AWX's
    C(auto) inventory plugin accepts it.
  - Host variables start with O(prefix). Hypervisors get C(kind) (V(hypervisor)), C(name),
    C(provider), C(provider_type), C(provider_key), C(zone), C(state), C(cpu), C(memory_mb),
    C(used_cpu), C(used_memory_mb), C(free_cpu), C(free_memory_mb), C(vm_count), C(traits),
    C(maintenance) (true while it is in maintenance - its platform's, or marked by
    M(resilient.virt.hypervisor); its C(state) is then V(maintenance)), C(breaker) (the
    provider's circuit breaker state), C(stale), C(scanned_at) (RFC 3339 UTC)
    and, when stale, C(age_seconds), plus what the backend adds (C(arch) on libvirt).
  - VMs get C(kind) (V(vm)), C(name), C(uuid), C(provider), C(provider_type), C(provider_key),
    C(hypervisor), C(zone), C(power_state) (V(running), V(stopped), V(paused), V(suspended),
    V(unknown)), C(enabled) (true when running, for AWX's C(enabled_var)), C(vcpus), C(memory_mb),
    C(tags), C(metadata), C(addresses), C(guest) (what the guest agent or VMware Tools report -
    C(agent), C(agent_state), C(os), C(hostname)), C(stale), C(scanned_at) and, when stale, C(age_seconds), and with
    O(vm_details) C(interfaces) and C(disks). C(ansible_host) is their first address when the
    provider knows one (O(set_ansible_host)).
  - Groups, each name after O(group_prefix) - C(hypervisors), C(vms), C(provider_<name>),
    C(type_<type>), C(zone_<zone>), C(state_<state>) (hypervisors), C(power_<state>) and
    C(hypervisor_<name>) (VMs), C(stale) - plus those of O(groups) and O(keyed_groups).
author:
  - resilient.virt developers (!UNKNOWN)
requirements:
  - the Python libraries of the backends used, on the controller (libvirt-python, pyvmomi),
    and pluggy, tenacity
extends_documentation_fragment:
  - constructed
  - inventory_cache
options:
  plugin:
    description:
      - Marks this file as a source of this plugin.
      - A key of the file that is not an option of this plugin (a typo), or a boolean option
        that is not V(true) or V(false) (such as V(maybe)), fails the source before any provider
        is asked.
    required: true
    type: str
    choices: [resilient.virt.hypervisors]
  providers:
    description:
      - The providers to list, as the modules' O(providers) option - a dict of a name to the
        provider's settings (C(type) and the backend's options; see P(resilient.virt.provider#module)).
      - Give secrets with a template, such as
        V("{{ lookup('ansible.builtin.env', 'VCENTER_PASSWORD'\) }}") (an AWX credential then
        injects the variable), or as vault-encrypted values. They are never shown in a warning,
        an error or a host variable.
      - Settings an entry leaves unset come from the environment, as for the modules (AWX's
        VMware vCenter credential injects them) - vsphere C(host), C(username), C(password),
        C(port), C(validate_certs) from E(VMWARE_HOST), E(VMWARE_USER), E(VMWARE_PASSWORD),
        E(VMWARE_PORT), E(VMWARE_VALIDATE_CERTS); libvirt C(uri) from E(LIBVIRT_DEFAULT_URI).
      - When omitted, the one provider the environment names (E(VMWARE_HOST) set - a vsphere
        provider named C(vsphere); E(LIBVIRT_DEFAULT_URI) set - a libvirt provider named
        C(libvirt)), its settings all from the environment; with both set, or neither, the source
        fails and says so.
    type: dict
  state_store:
    description:
      - Where the circuit breakers and rate limits live, as for the modules (C(sqlite:///path)
        or C(redis://...)); the same store as the plays' shares their breakers with them.
      - Default C(~/.ansible/resilient_virt/state.db).
    type: str
    env:
      - name: RESILIENT_VIRT_STATE_STORE
  store_failure:
    description:
      - What the inventory does when the state store is unreachable, as for the modules
        (O(resilient.virt.vm#module:store_failure)).
      - V(open) lists the providers anyway, with circuit breakers and rate limits kept in memory for
        this run, and warns; V(closed) reports every provider as failed with C(Unavailable).
    type: str
    choices: [open, closed]
    default: open
    env:
      - name: RESILIENT_VIRT_STORE_FAILURE
  resilience:
    description:
      - Resilience settings for every provider (retries, breaker, rate limit, time limits of each
        call), as the modules' O(resilience) option; see the modules' documentation.
      - The deadline of each call is at most O(timeout) less a tenth (at most 1 s), so that a
        provider's own error (a refused port is V(Unavailable)) is reported, not the inventory's
        V(Timeout).
    type: dict
    default: {}
  timeout:
    description:
      - The longest one provider may take to answer, all calls and retries included, as a
        duration (V(30s), V(2m)) or seconds. A provider that takes longer gives no answer.
    type: str
    default: 30s
  concurrency:
    description: How many providers are asked at the same time.
    type: int
    default: 8
  include_vms:
    description: Add the VMs of every provider as hosts too.
    type: bool
    default: false
  vm_details:
    description:
      - Also read each VM's disks and interfaces, for the C(disks) and C(interfaces) variables.
      - Off by default because a vCenter's device lists are most of what listing its VMs costs.
      - On Proxmox VE it also reads C(uuid), C(metadata) and C(autostart), which live in each
        VM's configuration; without it a Proxmox provider answers with one request and leaves
        them empty.
    type: bool
    default: false
  vm_filters:
    description:
      - Which VMs the providers return, applied by the provider before it reads each VM's details
        where it can (libvirt filters names and power states from its domain list; vSphere reads
        every VM in one query and filters those). Keys as P(resilient.virt.vm_info#module)'s
        O(resilient.virt.vm_info#module:filters) - C(name) (a glob pattern), C(state), C(tags),
        C(hypervisor), C(az).
      - To limit a vCenter to one datacenter, set C(datacenter) in its provider settings.
    type: dict
    default: {}
  filters:
    description:
      - Jinja2 conditionals on a host's variables, evaluated here on the controller after the
        provider answered; a host is added only when all are true. An expression that fails
        leaves the host out with a warning (an error with O(strict)).
    type: list
    elements: str
    default: []
  hostnames:
    description:
      - Jinja2 expressions that name a host, tried in order; the first that gives a non-empty
        string wins. Characters other than letters, digits, C(_ . @ -) become C(_).
      - A name already taken in this source leaves the second host out with a warning (an error
        with O(strict)); add the provider to the name to keep both, as in the default's
        alternative C(resilient_virt_provider ~ '_' ~ resilient_virt_name).
    type: list
    elements: str
    default: ["resilient_virt_name"]
  prefix:
    description:
      - Start of every host variable this plugin sets (but C(ansible_host)) - letters, digits and
        C(_), starting with a letter or C(_), at most 64 characters; anything else fails the
        source.
      - With another prefix, the O(hostnames) expressions that name a variable of the default
        prefix (C(resilient_virt_name)) name the same variable of this one.
    type: str
    default: resilient_virt_
  group_prefix:
    description: Start of the name of every group this plugin makes itself.
    type: str
    default: ""
  set_ansible_host:
    description: Set C(ansible_host) of a VM to its first address, when the provider knows one.
    type: bool
    default: true
  max_stale_age:
    description:
      - With the inventory cache on (O(cache)), how long a provider that gives no answer keeps
        its last good answer, marked stale with its age - whatever O(cache_timeout) is. The last
        good answers are kept in the state store (O(state_store)), so they outlive the cache.
      - A duration (V(12h), V(30m)) or seconds; V(0) serves no stale answer.
    type: str
    default: 24h
  fail_on_errors:
    description:
      - Fail the inventory when a provider gives no answer, instead of warning (a stale answer
        from the cache counts as no answer). O(strict) does the same.
    type: bool
    default: false
"""

EXAMPLES = r"""
# Two files (each is one source; replace the providers' settings with yours).
# lab.hypervisors.yml: two libvirt hosts and a vCenter, VMs included, grouped by zone and tag
plugin: resilient.virt.hypervisors
providers:
  hv1:
    type: libvirt
    uri: qemu+ssh://root@hv1.example.com/system
    az: zone-a
  hv2:
    type: libvirt
    uri: qemu+ssh://root@hv2.example.com/system
    az: zone-b
  vc:
    type: vsphere
    host: vcenter.example.com
    username: inventory@vsphere.local
    password: "{{ lookup('ansible.builtin.env', 'VCENTER_PASSWORD') }}"
include_vms: true
timeout: 20s
keyed_groups:
  - key: resilient_virt_tags
    prefix: tag
compose:
  maintenance_window: "'sunday' if resilient_virt_zone == 'zone-a' else 'saturday'"

---
# running.hypervisors.yml: only the running VMs whose name starts with web-, cached for AWX
plugin: resilient.virt.hypervisors
providers:
  hv1:
    type: libvirt
    uri: qemu+ssh://root@hv1.example.com/system
include_vms: true
vm_filters:
  name: "web-*"
  state: running
filters:
  - resilient_virt_kind == 'vm'
hostnames:
  - resilient_virt_provider ~ '_' ~ resilient_virt_name
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: /var/tmp/resilient_virt_inventory
cache_timeout: 600
max_stale_age: 12h
# in AWX, set the source's "enabled_var" to resilient_virt_enabled (with "enabled_value" True)
"""

from ansible.errors import AnsibleParserError
from ansible.inventory.group import to_safe_group_name
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

import os
import re

from ansible_collections.resilient.virt.plugins.module_utils._convert import parse_duration, to_bool
from ansible_collections.resilient.virt.plugins.module_utils._input import shown, text_problem
from ansible_collections.resilient.virt.plugins.module_utils._inventory.hosts import (
    host_records, safe_host_name, summary)
from ansible_collections.resilient.virt.plugins.module_utils._inventory.scan import (
    FATAL_ERRORS, check_vm_filters, failed_answers, scan, with_cache, with_maintenance)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils._state.fallback import policy_store
from ansible_collections.resilient.virt.plugins.module_utils._state.store import check_url, open_store
from ansible_collections.resilient.virt.plugins.module_utils.errors import VirtError
from ansible_collections.resilient.virt.plugins.module_utils._masking import (
    environment_secrets, scrub, secret_values)
from ansible_collections.resilient.virt.plugins.module_utils.providers._environment import (
    environment_catalog)

CACHE_VERSION = 1
_VARIABLE_START = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
DEFAULT_PREFIX = "resilient_virt_"
STALE_NAMESPACE = "inventory_answers"  # the last good answers of each source, in the state store


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "resilient.virt.hypervisors"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(("hypervisors.yml", "hypervisors.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        config = self._read_config_data(path)
        self._secrets = []
        self._check_source(config)
        try:
            providers = self.templar.template(self.get_option("providers"))
        except Exception as exc:  # noqa: BLE001 - a template of the user's: say which option
            raise AnsibleParserError("providers: a template could not be rendered: %s" % exc) from None
        self._secrets = secret_values(providers) + environment_secrets(os.environ)
        try:
            if providers is None:  # AWX credentials inject the settings
                providers = environment_catalog(os.environ)
            self._populate(path, providers, cache)
        except VirtError as err:
            raise AnsibleParserError("%s: %s" % (err.type, self._scrub(err.message))) from None

    def _check_source(self, config):
        """Refuse, before any provider is asked, what Ansible itself lets through: an option this
        plugin does not have (a typo), a boolean that is not one (``include_vms: maybe`` would be
        false), a ``prefix`` that cannot start a variable name."""
        known = dict((key, {}) for key in self._options)
        known.update(getattr(self, "option_definitions", None) or {})
        problems = []
        for key in sorted(set(config) - set(known) - {"plugin"}, key=str):
            problems.append("%s: not an option of %s (a typo?); known options: %s" % (
                key, self.NAME, ", ".join(sorted(known))))
        for key, definition in sorted(known.items()):
            if (definition or {}).get("type") in ("bool", "boolean") and key in config and \
                    config[key] is not None and not isinstance(config[key], bool) and \
                    "{{" not in str(config[key]):  # a template is Ansible's to render
                try:
                    to_bool(config[key])
                except ValueError:
                    problems.append("%s: %s is not a boolean; use true or false" % (
                        key, shown(config[key])))
        prefix = self.get_option("prefix")
        if not isinstance(prefix, str) or not re.match(_VARIABLE_START, prefix):
            problems.append("prefix: %s cannot start a variable name; use letters, digits and '_', "
                            "starting with a letter or '_' (default resilient_virt_)" % shown(prefix))
        group_prefix = self.get_option("group_prefix")
        if group_prefix:
            problem = text_problem(group_prefix, 64, "a group name prefix")
            if problem:
                problems.append("group_prefix: %s" % problem)
        if problems:
            raise AnsibleParserError("InvalidSpec: " + "; ".join(problems))

    # -- answers -------------------------------------------------------------------------------
    def _populate(self, path, providers, cache):
        use_cache = bool(self.get_option("cache"))
        key = self.get_cache_key(path)
        stored = None
        if use_cache:
            try:
                stored = self._cache[key]
            except KeyError:
                stored = None
        if not isinstance(stored, dict) or stored.get("version") != CACHE_VERSION or \
                sorted(stored.get("answers") or {}) != sorted(str(name) for name in providers):
            stored = None
        if use_cache and cache and stored is not None:
            answers = [stored["answers"][name] for name in sorted(stored["answers"])]
        else:
            answers, store = self._scan(providers)
            max_age = self._max_stale_age()
            last_good = self._last_good(store, key, providers) if use_cache and max_age else None
            answers, keep = with_cache(answers, last_good or (stored["answers"] if stored else None),
                                       max_age=max_age)
            if use_cache:
                self._cache[key] = {"version": CACHE_VERSION, "answers": keep}
                if max_age:
                    self._keep_good(store, key, keep)
        self._report(answers)
        self._add(answers)

    def _max_stale_age(self):
        return parse_duration(self.get_option("max_stale_age"), "max_stale_age")

    def _last_good(self, store, key, providers):
        """The last good answer of each provider of this source, from the state store (None when
        it has none or cannot be read: the inventory cache's answers serve then)."""
        if store is None:
            return None
        try:
            record = store.get(STALE_NAMESPACE, key)
        except VirtError:
            return None
        answers = (record or {}).get("answers")
        if not isinstance(answers, dict):
            return None
        return dict((name, answer) for name, answer in answers.items() if name in providers)

    def _keep_good(self, store, key, keep):
        """Keep the good answers of this run (and the older ones it served stale) in the state
        store, where they outlive the cache's timeout, for O(max_stale_age)."""
        if store is None or not keep:
            return
        try:
            store.update(STALE_NAMESPACE, key, lambda old, now: ({"answers": keep}, None))
        except VirtError as err:
            self.display.warning("the last good answers of the providers were not kept in the "
                                 "state store (%s: %s); a provider that is down later is served "
                                 "from the inventory cache only" % (err.type, self._scrub(err.message)))

    def _scan(self, providers):
        timeout = parse_duration(self.get_option("timeout"), "timeout")
        if not timeout:
            raise AnsibleParserError("timeout: give the longest a provider may take, such as 30s")
        check_url(self.get_option("state_store"), os.environ)
        concurrency = self.get_option("concurrency")
        if concurrency < 1:
            raise AnsibleParserError("concurrency: %d is not a number of providers; use 1 or more"
                                     % concurrency)
        vm_filters = self.get_option("vm_filters") or {}
        check_vm_filters(vm_filters)
        resilience = dict(self.get_option("resilience") or {})
        stores = dict(state_store=self.get_option("state_store"),
                      store_failure=self.get_option("store_failure"))
        settings = resolve_settings(resilience, **stores)
        # the calls end a little before the inventory stops waiting, so that a provider's own
        # error (a refused port: Unavailable) is reported rather than the inventory's Timeout
        limit = timeout - min(1.0, 0.1 * timeout)
        if settings.deadline is None or settings.deadline > limit:
            settings = resolve_settings(dict(resilience, deadline=limit), **stores)
        fell_back = []
        try:
            store = policy_store(lambda: open_store(settings.state_store, timeout=settings.store_timeout),
                                 settings, fell_back.append)
        except VirtError as err:
            if err.type == "InvalidSpec":
                raise
            return failed_answers(providers, err), None
        answers = scan(providers, lambda name: settings, store,
                       include_vms=self.get_option("include_vms"), vm_filters=vm_filters,
                       concurrency=concurrency, timeout=timeout,
                       details=self.get_option("vm_details"))
        for warning in fell_back:
            self.display.warning(self._scrub(warning))
        return with_maintenance(answers, store), store

    def _scrub(self, text):
        return scrub(text, self._secrets)

    def _report(self, answers):
        fatal = [a for a in answers if not a["ok"] and a["error"]["type"] in FATAL_ERRORS]
        failed = [a for a in answers if a.get("stale") or not a["ok"]]
        for answer in fatal:
            raise AnsibleParserError("providers.%s: %s: %s" % (
                answer["name"], answer["error"]["type"], self._scrub(answer["error"]["message"])))
        lines = []
        for answer in failed:
            error = "%s: %s" % (answer["error"]["type"], self._scrub(answer["error"]["message"]))
            if answer.get("stale"):
                lines.append("provider %s gave no answer (%s); its hosts come from the inventory "
                             "cache, %gs old" % (answer["name"], error, answer["age_seconds"]))
            else:
                lines.append("provider %s gave no answer (%s); its hosts are missing from the "
                             "inventory" % (answer["name"], error))
        if lines and (self.get_option("fail_on_errors") or self.get_option("strict")):
            raise AnsibleParserError("; ".join(lines))
        for answer in answers:
            if answer["ok"] and not answer.get("stale"):
                lines.extend("provider %s: %s" % (answer["name"], self._scrub(warning))
                             for warning in answer.get("warnings") or ())
        for line in lines:
            self.display.warning(line)

    # -- hosts and groups ----------------------------------------------------------------------
    def _add(self, answers):
        prefix, strict = self.get_option("prefix"), self.get_option("strict")
        taken = {}
        for record in host_records(answers, prefix, self.get_option("include_vms"),
                                   self.get_option("set_ansible_host"),
                                   self.get_option("vm_details")):
            variables = record["vars"]
            what = "%s %s of provider %s" % (
                record["kind"], record["name"], variables[prefix + "provider"])
            if not self._passes(variables, what, strict):
                continue
            name = self._host_name(variables, what, strict)
            if name is None:
                continue
            name = safe_host_name(name)
            if name in taken:
                message = ("host name %s of the %s is taken by the %s; add the provider to "
                           "hostnames (e.g. resilient_virt_provider ~ '_' ~ resilient_virt_name)"
                           % (name, what, taken[name]))
                if strict:
                    raise AnsibleParserError(message)
                self.display.warning(message + "; it is left out")
                continue
            taken[name] = what
            self._add_host(name, record, variables, strict)
        providers, unreachable = summary(answers)
        self.inventory.set_variable("all", prefix + "provider_answers", providers)
        self.inventory.set_variable("all", prefix + "unreachable_providers", unreachable)

    def _passes(self, variables, what, strict):
        for condition in self.get_option("filters") or []:
            try:
                if not self._compose(condition, variables):
                    return False
            except Exception as exc:  # noqa: BLE001 - a user's expression: strict decides
                message = "filter %r failed for the %s: %s" % (condition, what, exc)
                if strict:
                    raise AnsibleParserError(message) from exc
                self.display.warning(message + "; it is left out")
                return False
        return True

    def _host_name(self, variables, what, strict):
        problems = []
        hostnames = self.get_option("hostnames")
        prefix = self.get_option("prefix")
        if prefix != DEFAULT_PREFIX:  # the default names hosts by the default prefix's variable
            hostnames = [prefix + e[len(DEFAULT_PREFIX):] if e.startswith(DEFAULT_PREFIX) and
                         e[len(DEFAULT_PREFIX):].isidentifier() else e for e in hostnames]
        for expression in hostnames:
            if expression in variables:  # a bare variable name: no need for a template
                value = variables[expression]
            else:
                try:
                    value = self._compose(expression, variables)
                except Exception as exc:  # noqa: BLE001 - a user's expression: try the next one
                    problems.append("%r: %s" % (expression, exc))
                    continue
            if value not in (None, "") and not isinstance(value, (dict, list)):
                return str(value)
        message = "no host name for the %s: every hostnames expression gave nothing%s" % (
            what, " (%s)" % "; ".join(problems) if problems else "")
        if strict:
            raise AnsibleParserError(message)
        self.display.warning(message + "; it is left out")
        return None

    def _add_host(self, name, record, variables, strict):
        group_prefix = self.get_option("group_prefix")
        self.inventory.add_host(name)
        for key, value in variables.items():
            self.inventory.set_variable(name, key, value)
        for group in record["groups"]:
            group = self.inventory.add_group(to_safe_group_name(group_prefix + group, force=True,
                                                                silent=True))
            self.inventory.add_child(group, name)
        self._set_composite_vars(self.get_option("compose"), variables, name, strict=strict)
        self._add_host_to_composed_groups(self.get_option("groups"), variables, name,
                                          strict=strict)
        self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, name,
                                       strict=strict)
