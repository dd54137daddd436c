# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Status writes that are never lost: a critical write is retried until ``resource_timeout``.

A write that moves a record out of InProgress, or to a final phase, is retried on any failure
of the store (unreachable, locked, too slow, a connection reset) with capped exponential backoff
and jitter (:data:`BACKOFF`: 0.5 s doubling up to 10 s, plus up to 10 %), keeps trying at the cap
until ``resource_timeout`` (default 10 min; option ``resource_timeout``, environment
``RESILIENT_VIRT_RESOURCE_TIMEOUT``), and makes a last attempt at that deadline instead of
sleeping past it. With the defaults that is about 65 attempts in 10 minutes, the last one at
the deadline (Velero's status patch: about 7 attempts within 39 s). A logical refusal (an illegal
transition, a record changed by another owner) is not retried. Other writes make one attempt.

The loop is the collection's retry loop (``_resilience.retry.run_with_retry``); a store that
failed once stays failed in its process, so every attempt opens the store again.
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import Deadline
from ansible_collections.resilient.virt.plugins.module_utils._resilience.retry import run_with_retry
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import RetrySettings
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Retryable, StoreUnavailable, Timeout, VirtError, find_error, redact)

__all__ = ("BACKOFF", "DEFAULT_RESOURCE_TIMEOUT", "RESOURCE_TIMEOUT_ENV", "write")

DEFAULT_RESOURCE_TIMEOUT = 600.0
RESOURCE_TIMEOUT_ENV = "RESILIENT_VIRT_RESOURCE_TIMEOUT"
BACKOFF = RetrySettings(max_attempts=1000000, base_delay=0.5, max_delay=10.0, multiplier=2.0)
_ONCE = RetrySettings(max_attempts=1, base_delay=0.5, max_delay=10.0, multiplier=2.0)


class _StoreFailed(Retryable):
    """A store failure during a critical write: retried until the deadline."""


def write(open_store, namespace, key, fn, critical, resource_timeout=DEFAULT_RESOURCE_TIMEOUT,
          what="status write", sleep=time.sleep, clock=time.monotonic):
    """``open_store().update(namespace, key, fn)`` as described in the module docstring.

    ``open_store()`` returns the store (a new one after a failure); ``critical`` selects the
    retried write. Returns what ``fn`` returned; raises the refusal of ``fn``, the store's error
    (one attempt), or Timeout after the last attempt at the deadline of a critical write.
    """
    deadline = Deadline.after(resource_timeout if critical else None, clock)
    attempts = []

    def attempt(att):
        attempts.append(att.number)
        try:
            store = open_store()
            return store.update(namespace, key, fn, timeout=att.budget(store.timeout))
        except StoreUnavailable as err:
            if not critical:
                raise
            raise _StoreFailed(err.message, cause=err) from err
        except VirtError:  # a refusal of ``fn``
            raise
        except Exception as exc:  # noqa: BLE001 - any store failure is retried
            if not critical:
                raise
            raise _StoreFailed("%s: %s" % (type(exc).__name__, redact(str(exc))), cause=exc) from exc

    try:
        return run_with_retry(attempt, BACKOFF if critical else _ONCE, deadline=deadline,
                              sleep=sleep)
    except _StoreFailed as err:
        cause = find_error(err.cause) or err
        raise Timeout("%s of backup record %s was not written within resource_timeout (%gs, %d attempts, the "
                      "last at the deadline); the store's last error: %s. The record keeps its "
                      "previous phase; a later backup_status reconcile sets it right"
                      % (what, key, resource_timeout, len(attempts), cause.message),
                      cause=err, details={"attempts": len(attempts)}) from None
