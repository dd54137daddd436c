"""Parse the Sentinel and Cluster forms of a Redis state store URL (no network, no redis-py).

* ``redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db][?options]`` - the
  hosts are Sentinels (port 26379 when left out), ``service`` the master name they watch, ``db``
  the database (0). The user and password are those of the Redis servers; ``sentinel_username``
  and ``sentinel_password`` options authenticate to the Sentinels (none when left out).
* ``redis+cluster://[[user]:password@]host:port[,host:port...][/0][?options]`` - any nodes of a
  Redis Cluster (port 6379 when left out); the others are discovered.
* ``rediss+sentinel://`` and ``rediss+cluster://`` speak TLS to every server (and Sentinel),
  verifying certificates and host names; options ``ssl_ca_certs=/path/ca.pem`` (a private CA)
  and ``ssl_cert_reqs=none`` (no verification; a lab only).

User names and passwords may be percent-encoded (``%40`` for ``@``).
"""
from __future__ import annotations

from urllib.parse import parse_qsl, unquote

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, redact
from ansible_collections.resilient.virt.plugins.module_utils._state.store import ACCEPTED_FORMS

__all__ = ("RedisSpec", "parse_redis_url", "SCHEMES")

SCHEMES = {"redis+sentinel": ("sentinel", False), "rediss+sentinel": ("sentinel", True),
           "redis+cluster": ("cluster", False), "rediss+cluster": ("cluster", True)}
_DEFAULT_PORT = {"sentinel": 26379, "cluster": 6379}
_OPTIONS = {"sentinel": ("sentinel_username", "sentinel_password"), "cluster": ()}
_TLS_OPTIONS = ("ssl_ca_certs", "ssl_cert_reqs")


class RedisSpec:
    """What a Sentinel or Cluster URL names: ``kind``, ``nodes`` [(host, port)], ``service``,
    ``db``, ``username``, ``password``, ``sentinel_username``, ``sentinel_password``, ``tls``,
    ``ssl_ca_certs`` and ``verify`` (False only with ``ssl_cert_reqs=none``)."""

    def __init__(self, kind: str, tls: bool):
        self.kind = kind
        self.tls = tls
        self.nodes: list[tuple[str, int]] = []
        self.service: str | None = None
        self.db = 0
        self.username: str | None = None
        self.password: str | None = None
        self.sentinel_username: str | None = None
        self.sentinel_password: str | None = None
        self.ssl_ca_certs: str | None = None
        self.verify = True


def _refuse(url: str, problem: str) -> InvalidSpec:
    return InvalidSpec("state_store %s: %s; accepted forms: %s"
                       % (redact(url), problem, ACCEPTED_FORMS))


def _node(url: str, text: str, default_port: int) -> tuple[str, int]:
    if text.startswith("["):  # [IPv6]:port
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise _refuse(url, "the address %r is not [IPv6]:port" % text)
        port = rest[1:]
    else:
        host, colon, port = text.rpartition(":")
        if not colon:
            host, port = text, ""
    if not host:
        raise _refuse(url, "an address has no host (%r)" % text)
    if not port:
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise _refuse(url, "the port of %r is not a number from 1 to 65535" % text)
    return host, int(port)


def _path(url: str, spec: RedisSpec, path: str) -> None:
    parts = [part for part in path.split("/") if part]
    if spec.kind == "cluster":
        if parts not in ([], ["0"]):
            raise _refuse(url, "a Redis Cluster has no databases or service names (path %r)" % path)
        return
    if not parts or len(parts) > 2:
        raise _refuse(url, "give the master name the Sentinels watch, and optionally the "
                           "database, as the path (/mymaster/0)")
    spec.service = unquote(parts[0])
    if len(parts) == 2:
        if not parts[1].isdigit():
            raise _refuse(url, "the database %r is not a number" % parts[1])
        spec.db = int(parts[1])


def _query(url: str, spec: RedisSpec, query: str) -> None:
    allowed = _OPTIONS[spec.kind] + (_TLS_OPTIONS if spec.tls else ())
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise _refuse(url, "the query is not name=value pairs joined by &") from None
    for name, value in pairs:
        if name not in allowed:
            hint = " (TLS options need the rediss+ scheme)" if name in _TLS_OPTIONS else ""
            raise _refuse(url, "unknown option %r%s; options here: %s"
                          % (name, hint, ", ".join(allowed) or "none"))
        if name == "ssl_cert_reqs":
            if value not in ("required", "none"):
                raise _refuse(url, "ssl_cert_reqs must be required or none")
            spec.verify = value == "required"
        else:
            setattr(spec, name, value)


def parse_redis_url(url: str) -> RedisSpec:
    """The :class:`RedisSpec` of a ``redis+sentinel``/``redis+cluster`` URL (InvalidSpec if bad)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise _refuse(url, "the scheme is not one of %s" % ", ".join(sorted(SCHEMES)))
    spec = RedisSpec(*SCHEMES[scheme.lower()])
    rest, dummy, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        spec.username = unquote(user) or None
        spec.password = unquote(password) if colon else None
    if not hosts:
        raise _refuse(url, "give at least one host:port")
    spec.nodes = [_node(url, text, _DEFAULT_PORT[spec.kind]) for text in hosts.split(",")]
    _path(url, spec, slash + path)
    _query(url, spec, query)
    return spec
