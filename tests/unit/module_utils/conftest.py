"""State store fixtures: a SQLite file in tmp_path and a real, private redis-server."""
import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
COLLECTIONS = os.path.join(ROOT, ".build", "collections")  # prepared by tests/conftest.py
REDIS_SERVER = "/usr/bin/redis-server"
REDIS_PASSWORD = "s3cret-Pa55word"


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server on 127.0.0.1 with no persistence, in its own temporary directory."""

    def __init__(self, tls_files=None):
        self.dir = tempfile.mkdtemp(prefix="redis-test-")
        self.port = _free_port()
        self.password = REDIS_PASSWORD
        self.tls_files = tls_files
        args = [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port),
                "--dir", self.dir, "--save", "", "--appendonly", "no",
                "--requirepass", self.password, "--daemonize", "no",
                "--logfile", os.path.join(self.dir, "redis.log")]
        if tls_files:  # (certificate, key, CA): TLS only, clients need no certificate
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", tls_files[0],
                     "--tls-key-file", tls_files[1], "--tls-ca-cert-file", tls_files[2],
                     "--tls-auth-clients", "no"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._wait_ready()

    def _wait_ready(self):
        import redis

        tls = {"ssl": True, "ssl_ca_certs": self.tls_files[2]} if self.tls_files else {}
        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                             socket_timeout=1, **tls)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                client.ping()
                client.close()
                return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        log = os.path.join(self.dir, "redis.log")
        text = open(log).read() if os.path.exists(log) else ""
        self.stop()
        pytest.fail("redis-server did not start on port %d:\n%s" % (self.port, text[-2000:]))

    def url(self, db=0):
        return "redis://:%s@127.0.0.1:%d/%d" % (self.password, self.port, db)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _require_redis_server():
    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.fail("%s not found: install the redis-server package (apt-get install "
                    "redis-server); the Redis state store tests need a real server" % REDIS_SERVER)


@pytest.fixture(scope="session")
def redis_server():
    """A private redis-server for the session; fails (never skips) when it is not installed."""
    _require_redis_server()
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def start_redis_server():
    """``start_redis_server(tls_files=None)`` starts another private server, stopped at the end."""
    _require_redis_server()
    started = []

    def start(tls_files=None):
        started.append(RedisServer(tls_files))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def redis_url(redis_server):
    """URL of an emptied database on the private server (with its password)."""
    import redis

    client = redis.Redis.from_url(redis_server.url())
    client.flushdb()
    client.close()
    return redis_server.url()


@pytest.fixture
def sqlite_url(tmp_path):
    return "sqlite://%s" % (tmp_path / "state" / "state.db")


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request):
    """Each test using it runs once on SQLite and once on Redis."""
    return request.getfixturevalue(request.param + "_url")


@pytest.fixture
def store(store_url):
    from ansible_collections.resilient.virt.plugins.module_utils.state_store import open_store

    opened = open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture
def child_env():
    """Environment for child Python processes that import the collection."""
    env = dict(os.environ)
    env["PYTHONPATH"] = COLLECTIONS + os.pathsep + env.get("PYTHONPATH", "")
    return env
