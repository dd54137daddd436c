"""The REST tag client's failures, against a real HTTP server on loopback that answers what
vCenter answers in the cases the simulator cannot produce (403, 503, odd bodies, silence).

The happy paths and the simulator's real answers are in tests/integration/test_vsphere_tags.py.
"""
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    InvalidSpec, NotSupported, Timeout, Unauthorized, Unavailable, VirtError)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import (
    VSphereProvider)

PASSWORD = "pw-Zq81-secret"
SESSION = "sid-4f1c-0c9a-secret"
SESSION_PATH = "/rest/com/vmware/cis/session"
CATEGORIES = "/rest/com/vmware/cis/tagging/category"


class Server:
    """An HTTP server on 127.0.0.1: ``routes[(method, path)]`` is ``(status, body, headers)``
    or a function of the request returning that; every request is kept in ``requests``."""

    def __init__(self):
        self.routes = {("POST", SESSION_PATH): (200, {"value": SESSION}, {}),
                       ("DELETE", SESSION_PATH): (200, None, {})}
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                request = {"method": self.command, "path": self.path,
                           "headers": dict(self.headers),
                           "body": json.loads(self.rfile.read(length)) if length else None}
                server.requests.append(request)
                route = server.routes.get((self.command, self.path), (404, None, {}))
                status, body, headers = route(request) if callable(route) else route
                data = body if isinstance(body, bytes) else \
                    b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                for key, value in dict(headers, **{"Content-Length": str(len(data))}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = answer

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    running = Server()
    yield running
    running.stop()


def provider(port, **options):
    config = {"type": "vsphere", "host": "127.0.0.1", "port": port, "protocol": "http",
              "username": "automation", "password": PASSWORD, "timeout": "2s"}
    config.update(options)
    return VSphereProvider(config)


def failure(fn, *args):
    with pytest.raises(VirtError) as caught:
        fn(*args)
    err = caught.value
    assert PASSWORD not in err.message and SESSION not in err.message
    assert PASSWORD not in repr(err.details) and SESSION not in repr(err.details)
    return err


def test_login_sends_basic_auth_once_then_the_session_header(server):
    server.routes[("GET", CATEGORIES)] = (200, {"value": []}, {})
    p = provider(server.port)
    client = p._tags()
    assert client.category(create=False) is None
    login, listing = server.requests
    assert login["headers"]["Authorization"].startswith("Basic ")
    assert login["headers"]["vmware-use-header-authn"] == "true"
    assert "Authorization" not in listing["headers"]
    assert listing["headers"]["vmware-api-session-id"] == SESSION
    p.close()
    logout = server.requests[-1]
    assert (logout["method"], logout["path"]) == ("DELETE", SESSION_PATH)
    assert logout["headers"]["vmware-api-session-id"] == SESSION and not client.alive


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_login_is_unauthorized(server, status):
    server.routes[("POST", SESSION_PATH)] = (status, {"type": "unauthenticated"}, {})
    err = failure(provider(server.port)._tags)
    assert isinstance(err, Unauthorized) and not err.retryable
    assert "provider.username and provider.password" in err.message
    assert err.details == {"status": status}


def test_an_endpoint_without_the_rest_api_is_not_supported(server):
    server.routes.clear()  # 404 for everything, as an ESXi host
    err = failure(provider(server.port)._tags)
    assert isinstance(err, NotSupported)
    assert "no vSphere Automation API" in err.message and "tags need vCenter" in err.message
    assert "provider.host" in err.message


def test_http_failures_map_into_the_taxonomy_without_secrets(server):
    client = provider(server.port)._tags()
    echo = {"type": "com.vmware.vapi.std.errors.invalid_argument",
            "value": {"messages": [{"default_message": "bad session %s or %s" % (SESSION,
                                                                                 PASSWORD)}]}}
    cases = [((503, b"", {"Retry-After": "7"}), Unavailable),
             ((500, b"oops", {}), Unavailable),
             ((400, echo, {}), InvalidSpec),
             ((403, {"type": "com.vmware.vapi.std.errors.unauthorized"}, {}), Unauthorized)]
    for answer, kind in cases:
        server.routes[("GET", CATEGORIES)] = answer
        err = failure(client.category, False)
        # the exact class: a subclass would be another error type
        assert type(err) is kind, (answer, err)  # pylint: disable=unidiomatic-typecheck
        assert "vSphere REST API of 127.0.0.1:%d" % server.port in err.message
    server.routes[("GET", CATEGORIES)] = cases[0][0]
    assert failure(client.category, False).retry_after == 7
    server.routes[("GET", CATEGORIES)] = (400, echo, {})
    err = failure(client.category, False)
    assert "invalid_argument" in err.message and "(session id)" in err.message
    server.routes[("GET", CATEGORIES)] = cases[3][0]
    assert "tagging privileges" in failure(client.category, False).message


def test_a_body_that_is_not_a_vapi_answer_is_unavailable(server):
    client = provider(server.port)._tags()
    for body in (b"<html>proxy login</html>", [1, 2]):
        server.routes[("GET", CATEGORIES)] = (200, body, {})
        err = failure(client.category, False)
        assert isinstance(err, Unavailable) and "not a vAPI JSON answer" in err.message


def test_an_expired_session_is_dropped_and_the_next_call_logs_in(server):
    p = provider(server.port)
    client = p._tags()
    server.routes[("GET", CATEGORIES)] = (401, {"type": "unauthenticated"}, {})
    err = failure(client.category, False)
    assert isinstance(err, Unavailable) and err.retryable and "logs in again" in err.message
    assert not client.alive
    server.routes[("GET", CATEGORIES)] = (200, {"value": []}, {})
    assert p._tags() is not client and p._tags().category(create=False) is None
    assert [r["method"] for r in server.requests if r["path"] == SESSION_PATH] == ["POST", "POST"]


def test_an_unreachable_endpoint_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    err = failure(provider(port)._tags)
    assert isinstance(err, Unavailable) and err.retryable
    assert "vSphere REST API of 127.0.0.1:%d" % port in err.message


def test_an_endpoint_that_never_answers_times_out():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)  # accepts connections, never answers
        started = time.monotonic()
        err = failure(provider(sock.getsockname()[1], timeout="0.5s")._tags)
    assert isinstance(err, Timeout) and "did not answer within 0.5s" in err.message
    assert time.monotonic() - started < 5


def test_no_proxy_or_credentials_from_the_environment(server, monkeypatch, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = "http://127.0.0.1:%d" % sock.getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", dead)
    monkeypatch.setenv("http_proxy", dead)
    monkeypatch.setenv("NO_PROXY", "")
    (tmp_path / "netrc").write_text("machine 127.0.0.1 login other password fromnetrc\n")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    server.routes[("GET", CATEGORIES)] = (200, {"value": []}, {})
    assert provider(server.port)._tags().category(create=False) is None
    import base64
    login = server.requests[0]["headers"]["Authorization"].split()[1]
    assert base64.b64decode(login).decode() == "automation:" + PASSWORD


def test_a_category_created_meanwhile_is_found(server):
    made = {"done": False}

    def listing(request):
        return 200, {"value": ["cat-1"] if made["done"] else []}, {}

    def create(request):
        made["done"] = True  # another task created it between our listing and our create
        return 400, {"type": "com.vmware.vapi.std.errors.already_exists"}, {}

    server.routes[("GET", CATEGORIES)] = listing
    server.routes[("POST", CATEGORIES)] = create
    server.routes[("GET", CATEGORIES + "/id:cat-1")] = (200, {"value": {
        "id": "cat-1", "name": "resilient.virt"}}, {})
    client = provider(server.port)._tags()
    assert client.category(create=True) == "cat-1"
    posted = [r["body"] for r in server.requests if r["method"] == "POST"
              and r["path"] == CATEGORIES][0]["create_spec"]
    assert posted["cardinality"] == "MULTIPLE" and posted["associable_types"] == [
        "VirtualMachine"] and posted["name"] == "resilient.virt"
