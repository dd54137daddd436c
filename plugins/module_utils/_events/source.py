# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``hypervisor_events`` event source without Event-Driven Ansible: arguments, threads.

:func:`check_args` reads the source's arguments (:data:`ARGUMENTS`) and names every bad one;
:class:`HypervisorEvents` opens one provider per entry of ``providers`` (a provider object of
its own each, with the policy of the resilience settings), starts a watcher thread per provider
(``watcher.py``) and runs the announcer (``announcer.py``) in the calling thread until told to
stop.
"""
from ansible_collections.resilient.virt.plugins.module_utils._backup.records import owner_id
from ansible_collections.resilient.virt.plugins.module_utils._events.announcer import Announcer
from ansible_collections.resilient.virt.plugins.module_utils._events.watcher import (
    WATCHED_TYPES, ProviderWatcher)
from ansible_collections.resilient.virt.plugins.module_utils._input import text_problem
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils._state.lease import Lease
from ansible_collections.resilient.virt.plugins.module_utils._state.store import check_url, open_store
from ansible_collections.resilient.virt.plugins.module_utils.errors import field_errors
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import open_provider

__all__ = ("ARGUMENTS", "check_args", "HypervisorEvents")

# name -> (default, what it is)
ARGUMENTS = {
    "providers": (None, "the providers to watch: {name: provider settings}, as the modules' "
                        "providers option takes them"),
    "state_store": (None, "the state store URL (default: $RESILIENT_VIRT_STATE_STORE, else the "
                          "modules' default SQLite file); every instance of a group must share it"),
    "resilience": (None, "resilience settings, as the modules' resilience option: the backoff "
                         "between reconnects, the circuit breaker, timeout_validate per connect"),
    "group": ("hypervisor_events", "the name of the lease: instances of one group announce each "
                                   "change once"),
    "lease_seconds": (15.0, "how long the lease lasts; renewed every third of it"),
    "keepalive_interval": (5, "seconds between libvirt keepalive messages; for vSphere, the "
                              "longest a wait for host updates lasts"),
    "keepalive_count": (3, "keepalive messages without an answer before the connection is "
                           "closed as unreachable"),
}
_NUMBERS = {"lease_seconds": (1.0, 3600.0), "keepalive_interval": (1, 600),
            "keepalive_count": (1, 100)}


def _number_problem(name, value):
    low, high = _NUMBERS[name]
    integer = isinstance(low, int)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            (integer and not isinstance(value, int)) or not low <= value <= high:
        return "%s: %r must be %s from %s to %s" % (
            name, value, "a whole number" if integer else "a number", low, high)
    return None


def check_args(args):
    """The arguments with their defaults (an argument given as None has its default);
    InvalidSpec naming every bad one and its fix."""
    args = dict(args or {})
    problems = []
    for name in sorted(set(args) - set(ARGUMENTS), key=str):
        problems.append({"path": str(name), "message": "%s is not an argument of "
                         "hypervisor_events; the arguments are %s"
                         % (name, ", ".join(ARGUMENTS))})
    # null takes the default: a rulebook passes its optional variables as `default(none)`
    values = {name: default if args.get(name) is None else args[name]
              for name, (default, _doc) in ARGUMENTS.items()}
    providers = values["providers"]
    if not isinstance(providers, dict) or not providers:
        problems.append({"path": "providers", "message": "providers is required: a dict such as "
                         "{kvm1: {type: libvirt, uri: 'qemu+ssh://root@kvm1/system'}}"})
    else:
        for name, entry in sorted(providers.items(), key=lambda item: str(item[0])):
            path = "providers.%s" % name
            problem = text_problem(name, what="a provider name") if isinstance(name, str) else \
                "must be named by a string"
            if problem:
                problems.append({"path": "providers", "message": "entry %s" % problem})
            elif not isinstance(entry, dict):
                problems.append({"path": path, "message": "must be a dict of provider settings "
                                 "such as {type: libvirt, uri: 'qemu:///system'}"})
            elif entry.get("type") not in WATCHED_TYPES:
                problems.append({"path": path + ".type", "message": "%r: the events of %s "
                                 "providers are watched; watch the others with their own "
                                 "tools" % (entry.get("type"), ", ".join(WATCHED_TYPES))})
    for name in _NUMBERS:
        problem = _number_problem(name, values[name])
        if problem:
            problems.append({"path": name, "message": problem})
    group = values["group"]
    if not isinstance(group, str) or text_problem(group, what="a group name"):
        problems.append({"path": "group", "message": "%r: give a name such as "
                         "hypervisor_events" % (group,)})
    if problems:
        raise field_errors(problems, what="hypervisor_events")
    check_url(values["state_store"])
    return values


class HypervisorEvents:
    """The event source for ``args``: :meth:`run` announces through ``emit(event)``."""

    def __init__(self, args, emit, log, environ=None):
        self.args = check_args(args)
        self.settings = resolve_settings(self.args["resilience"], environ=environ,
                                         state_store=self.args["state_store"])
        self.source = owner_id()
        self.emit = emit
        self.log = log
        self.environ = environ

    def store(self):
        """The state store, opened again after a failure."""
        return open_store(self.settings.state_store, environ=self.environ,
                          timeout=self.settings.store_timeout)

    def run(self, stopping):
        """Watch and announce until ``stopping`` (a threading.Event) is set."""
        guarded, watchers = [], []
        try:
            for name, entry in sorted(self.args["providers"].items()):
                config = dict(entry)
                config.setdefault("name", name)
                guarded.append(open_provider(config, self.settings, self.store(),
                                             environ=self.environ))
            providers = {g.key: {"name": g.provider.config.get("name") or g.key, "key": g.key}
                         for g in guarded}
            lease = Lease(self.store(), self.args["group"], self.source,
                          self.args["lease_seconds"])
            announcer = Announcer(providers, self.store, lease, self.args["group"], self.source,
                                  self.emit, self.log)
            for provider in guarded:
                watchers.append(ProviderWatcher(
                    provider, self.settings, announcer.report, stopping,
                    self.args["keepalive_interval"], self.args["keepalive_count"]))
            for watcher in watchers:
                watcher.start()
            announcer.run(stopping, self.args["lease_seconds"] / 3.0)
        finally:
            stopping.set()
            for watcher in watchers:
                watcher.thread.join(5.0)
