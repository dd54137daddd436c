"""Error taxonomy shared by every part of the collection, and the classifier into it.

Every failure that leaves a provider becomes one :class:`VirtError` subclass. ``retryable``
says whether trying again can help; :func:`counts_against_breaker` says whether the failure
shows the provider is unhealthy. Library exceptions (socket, ``ssl``, ``requests``,
``urllib3``, ``http.client``, ``urllib``) are mapped by ``_network_errors``, imported only when
one has to be classified.
"""
from __future__ import annotations

import time
from typing import Any, Callable
from collections.abc import Iterable, Iterator, Mapping

from ansible_collections.resilient.virt.plugins.module_utils._masking import redact
from ansible_collections.resilient.virt.plugins.module_utils._time import format_time

__all__ = (
    "VirtError", "NotFound", "InvalidSpec", "Unauthorized", "NotSupported", "QuotaExceeded",
    "Conflict", "Internal", "MissingLibrary", "Retryable", "Unavailable", "StoreUnavailable",
    "RateLimit", "Timeout", "BreakerOpen", "classify", "classify_http", "field_error", "field_errors",
)


class VirtError(Exception):
    """Base of the taxonomy. ``str(err)`` is ``err.message``; ``err.cause`` is the original.

    On its way to the task's result an error collects: ``operation``, the provider operation
    that failed (``create``, ``power``...) when known, and ``result``, keys the module adds to
    the failed task's result (conditions, the provider's state).
    """

    type: str = "VirtError"
    retryable: bool = False

    def __init__(self, message: str, cause: BaseException | None = None,
                 retry_after: float | None = None, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message: str = message
        self.cause: BaseException | None = cause
        self.retry_after: float | None = None if retry_after is None else float(retry_after)
        self.details: dict[str, Any] | None = details
        self.operation: str | None = None
        self.result: dict[str, Any] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "type" not in cls.__dict__:
            cls.type = cls.__name__

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return "%s(%r)" % (type(self).__name__, self.message)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary for module results: type, message, retryable, retry_after, details."""
        out = {"type": self.type, "message": self.message, "retryable": self.retryable,
               "retry_after": self.retry_after}
        if self.details:
            out["details"] = self.details
        return out


class NotFound(VirtError):
    """The named resource does not exist."""


class InvalidSpec(VirtError):
    """The request is wrong; ``details={"errors": [{"path": ..., "message": ...}]}`` lists fields."""


def field_errors(errors: Iterable[Mapping[str, str]], what: str | None = None,
                 cause: BaseException | None = None) -> InvalidSpec:
    """InvalidSpec listing every bad field of ``errors`` (``[{"path": ..., "message": ...}]``).

    The message is ``<what>: <path>: <message>; ...``; a field's message that already starts with
    its path is shown as it is. ``details.errors`` keeps the list for playbooks.
    """
    errors = [dict(error) for error in errors]
    shown = "; ".join(error["message"] if error["message"].startswith(error["path"])
                      else "%s: %s" % (error["path"], error["message"]) for error in errors)
    return InvalidSpec("%s: %s" % (what, shown) if what else shown, cause=cause,
                       details={"errors": errors})


def field_error(path: str, message: str, cause: BaseException | None = None) -> InvalidSpec:
    """InvalidSpec for the one field ``path`` (see :func:`field_errors`)."""
    return field_errors([{"path": path, "message": message}], cause=cause)


class Unauthorized(VirtError):
    """Credentials rejected, permission denied or server certificate not trusted."""


class NotSupported(VirtError):
    """The provider cannot do this operation."""


class MissingLibrary(VirtError):
    """A Python library the task needs cannot be imported where the module runs;
    ``details={"libraries": [...]}`` names every one of them (pip package names)."""


class QuotaExceeded(VirtError):
    """Out of capacity or quota; waiting a few seconds will not help."""


class Conflict(VirtError):
    """The resource is in a state that forbids the operation (exists, busy, changed meanwhile)."""


class Internal(VirtError):
    """Unexpected failure: a bug here or in the provider library."""


class Retryable(VirtError):
    """Transient failure: the same call may succeed later."""

    retryable = True


class Unavailable(Retryable):
    """The provider cannot be reached or answered that it is unavailable."""


class StoreUnavailable(Unavailable):
    """The state store (not the provider) failed: unreachable, locked, too slow or damaged.

    Its type is ``Unavailable`` and ``details.state_store`` names the store. It is not retried
    with the provider's retry settings and never counts against a provider's circuit breaker.
    """

    type = "Unavailable"
    retryable = False

    def __init__(self, store: str, message: str, cause: BaseException | None = None):
        super().__init__("state store %s %s" % (store, message), cause=cause,
                         details={"state_store": store})


class RateLimit(Retryable):
    """Too many requests; ``retry_after`` says how long to wait when known."""


class Timeout(Retryable):
    """The provider did not answer in time."""


class BreakerOpen(VirtError):
    """Calls are refused locally because the circuit breaker ``breaker`` is open.

    ``half_open_at`` is the epoch time at which one probe call will be allowed again; the
    error's details give it in RFC 3339 UTC, rounded up to the second, as every result does.
    The breaker adds ``state`` to the details: ``open``, or ``half_open`` with its probe slots
    taken.
    """

    def __init__(self, breaker: str, half_open_at: float, message: str | None = None,
                 cause: BaseException | None = None, details: dict[str, Any] | None = None):
        half_open_at = float(half_open_at)
        wait = max(0.0, half_open_at - time.time())
        if message is None:
            when = format_time(half_open_at, round_up=True)
            message = ("circuit breaker %r is open: calls are refused until it half-opens at %s "
                       "(in %.1f s); see the breaker with resilient.virt.circuit_breaker"
                       % (breaker, when, wait))
        merged = {"breaker": breaker, "half_open_at": format_time(half_open_at, round_up=True)}
        merged.update(details or {})
        super().__init__(message, cause=cause, retry_after=wait, details=merged)
        self.breaker = breaker
        self.half_open_at = half_open_at


def _links(exc: BaseException) -> list[BaseException]:
    """Exceptions directly behind ``exc``: explicit cause, ``.cause``/``.reason``, then context."""
    out = [exc.__cause__]
    for attr in ("cause", "reason"):
        out.append(getattr(exc, attr, None))
    if not exc.__suppress_context__:
        out.append(exc.__context__)
    return [e for e in out if isinstance(e, BaseException)]


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` then every exception behind it, depth first, each once."""
    seen = set()
    stack = [exc]
    while stack:
        cur = stack.pop()
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        stack.extend(reversed(_links(cur)))


def find_error(exc: BaseException | None) -> VirtError | None:
    """Return ``exc`` if it is a VirtError, else the first VirtError behind it, else None."""
    if exc is None:
        return None
    for cur in _chain(exc):
        if isinstance(cur, VirtError):
            return cur
    return None


def classify(exc: BaseException,
             classifiers: Iterable[Callable[[BaseException], VirtError | None]] = ()) -> VirtError:
    """Return the VirtError for any exception; the original stays reachable as ``.cause``.

    Order: a VirtError already in ``exc`` or its cause chain; the first non-None answer of the
    ``classifiers`` callables (``fn(exc) -> VirtError | None``); standard network and HTTP
    library failures; otherwise :class:`Internal`.
    """
    found = find_error(exc)
    if found is not None:
        return found
    for classifier in classifiers:
        err = classifier(exc)
        if err is not None:
            if err.cause is None:
                err.cause = exc
            return err
    # here, not at the top: _network_errors.py imports this module
    from ansible_collections.resilient.virt.plugins.module_utils._network_errors import (
        describe, library_error)

    err = library_error(exc) or Internal(describe(exc))
    err.cause = exc
    return err


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    getter = getattr(headers, "get", None)
    value = getter(name) if getter else None
    if value is None and hasattr(headers, "items"):
        for key, val in headers.items():
            if str(key).lower() == name.lower():
                return val
    return value


def parse_retry_after(value: object, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date); None if invalid."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # HTTP-dates are always GMT
        from datetime import timezone
        when = when.replace(tzinfo=timezone.utc)
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


_HTTP = {400: InvalidSpec, 422: InvalidSpec, 401: Unauthorized, 403: Unauthorized,
         404: NotFound, 409: Conflict, 412: Conflict, 429: RateLimit, 501: NotSupported,
         408: Timeout, 504: Timeout, 500: Unavailable, 502: Unavailable, 503: Unavailable,
         402: QuotaExceeded, 413: QuotaExceeded, 507: QuotaExceeded}


def classify_http(status: int, headers: Mapping[str, str] | None = None,
                  message: str = "") -> VirtError:
    """Map an HTTP status (and ``Retry-After`` for 429/503) to a VirtError."""
    status = int(status)
    klass = _HTTP.get(status)
    if klass is None:
        klass = InvalidSpec if 400 <= status < 500 else Unavailable if status >= 500 else Internal
    retry_after = None
    if status in (429, 503):
        retry_after = parse_retry_after(_header(headers, "Retry-After"))
    text = "HTTP %d" % status
    if message:
        text += ": %s" % redact(message)
    return klass(text, retry_after=retry_after, details={"status": status})


def counts_against_breaker(err: BaseException) -> bool:
    """True when ``err`` shows the provider unhealthy: Unavailable, Timeout, other Retryable.

    RateLimit proves the provider is alive; non-retryable errors are answers, not outages; a
    StoreUnavailable is the state store's failure, not the provider's.
    """
    if not isinstance(err, VirtError):
        err = classify(err)
    return isinstance(err, Retryable) and not isinstance(err, (RateLimit, StoreUnavailable))
