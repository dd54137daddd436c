# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ask every provider for its hypervisors (and VMs) at once, each within its own time limit.

:func:`scan` runs one job per provider on at most ``concurrency`` threads. A job opens the
provider through the resilience policy (its circuit breaker, rate limit, retries and attempt
timeouts, with ``timeout`` as the deadline of each call) and lists its hypervisors, with its VMs
when asked (``list_hypervisors_and_vms``: one request on a backend that can); the whole job is
cut off after ``timeout`` seconds whatever happens inside, so one provider never costs more than
that; a job cut off while retrying answers with the error it was
retrying. The answer of a provider is a JSON-able dict (see
:func:`_answer`); a failed one carries its error instead of hosts.

:func:`with_cache` puts a provider's last good answer, marked stale with its age, in place of a
failed answer, and returns what to keep as the new cache.
"""
import copy
import json
import time

from ansible_collections.resilient.virt.plugins.module_utils._masking import scrub, secret_values
from ansible_collections.resilient.virt.plugins.module_utils._migration.maintenance import (
    MAINTENANCE, read_marks, with_marks)
from ansible_collections.resilient.virt.plugins.module_utils._required_libraries import BACKENDS, importable
from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import run_with_timeout
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Timeout, VirtError, classify, field_error, field_errors)
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import open_provider
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import FILTER_KEYS

__all__ = ("scan", "failed_answers", "with_cache", "with_maintenance", "check_vm_filters",
           "FATAL_ERRORS")

# Errors about the configuration itself: no cached answer hides those, they fail the inventory.
FATAL_ERRORS = ("InvalidSpec", "NotSupported")


def _answer(name, started, **fields):
    """A provider's answer: name, type, key, ok, error, hypervisors, vms, breaker, seconds,
    scanned_at (epoch seconds), stale (False: this run's answer), warnings (what the provider
    told the user, such as a node it could not read)."""
    answer = {"name": name, "type": None, "key": None, "ok": False, "error": None,
              "hypervisors": [], "vms": [], "breaker": None, "stale": False, "warnings": [],
              "seconds": round(time.monotonic() - started, 3), "scanned_at": time.time()}
    answer.update(fields)
    return answer


def _error(err):
    return {"type": err.type, "message": err.message}


def _breaker_state(provider):
    try:
        return provider.policy.breaker.snapshot()["state"]
    except Exception:  # noqa: BLE001 - the breaker's state is a courtesy in the answer
        return None


def _scan_one(name, config, settings, store, include_vms, vm_filters, timeout, details):
    """The answer of one provider (errors included); runs in a worker thread, which also closes
    the provider (a logout is a call too: the providers log out at the same time)."""
    box = {}
    try:
        return _ask(name, config, settings, store, include_vms, vm_filters, timeout, details, box)
    finally:
        if "provider" in box:
            try:
                box["provider"].close()
            except Exception:  # noqa: BLE001 - closing must not change the answer
                pass


def _ask(name, config, settings, store, include_vms, vm_filters, timeout, details, box):
    """The answer of one provider; ``box["provider"]`` is the provider once opened."""
    started = time.monotonic()

    def work():
        provider = box["provider"] = open_provider(config, settings, store)
        if not include_vms:
            return provider.list_hypervisors(), []
        if details:
            return provider.list_hypervisors(), provider.list_vms(vm_filters or None)
        both = provider.list_hypervisors_and_vms(vm_filters or None)
        return both["hypervisors"], both["vms"]

    try:
        hypervisors, vms = run_with_timeout(work, timeout, "inventory of provider %s" % name)
    except Exception as exc:  # noqa: BLE001 - every failure becomes this provider's answer
        err = exc if isinstance(exc, VirtError) else classify(exc)
        provider = box.get("provider")
        if isinstance(err, Timeout) and provider is not None:
            provider.provider.abandon()  # its call may still hang: never wait on it
            err = _cut_off(provider, timeout)
        err.message = scrub(err.message, secret_values(config))
        return _answer(name, started, type=config.get("type"),
                       key=None if provider is None else provider.key, error=_error(err),
                       breaker=None if provider is None else _breaker_state(provider))
    provider = box["provider"]
    # plain JSON types only (a backend may hand out its library's int and str subclasses)
    hypervisors, vms = json.loads(json.dumps([hypervisors, vms], default=str))
    return _answer(name, started, type=provider.type_name, key=provider.key, ok=True,
                   hypervisors=hypervisors, vms=vms, breaker=_breaker_state(provider),
                   warnings=[scrub(w, secret_values(config)) for w in provider.warnings])


def _cut_off(provider, timeout):
    """The error of a provider cut off at the inventory's timeout: the error its call was
    retrying when time ran out (a refused port stays Unavailable), else a Timeout."""
    retrying = provider.policy.retrying
    if retrying is not None:
        err = copy.copy(retrying)
        err.message = "%s (still failing when the inventory's timeout of %gs ran out)" % (
            retrying.message, timeout)
        return err
    return Timeout("no answer within the inventory's timeout of %gs" % timeout,
                   details={"timeout": timeout})


def _named(config, name):
    """The provider settings with the catalog name as its ``name`` unless it sets one."""
    config = dict(config)
    config.setdefault("name", str(name))
    return config


def _import_backends(providers):
    """Import the libraries of the providers' backends here, before the workers start: several
    threads importing one library at once can see it half initialised."""
    for config in providers.values():
        for library in BACKENDS.get(config.get("type"), ()):
            importable(library)


def scan(providers, settings_for, store, include_vms=False, vm_filters=None, concurrency=8,
         timeout=30.0, details=False):
    """One answer per entry of ``providers`` (name -> provider settings), in name order.

    ``settings_for(name)`` gives the ResilienceSettings of a provider; ``store`` is the state
    store of the breakers. Providers are asked ``concurrency`` at a time; each answer comes
    within ``timeout`` seconds. VMs come with the hypervisors from ``list_hypervisors_and_vms``
    unless ``details`` asks for their disks and interfaces too (``list_vms``).
    """
    from concurrent.futures import ThreadPoolExecutor

    if not isinstance(providers, dict) or not providers:
        raise field_error("providers", "needs at least one provider: a dict of name to provider "
                          "settings, such as {kvm1: {type: libvirt, uri: 'qemu+ssh://kvm1/system'}}")
    for name, config in providers.items():
        if not isinstance(config, dict):
            raise field_error("providers.%s" % name, "must be a dict of provider settings such as "
                              "{type: libvirt, uri: 'qemu:///system'}, not %s" % type(config).__name__)
    names = sorted(providers, key=str)
    _import_backends(providers)
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(names)))) as pool:
        jobs = [pool.submit(_scan_one, name, _named(providers[name], name), settings_for(name),
                            store, include_vms, vm_filters, timeout, details) for name in names]
        return [job.result() for job in jobs]


def failed_answers(providers, err):
    """An answer for every provider, each failed with ``err`` (the state store could not open)."""
    started = time.monotonic()
    return [_answer(str(name), started, type=(providers[name] or {}).get("type")
                    if isinstance(providers[name], dict) else None, error=_error(err))
            for name in sorted(providers, key=str)]


def with_cache(answers, cached, now=None, max_age=None):
    """(answers to use, cache to keep). A failed answer whose provider has a good answer in
    ``cached`` (name -> answer) at most ``max_age`` seconds old (None: any age) is replaced by
    that one, marked ``stale`` with its ``age_seconds`` and this run's ``error``; configuration
    errors are never hidden this way. The new cache holds the good answers of this run and the
    cached ones it used, for the providers of this run only."""
    now = time.time() if now is None else now
    cached = cached if isinstance(cached, dict) else {}
    used, keep = [], {}
    for answer in answers:
        name = answer["name"]
        old = cached.get(name)
        young = isinstance(old, dict) and isinstance(old.get("scanned_at"), (int, float)) and (
            max_age is None or now - old["scanned_at"] <= max_age)
        if answer["ok"]:
            used.append(answer)
            keep[name] = answer
        elif young and old.get("ok") and \
                (answer["error"] or {}).get("type") not in FATAL_ERRORS:
            stale = dict(old, stale=True, error=answer["error"], breaker=answer["breaker"],
                         age_seconds=round(max(0.0, now - old["scanned_at"]), 1))
            used.append(stale)
            keep[name] = old
        else:
            used.append(answer)
    return used, keep


def check_vm_filters(vm_filters):
    """InvalidSpec naming ``vm_filters.<key>`` for a key the providers do not know."""
    if vm_filters is None:
        return
    if not isinstance(vm_filters, dict):
        raise field_error("vm_filters", "must be a dict such as {name: 'web-*', state: running}")
    bad = sorted(set(vm_filters) - set(FILTER_KEYS))
    if bad:
        raise field_errors([{"path": "vm_filters.%s" % key,
                             "message": "unknown filter; known: %s" % ", ".join(FILTER_KEYS)}
                            for key in bad])


def with_maintenance(answers, store):
    """``answers`` with each hypervisor's ``maintenance`` (True when its provider says so, or
    the ``hypervisor`` module marked it in ``store``; then its state is ``maintenance`` too).
    A store that cannot be read leaves the providers' word."""
    try:
        marks = read_marks(store) if store is not None else {}
    except VirtError:
        marks = {}
    for answer in answers:
        hypervisors = with_marks(answer.get("hypervisors") or [], answer.get("key"), marks)
        answer["hypervisors"] = [dict(hv, maintenance=hv.get("state") == MAINTENANCE)
                                 for hv in hypervisors]
    return answers
