"""Redis state store: state shared by processes on several machines.

A record is the JSON string at ``resilient_virt:<namespace>:<key>``; the set
``resilient_virt:<namespace>`` indexes the keys of a namespace for :meth:`RedisStore.items`.
On a Redis Cluster the namespace is a hash tag (``resilient_virt:{<namespace>}:<key>`` and
``resilient_virt:{<namespace>}``), so a record and its index live in one hash slot and one
transaction can change both; a plain server or a Sentinel-watched primary keeps the names
without braces, so existing data stays where it is.
:meth:`RedisStore.update` is optimistic: WATCH the record, read it and the server clock, run
``fn``, then MULTI/EXEC; when another client changed the record meanwhile, EXEC fails and the
whole read-modify-write (including ``fn``) runs again. ``now()`` is the Redis server's TIME so
all machines agree (on a Cluster, the record and the clock are read by one EVAL on the node
that owns the slot). ``rediss://`` verifies the server certificate and host name unless the URL
explicitly says otherwise (``?ssl_cert_reqs=none``). Passwords never leave this object: ``url``,
``describe()``, ``repr()`` and error messages show ``***`` instead.

Sentinel (``redis+sentinel://``, see ``redis_url``): the primary's address is asked of the
Sentinels for every new connection, and a connection to a server that is no longer the
primary is dropped; an operation that meets a failover fails as the store being unavailable
(no retry), and the next store opened (the next task) talks to the new primary.

Time limits: connecting and every socket read or write are bounded by the store's ``timeout``,
and redis-py's own retries are off (a store outage is reported at once, not retried for
seconds). An operation given a shorter ``timeout`` (what is left of a call's deadline) runs in
a helper thread and is abandoned when it has not answered in time; the client's connections
are then closed, which also ends the abandoned thread's wait. So does the first operation of a
Sentinel or Cluster store, which may ask several Sentinels or nodes in turn before it finds its
server; each Sentinel gets a share of the time limit, so a hung one leaves time to ask the next.
"""
from __future__ import annotations

import json
import random
import time
from typing import TYPE_CHECKING, Any, Callable, cast

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import run_with_timeout
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, Timeout, Unauthorized, VirtError, redact)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import (
    DEFAULT_TIMEOUT, Change, Record, StateStore, check_namespace)

if TYPE_CHECKING:  # redis_url.py is imported only for a Sentinel or Cluster URL
    from ansible_collections.resilient.virt.plugins.module_utils._state.redis_url import RedisSpec

__all__ = ("RedisStore", "PREFIX")

PREFIX = "resilient_virt:"
# The record and the server clock in one round trip, on the node that owns the record's slot.
_READ_WITH_CLOCK = "return {redis.call('GET', KEYS[1]), redis.call('TIME')}"


def _dumps(record: Record) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)


class RedisStore(StateStore):
    """State store on the Redis server, Sentinel-watched primary or Cluster at ``url``."""

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT):
        import redis  # here: the library (82 ms to import) is needed only once a Redis store opens

        self.url = redact(url)
        self.timeout = float(timeout)
        self._client: Any = None
        self._sentinel: Any = None
        self._warm = False  # a Sentinel or Cluster store has found its servers once
        scheme = url.split("://", 1)[0].lower()
        self._spec: RedisSpec | None = None
        if "+" in scheme:
            # imported here: only a Sentinel or Cluster URL needs it (1.4 ms, python3 -X importtime)
            from ansible_collections.resilient.virt.plugins.module_utils._state.redis_url import (
                parse_redis_url)
            self._spec = parse_redis_url(url)
            return
        options = dict(self._socket_options(), health_check_interval=30)
        if scheme == "rediss":
            options.update(ssl_cert_reqs="required", ssl_check_hostname=True)
        try:
            self._client = redis.Redis.from_url(url, **options)
        except ValueError as exc:
            raise InvalidSpec("state_store %s is not a valid Redis URL (%s); expected "
                              "redis://host:port/db or rediss://host:port/db (a password goes before the host "
                              "as :password@)"
                              % (self.url, redact(exc))) from exc

    @property
    def cluster(self) -> bool:
        return self._spec is not None and self._spec.kind == "cluster"

    def _socket_options(self, retry: bool = True) -> dict[str, Any]:
        """Socket time limits, and no retries inside redis-py (``retry`` False: no argument)."""
        options: dict[str, Any] = {"socket_timeout": self.timeout, "socket_connect_timeout": self.timeout}
        if retry:
            from redis.backoff import NoBackoff
            from redis.retry import Retry
            options["retry"] = Retry(NoBackoff(), 0)
        return options

    def _tls_options(self) -> dict[str, Any]:
        spec = cast("RedisSpec", self._spec)  # called for Sentinel and Cluster URLs only
        if not spec.tls:
            return {}
        return {"ssl": True, "ssl_cert_reqs": "required" if spec.verify else "none",
                "ssl_check_hostname": spec.verify, "ssl_ca_certs": spec.ssl_ca_certs}

    def _connect(self) -> Any:
        """The redis-py client, made on first use (a Cluster client talks to the nodes at once)."""
        if self._client is not None:
            return self._client
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        spec = cast("RedisSpec", self._spec)  # a plain URL made its client in __init__
        auth = {"username": spec.username, "password": spec.password}
        if spec.kind == "sentinel":
            from redis.sentinel import Sentinel
            share = self.timeout / (len(spec.nodes) + 1)  # a hung Sentinel leaves time for the next
            sentinel_options = dict(self._socket_options(), socket_timeout=share,
                                    socket_connect_timeout=share, username=spec.sentinel_username,
                                    password=spec.sentinel_password, **self._tls_options())
            self._sentinel = Sentinel(spec.nodes, sentinel_kwargs=sentinel_options,
                                      **self._socket_options())
            self._client = self._sentinel.master_for(
                spec.service, db=spec.db, health_check_interval=30, **dict(auth, **self._tls_options()))
        else:
            from redis.cluster import ClusterNode, RedisCluster
            self._client = RedisCluster(
                startup_nodes=[ClusterNode(host, port) for host, port in spec.nodes],
                retry=Retry(NoBackoff(), 0), **dict(auth, **self._socket_options(retry=False),
                                                    **self._tls_options()))
        return self._client

    def _disconnect(self) -> None:
        """Close every connection (to the servers and the Sentinels) this store holds."""
        client = self._client
        if client is None:
            return
        if self.cluster:
            client.disconnect_connection_pools()
        else:
            client.connection_pool.disconnect()
        for sentinel in (self._sentinel.sentinels if self._sentinel else ()):
            sentinel.connection_pool.disconnect()

    def _index(self, namespace: str) -> str:
        check_namespace(namespace)
        return PREFIX + ("{%s}" % namespace if self.cluster else namespace)

    def _key(self, namespace: str, key: str) -> str:
        return "%s:%s" % (self._index(namespace), key)

    def _run(self, operation: Callable[[Any], Any], timeout: float | None = None) -> Any:
        """``operation(client)`` within the time limit, Redis failures turned into VirtErrors."""
        import redis

        self.check()
        limit = self.limit(timeout)

        def run() -> Any:
            return operation(self._connect())

        try:
            if limit >= self.timeout and (self._spec is None or self._warm):
                return run()
            result = run_with_timeout(run, limit, "state store %s" % self.url)
            self._warm = True
            return result
        except Timeout as exc:
            self._disconnect()  # ends the abandoned operation's wait
            raise self.fail("did not answer within %gs; check the server, or raise "
                            "resilience.store_timeout" % limit, exc) from exc
        except redis.exceptions.AuthenticationError as exc:
            raise Unauthorized("state store %s rejected the credentials (%s); fix the password "
                               "in state_store" % (self.url, redact(exc)), cause=exc) from exc
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as exc:
            raise self._failure(exc) from exc
        except (OSError, ValueError) as exc:
            if self.failure is None:
                raise
            # another operation of this store ran out of time and closed the connection under
            # this one ("I/O operation on closed file"): the store's outage, not a new error
            raise self.failure from exc

    def _failure(self, exc: BaseException) -> VirtError:
        """The VirtError for a redis-py failure that is not a time limit."""
        from redis.sentinel import MasterNotFoundError

        text = str(exc)
        detail = redact(exc)
        if isinstance(exc, MasterNotFoundError):  # its text holds every Sentinel client's repr
            spec = cast("RedisSpec", self._spec)  # only a Sentinel store meets it
            detail = "no Sentinel (%s) named a primary for %r" % (
                ", ".join("%s:%d" % node for node in spec.nodes), spec.service)
        if "CERTIFICATE_VERIFY_FAILED" in text:
            return Unauthorized("state store %s: TLS certificate verification failed (%s); "
                                "connect by a name the certificate lists, and add "
                                "?ssl_ca_certs=/path/ca.pem to the URL to trust a private CA"
                                % (self.url, detail), cause=exc)
        if "AuthenticationError" in text and isinstance(exc, MasterNotFoundError):
            return Unauthorized("state store %s: the Sentinels rejected the credentials (%s); "
                                "fix sentinel_username/sentinel_password in state_store"
                                % (self.url, detail), cause=exc)
        if "invalid username-password pair" in text:  # how a Cluster client reports it
            return Unauthorized("state store %s rejected the credentials (%s); fix the password "
                                "in state_store" % (self.url, detail), cause=exc)
        if isinstance(exc, MasterNotFoundError):
            return self.fail("is unavailable: %s; check that the Sentinels run and watch that "
                             "master name" % detail, exc)
        return self.fail("is unavailable: %s: %s" % (type(exc).__name__, detail), exc)

    def get(self, namespace: str, key: str, timeout: float | None = None) -> Record | None:
        rkey = self._key(namespace, key)
        raw = self._run(lambda client: client.get(rkey), timeout)
        return None if raw is None else json.loads(raw)

    def items(self, namespace: str, prefix: str = "", timeout: float | None = None) -> dict[str, Record]:
        index = self._index(namespace)

        def read(client: Any) -> dict[str, Record]:
            keys = sorted(k for k in (m.decode() for m in client.smembers(index))
                          if k.startswith(prefix))
            values = client.mget(["%s:%s" % (index, k) for k in keys]) if keys else []
            return {k: json.loads(v) for k, v in zip(keys, values) if v is not None}

        return self._run(read, timeout)

    def update(self, namespace: str, key: str, fn: Change, timeout: float | None = None) -> Any:
        return self._run(lambda client: self._update(client, namespace, key, fn), timeout)

    def _read(self, pipe: Any, rkey: str) -> tuple[bytes | None, float]:
        """The record's raw value and the server clock, in a pipeline that WATCHes ``rkey``."""
        if self.cluster:
            raw, (seconds, micros) = pipe.execute_command("EVAL", _READ_WITH_CLOCK, 1, rkey)
            return raw, int(seconds) + int(micros) / 1e6
        raw = pipe.get(rkey)
        seconds, micros = pipe.time()
        return raw, seconds + micros / 1e6

    def _update(self, client: Any, namespace: str, key: str, fn: Change) -> Any:
        from redis.exceptions import WatchError

        index = self._index(namespace)
        rkey = "%s:%s" % (index, key)
        conflicts = 0
        with client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(rkey)
                    raw, now = self._read(pipe, rkey)
                    new, result = fn(None if raw is None else json.loads(raw), now)
                    if new is None:
                        if raw is None:
                            return result
                        pipe.multi()
                        pipe.delete(rkey)
                        pipe.srem(index, key)
                    else:
                        text = _dumps(new)
                        if raw is not None and text == raw.decode():
                            return result
                        pipe.multi()
                        pipe.set(rkey, text)
                        pipe.sadd(index, key)
                    pipe.execute()
                    return result
                except WatchError:
                    conflicts += 1
                    time.sleep(random.uniform(0, min(0.02, 0.001 * conflicts)))

    def delete(self, namespace: str, key: str, timeout: float | None = None) -> None:
        index = self._index(namespace)

        def remove(client: Any) -> None:
            with client.pipeline(transaction=True) as pipe:
                pipe.delete("%s:%s" % (index, key))
                pipe.srem(index, key)
                pipe.execute()

        self._run(remove, timeout)

    def now(self) -> float:
        def clock(client: Any) -> float:
            if self.cluster:  # one node's clock, always the same one
                seconds, micros = client.eval("return redis.call('TIME')", 1, PREFIX + "clock")
                return int(seconds) + int(micros) / 1e6
            seconds, micros = client.time()
            return seconds + micros / 1e6

        return self._run(clock)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        for sentinel in (self._sentinel.sentinels if self._sentinel else ()):
            sentinel.close()
        self.closed = True
