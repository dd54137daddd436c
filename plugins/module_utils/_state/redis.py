"""Redis state store: state shared by processes on several machines.

A record is the JSON string at ``resilient_virt:<namespace>:<key>``; the set
``resilient_virt:<namespace>`` indexes the keys of a namespace for :meth:`RedisStore.items`.
:meth:`RedisStore.update` is optimistic: WATCH the record, read it and the server clock, run
``fn``, then MULTI/EXEC; when another client changed the record meanwhile, EXEC fails and the
whole read-modify-write (including ``fn``) runs again. ``now()`` is the Redis server's TIME so
all machines agree. ``rediss://`` verifies the server certificate and host name unless the URL
explicitly says otherwise (``?ssl_cert_reqs=none``). Passwords never leave this object: ``url``,
``describe()``, ``repr()`` and error messages show ``***`` instead.

Time limits: connecting and every socket read or write are bounded by the store's ``timeout``,
and redis-py's own retries are off (a store outage is reported at once, not retried for
seconds). An operation given a shorter ``timeout`` (what is left of a call's deadline) runs in
a helper thread and is abandoned when it has not answered in time; the client's connections
are then closed, which also ends the abandoned thread's wait.
"""
import json
import random
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, Timeout, Unauthorized, redact)
from ansible_collections.resilient.virt.plugins.module_utils._state.store import (
    DEFAULT_TIMEOUT, StateStore, check_namespace)

__all__ = ("RedisStore", "PREFIX")

PREFIX = "resilient_virt:"


def _dumps(record):
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False)


class RedisStore(StateStore):
    """State store on the Redis server at ``url`` (redis:// or rediss://)."""

    def __init__(self, url, timeout=DEFAULT_TIMEOUT):
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.url = redact(url)
        self.timeout = float(timeout)
        options = {"socket_timeout": self.timeout, "socket_connect_timeout": self.timeout,
                   "health_check_interval": 30, "retry": Retry(NoBackoff(), 0)}
        if url.lower().startswith("rediss://"):
            options.update(ssl_cert_reqs="required", ssl_check_hostname=True)
        try:
            self._client = redis.Redis.from_url(url, **options)
        except ValueError as exc:
            raise InvalidSpec("state_store %s is not a valid Redis URL (%s); expected "
                              "redis://[:password@]host:port/db or rediss://..."
                              % (self.url, redact(exc))) from exc

    @staticmethod
    def _index(namespace):
        check_namespace(namespace)
        return PREFIX + namespace

    def _key(self, namespace, key):
        return "%s:%s" % (self._index(namespace), key)

    def _run(self, operation, timeout=None):
        """``operation()`` within the time limit, Redis failures turned into VirtErrors."""
        import redis

        self.check()
        limit = self.limit(timeout)
        try:
            if limit >= self.timeout:
                return operation()
            from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import (
                run_with_timeout)
            return run_with_timeout(operation, limit, "state store %s" % self.url)
        except Timeout as exc:
            self._client.connection_pool.disconnect()  # ends the abandoned operation's wait
            raise self.fail("did not answer within %gs; check the server, or raise "
                            "resilience.store_timeout" % limit, exc) from exc
        except redis.exceptions.AuthenticationError as exc:
            raise Unauthorized("state store %s rejected the credentials (%s); fix the password "
                               "in state_store" % (self.url, redact(exc)), cause=exc) from exc
        except redis.exceptions.RedisError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise Unauthorized("state store %s: TLS certificate verification failed (%s); "
                                   "connect by a name the certificate lists, and add "
                                   "?ssl_ca_certs=/path/ca.pem to the URL to trust a private CA"
                                   % (self.url, redact(exc)), cause=exc) from exc
            raise self.fail("is unavailable: %s: %s" % (type(exc).__name__, redact(exc)), exc) from exc

    def get(self, namespace, key, timeout=None):
        raw = self._run(lambda: self._client.get(self._key(namespace, key)), timeout)
        return None if raw is None else json.loads(raw)

    def items(self, namespace, prefix="", timeout=None):
        index = self._index(namespace)

        def read():
            keys = sorted(k for k in (m.decode() for m in self._client.smembers(index))
                          if k.startswith(prefix))
            values = self._client.mget(["%s:%s" % (index, k) for k in keys]) if keys else []
            return {k: json.loads(v) for k, v in zip(keys, values) if v is not None}

        return self._run(read, timeout)

    def update(self, namespace, key, fn, timeout=None):
        return self._run(lambda: self._update(namespace, key, fn), timeout)

    def _update(self, namespace, key, fn):
        from redis.exceptions import WatchError

        index = self._index(namespace)
        rkey = "%s:%s" % (index, key)
        conflicts = 0
        with self._client.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(rkey)
                    raw = pipe.get(rkey)
                    seconds, micros = pipe.time()
                    new, result = fn(None if raw is None else json.loads(raw),
                                     seconds + micros / 1e6)
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

    def delete(self, namespace, key, timeout=None):
        index = self._index(namespace)

        def remove():
            with self._client.pipeline(transaction=True) as pipe:
                pipe.delete("%s:%s" % (index, key))
                pipe.srem(index, key)
                pipe.execute()

        self._run(remove, timeout)

    def now(self):
        seconds, micros = self._run(self._client.time)
        return seconds + micros / 1e6

    def close(self):
        self._client.close()
        self.closed = True
