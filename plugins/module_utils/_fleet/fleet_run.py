# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One fleet run: decide what each VM needs, do it in parallel rounds, record each VM's status.

1. The status records of the owner are read in one call; :func:`status.decide` sorts every
   listed VM into reconcile, verify (a full run), unchanged or deferred. An incremental run makes
   no provider call for a VM whose spec is unchanged and whose last reconcile succeeded.
2. A provider is listed once (one call instead of one per VM) when the run verifies its VMs,
   prunes, or has at least :data:`LIST_AT` of its VMs to reconcile; otherwise each VM is read on
   its own. With ``prune``, the VMs to delete are known, and checked against ``max_prune``,
   before anything changes.
3. The work runs in rounds of ``round_size`` VMs on ``concurrency`` threads, at most
   ``per_provider`` at a time on one provider; after each round the statuses of its VMs are
   written, so a run killed midway loses at most one round of status. A VM is brought to its
   state by the ``vm`` module's own reconcile (look before acting, plan afresh when another task
   moved it), so a VM created by a killed run is found, never created twice.
4. A provider whose circuit breaker is open fails its VMs at once with BreakerOpen: they are
   deferred, their status unchanged, and the other providers' VMs proceed. They get one more
   pass at the end of the run, for a breaker that refused them only while its probe was in
   flight and has closed since.
"""
import time
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.resilient.virt.plugins.module_utils._fleet import prune as pruning
from ansible_collections.resilient.virt.plugins.module_utils._fleet import status as statuses
from ansible_collections.resilient.virt.plugins.module_utils._fleet.pool import ProviderPool
from ansible_collections.resilient.virt.plugins.module_utils._migration.maintenance import (
    refuse_placement)
from ansible_collections.resilient.virt.plugins.module_utils._vm.converge import (
    UNREAD, describe_or_none, diff_view, reconcile)
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    BreakerOpen, Conflict, StoreUnavailable, VirtError, classify)
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import OWNER_KEY

__all__ = ("LIST_AT", "Options", "Outcome", "FleetRun")

LIST_AT = 4  # VMs to reconcile on one provider from which one listing beats a read per VM
OBSERVED = ("state", "vcpus", "memory_mb", "hypervisor", "uuid")
_OUTCOME_OF = (("create", "created"), ("delete", "deleted"), ("reconfigure", "updated"),
               ("start", "started"), ("reboot", "started"), ("shutdown", "stopped"))


class Options:
    """How a run works; see the vm_fleet module's options of the same names."""

    def __init__(self, owner, full=False, retry_now=False, prune=False, max_prune=None,
                 backoff=None, concurrency=16, per_provider=4, round_size=50, force=False,
                 shutdown_timeout=None, check_mode=False):
        self.owner = owner
        self.full = full
        self.retry_now = retry_now
        self.prune = prune
        self.max_prune = max_prune
        self.backoff = backoff or statuses.Backoff(30, 3600, 5)
        self.concurrency = concurrency
        self.per_provider = per_provider
        self.round_size = round_size
        self.force = force
        self.shutdown_timeout = shutdown_timeout
        self.check_mode = check_mode


class Outcome:
    """What happened to one VM: ``outcome`` (created, updated, started, stopped, deleted, pruned,
    unchanged, failed, deferred), ``actions``, ``out_of_sync``, ``error`` (VirtError or None),
    ``decision``, ``before``/``after`` views, ``observed`` (the VM's view or None), ``record``
    (the status to write, None to keep the old one) and ``restart_required``."""

    def __init__(self, vm, decision, outcome, actions=(), error=None, before=None, after=None,
                 observed=None, out_of_sync=False, restart_required=False):
        self.vm = vm
        self.decision = decision
        self.outcome = outcome
        self.actions = list(actions)
        self.error = error
        self.before = before
        self.after = after
        self.observed = observed
        self.out_of_sync = out_of_sync
        self.restart_required = restart_required
        self.record = None


def observe(vm):
    """The part of a VM a status record keeps and a result shows (None: absent)."""
    return None if vm is None else dict((field, vm.get(field)) for field in OBSERVED)


def _failure(vm, decision, exc, observed=None):
    """The Outcome of a VM whose work raised ``exc``: deferred for an open breaker (nothing was
    tried), else failed."""
    err = exc if isinstance(exc, VirtError) else classify(exc)
    if isinstance(err, BreakerOpen):
        return Outcome(vm, decision, "deferred", error=err, observed=observed)
    return Outcome(vm, decision, "failed", [err.operation] if err.operation else (), error=err)


def _outcome_of(actions):
    for verb, outcome in _OUTCOME_OF:
        if verb in actions:
            return outcome
    return "unchanged"


class _Pruned:
    """A VM to prune, shaped like a DesiredVM for the worker and the results."""

    def __init__(self, provider, vm):
        self.provider = provider
        self.name = vm["name"]
        self.id = "%s/%s" % (provider, vm["name"])
        self.state = "absent"
        self.current = vm


class FleetRun:
    """Run ``fleet`` (DesiredVMs) with ``options``; ``store`` holds the statuses;
    ``open_provider(config)`` opens a GuardedProvider; ``resolve_ref(name)`` gives the provider
    dict of a ``providers`` entry, or None: a prune also looks at the providers where this
    owner's VMs were recorded, when they can still be resolved."""

    def __init__(self, fleet, options, store, open_provider, resolve_ref=None, clock=time.time):
        self.fleet = fleet
        self.options = options
        self.store = store
        self.clock = clock
        self.resolve_ref = resolve_ref
        self.configs = dict((vm.provider, vm.config) for vm in fleet)
        self.pool = ProviderPool(open_provider, self.configs, options.per_provider)
        self.listings = {}       # provider key -> {name: VM dict} or VirtError
        self.read = {}           # the status records as read at the start
        self.store_error = None  # StoreUnavailable that stopped the run after a round
        self.warnings = []

    # -- reading -------------------------------------------------------------------------------
    def records(self):
        return self.store.items(statuses.NAMESPACE, statuses.owner_prefix(self.options.owner))

    def _list(self, key):
        try:
            with self.pool.provider(key) as provider:
                return key, provider.list_vm_summaries()
        except VirtError as err:
            return key, err
        except Exception as exc:  # noqa: BLE001 - a backend bug fails its provider, not the run
            return key, classify(exc)

    def list_providers(self, keys, executor):
        for key, answer in executor.map(self._list, sorted(keys)):
            self.listings[key] = answer if isinstance(answer, VirtError) else dict(
                (vm["name"], vm) for vm in answer)

    def _current(self, vm):
        """The VM as listed (None: not there), UNREAD when not listed, or the listing's error."""
        listing = self.listings.get(vm.provider)
        if listing is None:
            return UNREAD
        if isinstance(listing, VirtError):
            return listing
        return listing.get(vm.name)

    # -- doing -----------------------------------------------------------------------------------
    def _reconcile(self, vm, decision):
        options = self.options
        current = self._current(vm)
        if isinstance(current, VirtError):  # its provider could not be listed
            return _failure(vm, decision, current)
        try:
            with self.pool.provider(vm.provider) as provider:
                if current is UNREAD:
                    current = describe_or_none(provider, vm.name)
                self._check_owner(vm, current)
                # the owner marker goes on a VM this run creates, or one the entry adopts;
                # never on one that exists (or that another task creates meanwhile) otherwise
                result = reconcile(provider, vm.name, vm.state, vm.wanted_spec(options.owner),
                                   check_mode=options.check_mode, force=options.force,
                                   shutdown_timeout=options.shutdown_timeout, current=current,
                                   create_metadata=vm.marker(options.owner),
                                   before_create=lambda spec, key=provider.key: refuse_placement(
                                       lambda: self.store, key, spec, self.warnings))
        except Exception as exc:  # noqa: BLE001 - one VM's failure is its result, not the run's
            return _failure(vm, decision, exc)
        actions = result["actions"]
        predicted = options.check_mode and actions
        return Outcome(vm, decision, _outcome_of(actions), actions, before=result["before"],
                       after=result["after"],
                       observed=result["after"] if predicted else observe(result["vm"]),
                       out_of_sync=decision.kind == statuses.VERIFY and bool(actions),
                       restart_required=bool(result.get("restart_required")))

    def _check_owner(self, vm, current):
        other = ((current or {}).get("metadata") or {}).get(OWNER_KEY)
        if other is not None and str(other) != self.options.owner:
            raise Conflict("%s belongs to the fleet of owner %r (metadata %s); a VM is managed "
                           "by one fleet only: remove it from this list or from the other"
                           % (vm.id, other, OWNER_KEY))

    def _prune(self, target, decision):
        if self.options.check_mode:
            return Outcome(target, decision, "pruned", ["delete"], before=diff_view(target.current),
                           after={"state": "absent"})
        try:
            with self.pool.provider(target.provider) as provider:
                result = reconcile(provider, target.name, "absent", {}, current=target.current)
        except Exception as exc:  # noqa: BLE001 - one VM's failure is its result
            return _failure(target, decision, exc, observe(target.current))
        return Outcome(target, decision, "pruned" if result["actions"] else "unchanged",
                       result["actions"], before=result["before"], after=result["after"])

    def _work(self, item):
        target, decision = item
        if isinstance(target, _Pruned):
            return self._prune(target, decision)
        return self._reconcile(target, decision)

    # -- recording -------------------------------------------------------------------------------
    def _new_record(self, outcome, now):
        options, vm = self.options, outcome.vm
        if isinstance(vm, _Pruned) or outcome.outcome == "deferred":
            return None
        if outcome.error is not None:
            return statuses.failed(options.owner, vm, outcome.error, outcome.decision.attempt,
                                   now, options.backoff, outcome.observed)
        return statuses.succeeded(options.owner, vm, outcome.observed, now)

    def _write(self, outcomes):
        """Write the statuses of one round (a failing store fails the run: StoreUnavailable)."""
        if self.options.check_mode:
            return
        now = self.clock()
        for outcome in outcomes:
            outcome.record = self._new_record(outcome, now)
            vm = outcome.vm
            key = statuses.record_key(self.options.owner, vm.provider, vm.name)
            if isinstance(vm, _Pruned):
                if outcome.error is None:
                    self.store.delete(statuses.NAMESPACE, key)
            elif outcome.record is not None:
                record = outcome.record
                self.store.update(statuses.NAMESPACE, key, lambda _old, _now, new=record: (new, None))

    # -- the run -----------------------------------------------------------------------------------
    def run(self):
        """Every VM's Outcome: the listed VMs in list order, then the pruned ones (only those
        reached when a status could not be written, see :attr:`store_error`)."""
        options = self.options
        records = self.read = self.records()
        now = self.clock()
        decisions = []
        for vm in self.fleet:
            record = records.get(statuses.record_key(options.owner, vm.provider, vm.name))
            decisions.append((vm, statuses.decide(record, vm.spec_hash, now, options.full,
                                                  options.retry_now, options.backoff), record))
        todo = {}
        for vm, decision, _record in decisions:
            if decision.kind in (statuses.RECONCILE, statuses.VERIFY):
                todo[vm.provider] = todo.get(vm.provider, 0) + 1
        to_list = set(key for key, count in todo.items() if count >= LIST_AT or options.full)
        if options.prune:
            self._recorded_providers(records)
            to_list.update(self.configs)
        with ThreadPoolExecutor(max_workers=max(1, options.concurrency),
                                thread_name_prefix="vm_fleet") as executor:
            self.list_providers(to_list, executor)
            pruned = self._prune_targets() if options.prune else []
            outcomes = {}
            for vm, decision, record in decisions:
                if decision.kind == statuses.UNCHANGED:
                    outcomes[vm.id] = Outcome(vm, decision, "unchanged",
                                              observed=(record or {}).get("observed"))
                elif decision.kind == statuses.DEFERRED:
                    outcomes[vm.id] = Outcome(vm, decision, "deferred",
                                              observed=(record or {}).get("observed"))
            work = [(vm, decision) for vm, decision, _record in decisions
                    if decision.kind in (statuses.RECONCILE, statuses.VERIFY)]
            work.extend((target, statuses.Decision(statuses.RECONCILE, 1, "not listed"))
                        for target in pruned)
            self._rounds(_interleave(work), executor, outcomes)
            # a breaker that refused calls while its probe was in flight may have closed since:
            # one more pass for those VMs (refused again locally, at no cost, if it is still open)
            again = [(o.vm, o.decision) for o in outcomes.values() if isinstance(o.error, BreakerOpen)]
            self._rounds(_interleave(again), executor, outcomes)
        if not options.check_mode and self.store_error is None:
            self._forget_gone(records, wanted=set(outcomes))
        for vm, _decision, record in decisions:
            outcome = outcomes.get(vm.id)
            if outcome is not None and outcome.observed is None and outcome.outcome == "deferred":
                outcome.observed = (record or {}).get("observed")
        order = [vm.id for vm in self.fleet] + [target.id for target in pruned]
        return [outcomes[vm_id] for vm_id in order if vm_id in outcomes]  # all, unless stopped

    def _recorded_providers(self, records):
        """Add the providers of this owner's records that the list no longer names."""
        missing = {}
        for record in records.values():
            if record.get("provider") not in self.configs:
                missing.setdefault(record.get("provider"), record.get("provider_ref"))
        for key, ref in sorted(missing.items(), key=lambda item: str(item[0])):
            config = self.resolve_ref(ref) if ref and self.resolve_ref else None
            if config is None:
                self.warnings.append("prune skipped on %s: VMs of this owner were recorded there, "
                                     "but it is not named in providers" % key)
            else:
                self.configs[key] = config

    def _rounds(self, work, executor, outcomes):
        """Run ``work`` round by round; a status that cannot be written stops the run there."""
        size = max(1, self.options.round_size)
        for start in range(0, len(work), size):
            if self.store_error is not None:
                return
            done = list(executor.map(self._work, work[start:start + size]))
            outcomes.update((outcome.vm.id, outcome) for outcome in done)
            try:
                self._write(done)
            except StoreUnavailable as err:
                self.store_error = err

    def _forget_gone(self, records, wanted):
        """Drop the records of VMs no longer listed that a listing of this run found gone."""
        for key, record in records.items():
            listing = self.listings.get(record.get("provider"))
            vm_id = "%s/%s" % (record.get("provider"), record.get("name"))
            if isinstance(listing, dict) and vm_id not in wanted and record.get("name") not in listing:
                self.store.delete(statuses.NAMESPACE, key)

    def _prune_targets(self):
        wanted = set(vm.id for vm in self.fleet)
        listings = {}
        for key, listing in self.listings.items():
            if isinstance(listing, VirtError):
                self.warnings.append("prune skipped on %s: it could not be listed (%s: %s)"
                                     % (key, listing.type, listing.message))
            else:
                listings[key] = list(listing.values())
        found, targets = pruning.candidates(listings, self.options.owner, wanted)
        pruning.check_limit(self.options.max_prune, found, targets)
        return [_Pruned(provider, vm) for provider, vm in targets]


def _interleave(work):
    """``work`` reordered round-robin across providers (in first-seen order), so that every
    round keeps every provider busy instead of queueing on one."""
    queues, order = {}, []
    for item in work:
        key = item[0].provider
        if key not in queues:
            queues[key] = []
            order.append(key)
        queues[key].append(item)
    out = []
    position = 0
    while len(out) < len(work):
        for key in order:
            if position < len(queues[key]):
                out.append(queues[key][position])
        position += 1
    return out
