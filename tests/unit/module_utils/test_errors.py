"""Error taxonomy, cause-chain lookup and classification of real library exceptions."""
import errno
import os
import socket
import subprocess
import sys
import urllib.error
from email.utils import formatdate

import pytest
import requests
import urllib3

from ansible_collections.resilient.virt.plugins.module_utils import errors as E

from paths import COLLECTIONS

NOT_RETRYABLE = (E.NotFound, E.InvalidSpec, E.Unauthorized, E.NotSupported, E.QuotaExceeded,
                 E.Conflict, E.Internal)
RETRYABLE = (E.Retryable, E.Unavailable, E.RateLimit, E.Timeout)


@pytest.mark.parametrize("klass", NOT_RETRYABLE + RETRYABLE)
def test_taxonomy_type_flags_and_dict(klass):
    err = klass("boom", retry_after=3, details={"k": 1})
    assert err.type == klass.__name__
    assert err.retryable is (klass in RETRYABLE)
    assert str(err) == "boom" == err.message
    assert err.to_dict() == {"type": klass.__name__, "message": "boom",
                             "retryable": klass in RETRYABLE, "retry_after": 3.0,
                             "details": {"k": 1}}
    assert isinstance(err, E.VirtError)


def test_to_dict_without_details_has_four_keys():
    assert E.NotFound("x").to_dict() == {"type": "NotFound", "message": "x", "retryable": False, "retry_after": None}


def test_subclass_gets_its_own_type_name():
    class DiskMissing(E.NotFound):
        pass
    assert DiskMissing("d").type == "DiskMissing"
    assert DiskMissing.retryable is False


def test_breaker_open_carries_breaker_and_half_open_time():
    import time
    at = int(time.time()) + 20.25
    err = E.BreakerOpen("libvirt:lab1", at)
    assert err.type == "BreakerOpen" and err.retryable is False
    assert err.breaker == "libvirt:lab1" and err.half_open_at == at
    assert "libvirt:lab1" in str(err) and "half-opens at" in str(err)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(at) + 1))  # rounded up
    assert when in str(err)
    assert 19 <= err.retry_after <= 20.25
    assert err.to_dict()["details"]["breaker"] == "libvirt:lab1"
    assert err.to_dict()["details"]["half_open_at"] == when
    assert not E.counts_against_breaker(err)


def test_find_error_direct_from_and_context():
    base = E.NotFound("vm x")
    assert E.find_error(base) is base
    try:
        try:
            raise base
        except E.NotFound as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert E.find_error(wrapped) is base
    try:
        try:
            raise base
        except E.NotFound:
            raise KeyError("during handling")  # noqa: B904 - the implicit context is the point
    except KeyError as ctx:
        assert E.find_error(ctx) is base
    assert E.find_error(ValueError("plain")) is None
    assert E.find_error(None) is None


def test_find_error_ignores_suppressed_context():
    try:
        try:
            raise E.Unavailable("down")
        except E.Unavailable:
            raise ValueError("unrelated") from None
    except ValueError as exc:
        assert E.find_error(exc) is None


def test_find_error_follows_cause_attribute_and_survives_cycles():
    class LibError(Exception):
        def __init__(self, msg, cause=None):
            super().__init__(msg)
            self.cause = cause

    inner = E.Timeout("slow")
    outer = LibError("lib failed", cause=LibError("middle", cause=inner))
    assert E.find_error(outer) is inner
    a, b = LibError("a"), LibError("b")
    a.cause, b.cause = b, a
    assert E.find_error(a) is None
    assert isinstance(E.classify(a), E.Internal)


def test_classify_keeps_found_error_and_uses_plugged_classifiers():
    inner = E.Conflict("busy")
    wrapped = RuntimeError("x")
    wrapped.__cause__ = inner
    assert E.classify(wrapped) is inner

    class BackendFault(Exception):
        pass
    seen = []

    def nothing(exc):
        seen.append("nothing")

    def backend(exc):
        seen.append("backend")
        return E.QuotaExceeded("no room") if isinstance(exc, BackendFault) else None
    fault = BackendFault("NoDiskSpace")
    err = E.classify(fault, classifiers=(nothing, backend))
    assert isinstance(err, E.QuotaExceeded) and err.cause is fault
    assert seen == ["nothing", "backend"]
    assert isinstance(E.classify(ValueError("v"), (backend,)), E.Internal)


@pytest.mark.parametrize("exc, klass", [
    (socket.timeout("timed out"), E.Timeout),
    (TimeoutError("t"), E.Timeout),
    (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), E.Unavailable),
    (ConnectionResetError(errno.ECONNRESET, "reset"), E.Unavailable),
    (BrokenPipeError(errno.EPIPE, "pipe"), E.Unavailable),
    (socket.gaierror(-2, "Name or service not known"), E.Unavailable),
    (OSError(errno.EHOSTUNREACH, "No route to host"), E.Unavailable),
    (OSError(errno.ENETUNREACH, "Network is unreachable"), E.Unavailable),
    (OSError(errno.ETIMEDOUT, "Connection timed out"), E.Timeout),
    (OSError(errno.ENOENT, "No such file"), E.Internal),
    (ValueError("bad"), E.Internal),
    (requests.exceptions.ConnectTimeout("ct"), E.Timeout),
    (requests.exceptions.ReadTimeout("rt"), E.Timeout),
    (requests.exceptions.ConnectionError("ce"), E.Unavailable),
    (requests.exceptions.ChunkedEncodingError("chunk"), E.Unavailable),
    (requests.exceptions.InvalidURL("bad url"), E.Internal),
    (urllib3.exceptions.MaxRetryError(None, "/x", urllib3.exceptions.NewConnectionError(
        None, "refused")), E.Unavailable),
    (urllib3.exceptions.ReadTimeoutError(None, "/x", "read timed out"), E.Timeout),
    (urllib3.exceptions.LocationParseError("::bad"), E.Internal),
    (urllib.error.URLError(ConnectionRefusedError(111, "refused")), E.Unavailable),
])
def test_classify_builtin_failures(exc, klass):
    err = E.classify(exc)
    assert isinstance(err, klass) and err.type == klass.type
    assert err.cause is exc
    assert type(exc).__name__ in err.message


def _response(status, headers=None):
    response = requests.models.Response()
    response.status_code = status
    response.headers.update(headers or {})
    response.reason = "reason"
    return response


def test_classify_requests_http_error_uses_response():
    exc = requests.exceptions.HTTPError("503 Server Error", response=_response(503, {"retry-after": "7"}))
    err = E.classify(exc)
    assert isinstance(err, E.Unavailable) and err.retry_after == 7.0 and err.cause is exc
    assert isinstance(E.classify(requests.exceptions.HTTPError(
        "404", response=_response(404))), E.NotFound)


def test_classify_urllib_http_error():
    exc = urllib.error.HTTPError("http://h/x", 429, "Too Many", {"Retry-After": "2"}, None)
    err = E.classify(exc)
    assert isinstance(err, E.RateLimit) and err.retry_after == 2.0


def test_user_class_named_like_library_class_is_not_mistaken():
    class HTTPError(Exception):
        pass
    assert isinstance(E.classify(HTTPError("mine")), E.Internal)


def test_certificate_failure_is_unauthorized_not_retried():
    exc = requests.exceptions.SSLError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    err = E.classify(exc)
    assert isinstance(err, E.Unauthorized) and not err.retryable
    assert "validate_certs" in err.message
    assert isinstance(E.classify(requests.exceptions.SSLError("EOF occurred in violation")),
                      E.Unavailable)


def test_classify_hides_credentials_in_messages():
    err = E.classify(requests.exceptions.ConnectionError(
        "cannot reach https://admin:s3cret@vc.example:443/sdk?password=hunter2"))
    assert "s3cret" not in err.message and "hunter2" not in err.message
    assert "vc.example" in err.message


@pytest.mark.parametrize("status, klass", [
    (400, E.InvalidSpec), (422, E.InvalidSpec), (401, E.Unauthorized), (403, E.Unauthorized),
    (404, E.NotFound), (409, E.Conflict), (412, E.Conflict), (429, E.RateLimit),
    (501, E.NotSupported), (408, E.Timeout), (504, E.Timeout), (500, E.Unavailable),
    (502, E.Unavailable), (503, E.Unavailable), (402, E.QuotaExceeded), (413, E.QuotaExceeded),
    (507, E.QuotaExceeded), (418, E.InvalidSpec), (451, E.InvalidSpec), (599, E.Unavailable),
])
def test_classify_http_table(status, klass):
    err = E.classify_http(status, message="text")
    assert isinstance(err, klass) and err.type == klass.type
    assert err.message == "HTTP %d: text" % status
    assert err.details == {"status": status}


def test_retry_after_seconds_and_http_date():
    assert E.classify_http(429, {"Retry-After": "120"}).retry_after == 120.0
    assert E.classify_http("503", {"retry-after": " 5 "}).retry_after == 5.0
    import time
    later = formatdate(time.time() + 60, usegmt=True)
    assert 55 <= E.classify_http(429, {"Retry-After": later}).retry_after <= 60
    assert E.classify_http(429, {"Retry-After": "soon"}).retry_after is None
    assert E.classify_http(429).retry_after is None
    assert E.classify_http(500, {"Retry-After": "9"}).retry_after is None


def test_parse_retry_after_against_fixed_clock():
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    epoch = 1445412480.0
    assert E.parse_retry_after(date, now=epoch - 30) == 30.0
    assert E.parse_retry_after(date, now=epoch + 30) == 0.0
    assert E.parse_retry_after("-3") == 0.0
    assert E.parse_retry_after(None) is None
    assert E.parse_retry_after("not a date") is None


def test_counts_against_breaker():
    assert E.counts_against_breaker(E.Unavailable("x"))
    assert E.counts_against_breaker(E.Timeout("x"))
    assert E.counts_against_breaker(E.Retryable("x"))
    assert not E.counts_against_breaker(E.RateLimit("x"))
    for klass in NOT_RETRYABLE:
        assert not E.counts_against_breaker(klass("x"))
    assert E.counts_against_breaker(ConnectionRefusedError(111, "refused"))
    assert not E.counts_against_breaker(ValueError("bug"))


def test_import_and_classify_load_no_http_library():
    code = ("import sys\n"
            "from ansible_collections.resilient.virt.plugins.module_utils import errors\n"
            "errors.classify(ConnectionResetError(104, 'reset'))\n"
            "errors.classify_http(429, {'Retry-After': '3'})\n"
            "bad = [m for m in ('requests', 'urllib3', 'http.client', 'ssl') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True,
                   env=dict(os.environ, PYTHONPATH=os.path.abspath(COLLECTIONS)))


def test_tls_against_a_plain_text_port_is_a_configuration_error_with_the_fix():
    """What Python's ssl raises when https meets a plain-HTTP port (seen against the lab's
    simulator): retrying cannot help, so it is InvalidSpec, and the message says what to check."""
    import socket
    import ssl
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def answer_in_plain_http():
        conn, _addr = server.accept()
        conn.recv(1024)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        conn.close()

    threading.Thread(target=answer_in_plain_http, daemon=True).start()
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with pytest.raises(ssl.SSLError) as info:
        context.wrap_socket(socket.create_connection(server.getsockname()))
    server.close()
    err = E.classify(info.value)
    assert isinstance(err, E.InvalidSpec) and not err.retryable
    assert "TLS handshake failed" in err.message and "check the port" in err.message
    assert not E.counts_against_breaker(err)


def test_a_broken_tls_connection_is_still_a_passing_outage():
    import ssl

    assert isinstance(E.classify(ssl.SSLEOFError(8, "EOF occurred in violation of protocol")),
                      E.Unavailable)
