# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the provider calls of every playbook run added up to, kept in the state store.

The summary callback adds a run's ``resilience`` entries (``stats.py``) to the record of each
provider key in namespace :data:`NAMESPACE`, with ``stats.merge`` inside one atomic
``StateStore.update`` per key: runs that end at the same time on one store, or on several
controllers sharing a Redis store, all count, and the totals only grow, as Prometheus counters
must. The failover coverage a run computed is kept the same way, one record per creator in
:data:`COVERAGE_NAMESPACE`, each run's replacing the last.
"""
from ansible_collections.resilient.virt.plugins.module_utils._resilience.stats import merge

__all__ = ("NAMESPACE", "COVERAGE_NAMESPACE", "COVERAGE_FIELDS", "add_run", "coverage_of")

NAMESPACE = "metrics"
COVERAGE_NAMESPACE = "metrics_coverage"
COVERAGE_FIELDS = ("vms_requiring", "vms_covered", "coverage_ratio")


def _totals(entry):
    """The entry to keep: what adds up across runs (transitions are the breaker's own)."""
    return dict((name, value) for name, value in entry.items() if name != "transitions")


def coverage_of(summary):
    """The coverage fields of a ``failover_reservation`` summary, or None when one is missing
    or not a number."""
    if not isinstance(summary, dict):
        return None
    values = dict((name, summary.get(name)) for name in COVERAGE_FIELDS)
    if not all(isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
               for value in values.values()):
        return None
    return values


def add_run(store, run, coverage):
    """Add ``run`` ({provider key: entry}) to the totals in ``store`` and keep ``coverage``
    ({creator: coverage fields}); return (the totals of every key, the coverage of every
    creator), as stored."""
    for key in sorted(run):
        entry = _totals(run[key])
        store.update(NAMESPACE, key, lambda current, now, entry=entry: (
            merge(merge({}, current), entry), None))
    for creator in sorted(coverage):
        store.update(COVERAGE_NAMESPACE, creator, lambda current, now, fields=coverage[creator]: (
            dict(fields), None))
    totals = dict((key, merge({}, record)) for key, record in store.items(NAMESPACE).items())
    stored = dict((creator, coverage_of(record))
                  for creator, record in store.items(COVERAGE_NAMESPACE).items())
    return totals, dict((creator, fields) for creator, fields in stored.items() if fields)
