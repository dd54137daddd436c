"""Library failures (socket, ``ssl``, ``requests``, ``urllib3``, ``http.client``, ``urllib``) mapped
into the error taxonomy, for :func:`errors.classify`.

Classes are recognised by name and module, so none of those libraries is imported here; and
this module itself is imported only when a failure has to be classified, so a task that meets
none does not pay for it.
"""
from __future__ import annotations

import errno
import socket
from typing import Any

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, Timeout, Unauthorized, Unavailable, VirtError, _chain, classify_http, redact)

__all__ = ("describe", "library_error")


def describe(exc: BaseException) -> str:
    text = redact(exc)
    name = type(exc).__name__
    return "%s: %s" % (name, text) if text else name


_NET_ERRNOS = frozenset(getattr(errno, n) for n in (
    "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EPIPE", "EHOSTUNREACH", "ENETUNREACH",
    "ENETDOWN", "ENETRESET", "EHOSTDOWN", "ENOTCONN", "ESHUTDOWN") if hasattr(errno, n))

# (library, class name) -> taxonomy class or special handling; matched along the MRO, leaf
# first, so e.g. requests' ConnectTimeout (also a ConnectionError) is a Timeout. Library
# classes are recognised by module, so a user class called ``HTTPError`` is not mistaken.
_LIB_KINDS = {
    ("requests", "SSLError"): "tls", ("urllib3", "SSLError"): "tls", ("ssl", "SSLError"): "tls",
    ("requests", "ConnectTimeout"): Timeout, ("requests", "ReadTimeout"): Timeout,
    ("requests", "Timeout"): Timeout, ("urllib3", "ConnectTimeoutError"): Timeout,
    ("urllib3", "ReadTimeoutError"): Timeout, ("urllib3", "TimeoutError"): Timeout,
    ("urllib3", "NewConnectionError"): Unavailable, ("urllib3", "NameResolutionError"): Unavailable,
    ("urllib3", "ProtocolError"): Unavailable, ("urllib3", "ProxyError"): Unavailable,
    ("requests", "ConnectionError"): Unavailable, ("requests", "ChunkedEncodingError"): Unavailable,
    ("http", "IncompleteRead"): Unavailable, ("http", "BadStatusLine"): Unavailable,
    ("requests", "HTTPError"): "http", ("urllib", "HTTPError"): "http",
    ("urllib3", "MaxRetryError"): "reason", ("urllib", "URLError"): "reason",
}


def _library_kind(exc: BaseException) -> Any:
    for klass in type(exc).__mro__:
        family = (klass.__module__ or "").split(".")[0]
        kind = _LIB_KINDS.get((family, klass.__name__))
        if kind is not None:
            return kind
    return None


def _cert_failure(exc: BaseException) -> bool:
    for cur in _chain(exc):
        if type(cur).__name__ == "SSLCertVerificationError" or \
                "CERTIFICATE_VERIFY_FAILED" in str(cur):
            return True
    return False


# OpenSSL reasons of a handshake that cannot work with these settings, however often it is tried
_TLS_MISMATCH = ("WRONG_VERSION_NUMBER", "UNKNOWN_PROTOCOL", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST",
                 "RECORD_LAYER_FAILURE", "UNSUPPORTED_PROTOCOL", "NO_PROTOCOLS_AVAILABLE",
                 "TLSV1_ALERT_PROTOCOL_VERSION", "WRONG_SSL_VERSION", "PACKET_LENGTH_TOO_LONG")


def _tls_mismatch(exc: BaseException) -> bool:
    for cur in _chain(exc):
        text = "%s %s" % (getattr(cur, "reason", "") or "", cur)
        if any(reason in text.upper() for reason in _TLS_MISMATCH):
            return True
    return False


def _from_tls_error(exc: BaseException) -> VirtError:
    if _cert_failure(exc):
        return Unauthorized("TLS certificate verification failed (%s); trust the server's CA "
                            "or, for a lab only, set validate_certs to false" % redact(exc))
    if _tls_mismatch(exc):
        return InvalidSpec("TLS handshake failed (%s): the endpoint does not speak TLS on this "
                           "port, or only a protocol version this client refuses; check the "
                           "port, and use a plain-text protocol only where the endpoint serves "
                           "one (a lab simulator on loopback)" % describe(exc))
    return Unavailable(describe(exc))


def _from_http_error(exc: BaseException) -> VirtError:
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    headers = getattr(response, "headers", None)
    if status is None:  # urllib.error.HTTPError carries code/headers itself
        status, headers = getattr(exc, "code", None), getattr(exc, "headers", None)
    if status is None:
        return Unavailable(describe(exc))
    return classify_http(status, headers, redact(exc))


def library_error(exc: BaseException) -> VirtError | None:
    """Map standard and well-known library failures; None when unknown."""
    kind = _library_kind(exc)
    if kind == "tls" or type(exc).__name__ == "SSLCertVerificationError":
        return _from_tls_error(exc)
    if kind == "http":
        return _from_http_error(exc)
    if kind == "reason":
        inner = getattr(exc, "reason", None)
        found = library_error(inner) if isinstance(inner, BaseException) else None
        if isinstance(found, (Unauthorized, InvalidSpec)):
            return found
        return (type(found) if found else Unavailable)(describe(exc))
    if kind is not None:
        return kind(describe(exc))
    if isinstance(exc, (TimeoutError, socket.timeout)) or any(
            k.__name__ == "TimeoutError" for k in type(exc).__mro__):
        return Timeout(describe(exc))
    if isinstance(exc, (ConnectionError, socket.gaierror, socket.herror)):
        return Unavailable(describe(exc))
    if isinstance(exc, OSError) and exc.errno == errno.ETIMEDOUT:
        return Timeout(describe(exc))
    if isinstance(exc, OSError) and exc.errno in _NET_ERRNOS:
        return Unavailable(describe(exc))
    return None
