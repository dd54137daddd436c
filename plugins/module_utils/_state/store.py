"""Shared state for breakers, rate limits and reservations: the StateStore interface.

Records are JSON-able dicts addressed by ``(namespace, key)``. Every process that uses the same
store URL sees the same records, and :meth:`StateStore.update` is an atomic read-modify-write
across processes (and machines, for Redis).

Store URLs (option ``state_store``, env ``RESILIENT_VIRT_STATE_STORE``):

* ``sqlite:///abs/path/state.db`` - a SQLite file (default
  ``sqlite://~/.ansible/resilient_virt/state.db``). The path must be absolute or start with
  ``~``: a relative path would depend on the working directory of each task process, which
  Ansible does not keep stable, so it is refused.
* ``redis://[:password@]host:port/db`` - a Redis server.
* ``rediss://[:password@]host:port/db`` - Redis over TLS; the server certificate and host name
  are verified. Add ``?ssl_ca_certs=/path/ca.pem`` for a private CA.
* ``redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]`` - the primary
  that Redis Sentinels (the hosts) watch under the master name ``service``; the Sentinels'
  own credentials go in ``?sentinel_username=...&sentinel_password=...``.
* ``redis+cluster://[[user]:password@]host:port[,host:port...]`` - a Redis Cluster (any nodes).
* ``rediss+sentinel://`` and ``rediss+cluster://`` - the same over TLS, verified as above
  (``?ssl_ca_certs=/path/ca.pem``). See ``redis_url`` for every detail.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, cast

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, StoreUnavailable, redact)

__all__ = ("StateStore", "open_store", "check_url", "default_store_url", "ENV_VAR", "DEFAULT_TIMEOUT",
           "ACCEPTED_FORMS", "Record", "Change")

Record = dict[str, Any]  # a stored record: a JSON-able dict
Change = Callable[[Optional[Record], float], tuple[Optional[Record], Any]]  # what update() runs

ENV_VAR = "RESILIENT_VIRT_STATE_STORE"
DEFAULT_TIMEOUT = 5.0  # seconds one operation may take when the caller gives no limit
_NAMESPACE = re.compile(r"^[A-Za-z0-9_.-]+$")
# written so that the redaction of URL passwords leaves it whole: no "scheme://...@" in it
ACCEPTED_FORMS = ("sqlite:///abs/path/state.db, sqlite://~/path/state.db, redis://host:port/db, "
                  "rediss://host:port/db, redis+sentinel://host:port[,host:port...]/service[/db], "
                  "redis+cluster://host:port[,host:port...] (rediss+sentinel and rediss+cluster "
                  "for TLS; a password goes before the host as :password@, with a user as "
                  "user:password@; a Sentinel's own in the query parameter sentinel_password)")
_OPEN: dict[tuple[int, str], StateStore] = {}  # (pid, url) -> store opened by open_store in this process
_REDIS_SCHEMES = ("redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster",
                  "rediss+cluster")


def check_namespace(namespace: Any) -> None:
    """Namespaces are identifiers chosen by the code (never by users); refuse anything else."""
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace):
        raise ValueError("state store namespace must match %s, got %r"
                         % (_NAMESPACE.pattern, namespace))


class StateStore:
    """Interface of a state store; see the module docstring for URLs.

    Every operation takes an optional ``timeout`` (seconds), capped by :attr:`timeout`: a store
    that does not answer in time, refuses the connection or is damaged raises
    :class:`errors.StoreUnavailable`, and from then on every operation of this object raises
    that same error at once (:attr:`failure`), so a task never waits twice on a dead store.
    """

    url: str | None = None
    warnings: Sequence[str] = ()  # what the user should know about the store (an unsafe directory); modules show it
    closed = False
    timeout = DEFAULT_TIMEOUT
    failure: StoreUnavailable | None = None

    def get(self, namespace: str, key: str, timeout: float | None = None) -> Record | None:
        """The record as a dict, or None."""
        raise NotImplementedError

    def items(self, namespace: str, prefix: str = "", timeout: float | None = None) -> dict[str, Record]:
        """All records of ``namespace`` whose key starts with ``prefix``: {key: dict}."""
        raise NotImplementedError

    def update(self, namespace: str, key: str, fn: Change, timeout: float | None = None) -> Any:
        """Atomically replace the record with ``fn(current, now) -> (new, result)``; return result.

        ``current`` is the record or None; ``now`` is :meth:`now`. ``new`` None deletes the record.
        ``fn`` may run more than once (optimistic retry), so it must not have side effects.
        """
        raise NotImplementedError

    def delete(self, namespace: str, key: str, timeout: float | None = None) -> None:
        raise NotImplementedError

    def now(self) -> float:
        """Epoch seconds on the clock every user of this store agrees on."""
        raise NotImplementedError

    def limit(self, timeout: float | None = None) -> float:
        """Seconds one operation may take: ``timeout`` capped by :attr:`timeout`."""
        return self.timeout if timeout is None else max(0.0, min(self.timeout, timeout))

    def check(self) -> None:
        """Raise the failure that ended this store's use in this process, if any."""
        if self.failure is not None:
            raise self.failure

    def fail(self, message: str, cause: BaseException | None = None) -> StoreUnavailable:
        """Record and return the StoreUnavailable that ends this store's use in this process."""
        failure = self.failure = StoreUnavailable(self.describe(), message, cause=cause)
        return failure

    def close(self) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """The URL without any password, safe for logs and results."""
        return cast(str, self.url)  # every store sets its url

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__name__, self.describe())


def default_store_url() -> str:
    return "sqlite://" + os.path.join(os.path.expanduser("~"), ".ansible", "resilient_virt",
                                      "state.db")


def _sqlite_path(url: str) -> str:
    path = url[len("sqlite://"):]
    if path.startswith("~"):
        path = os.path.expanduser(path)
    if not path or not os.path.isabs(path):
        raise InvalidSpec("state_store %r: the SQLite path must be absolute "
                          "(sqlite:///abs/path.db) or start with ~ (sqlite://~/path.db)" % url)
    return os.path.normpath(path)


def _open(url: str, timeout: float) -> StateStore:
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    # imported here, not at the top: sqlite.py and redis.py import this module, and a task
    # loads only the store it uses
    if scheme == "sqlite":
        from ansible_collections.resilient.virt.plugins.module_utils._state.sqlite import SQLiteStore
        return SQLiteStore(_sqlite_path(url), timeout)
    if scheme in _REDIS_SCHEMES:
        from ansible_collections.resilient.virt.plugins.module_utils._state.redis import RedisStore
        return RedisStore(url, timeout)
    raise InvalidSpec("state_store %r is not a supported URL; accepted forms: %s (or set %s)"
                      % (redact(url), ACCEPTED_FORMS, ENV_VAR))


def _url(url: str | None, environ: Mapping[str, str] | None) -> str:
    if environ is None:
        environ = os.environ
    return (url or environ.get(ENV_VAR) or default_store_url()).strip()


def check_url(url: str | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Raise InvalidSpec naming the store when the URL that :func:`open_store` would use is not
    a state store URL; nothing is opened or contacted."""
    url = _url(url, environ)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "sqlite":
        _sqlite_path(url)
    elif scheme in _REDIS_SCHEMES:
        try:  # here, not at the top: redis.py imports this module
            from ansible_collections.resilient.virt.plugins.module_utils._state.redis import RedisStore
        except ImportError:  # opening it says what is missing
            return
        RedisStore(url)  # parses the URL; connects to nothing
    else:
        _open(url, DEFAULT_TIMEOUT)  # the error of an unsupported URL


def open_store(url: str | None = None, environ: Mapping[str, str] | None = None,
               timeout: float | None = None) -> StateStore:
    """The store for ``url``, else ``$RESILIENT_VIRT_STATE_STORE``, else the default SQLite file.

    ``timeout`` bounds each operation (default :data:`DEFAULT_TIMEOUT`). Stores are cached per
    process and URL; a closed or failed store is opened again on the next call.
    """
    url = _url(url, environ)
    cache_key = (os.getpid(), url)
    store = _OPEN.get(cache_key)
    if store is None or store.closed or store.failure is not None:
        store = _OPEN[cache_key] = _open(url, DEFAULT_TIMEOUT if timeout is None else timeout)
    elif timeout is not None:
        store.timeout = float(timeout)
    return store
