"""A real, private redis-server for tests: started on a free loopback port, never shared."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

REDIS_SERVER = "/usr/bin/redis-server"
REDIS_PASSWORD = "s3cret-Pa55word"


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server on 127.0.0.1 with no persistence, in its own temporary directory."""

    def __init__(self, tls_files=None, password=REDIS_PASSWORD, extra_args=(), port=None):
        self.dir = tempfile.mkdtemp(prefix="redis-test-")
        self.port = port or _free_port()
        self.password = password
        self.tls_files = tls_files
        args = [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port),
                "--dir", self.dir, "--save", "", "--appendonly", "no",
                "--requirepass", self.password, "--daemonize", "no",
                "--logfile", os.path.join(self.dir, "redis.log")]
        if tls_files:  # (certificate, key, CA): TLS only, clients need no certificate
            args += ["--port", "0", "--tls-port", str(self.port), "--tls-cert-file", tls_files[0],
                     "--tls-key-file", tls_files[1], "--tls-ca-cert-file", tls_files[2],
                     "--tls-auth-clients", "no"]
        self.proc = subprocess.Popen(args + list(extra_args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
        text = ""
        if os.path.exists(log):
            with open(log) as f:
                text = f.read()
        self.stop()
        pytest.fail("redis-server did not start on port %d:\n%s" % (self.port, text[-2000:]))

    def url(self, db=0):
        return "redis://:%s@127.0.0.1:%d/%d" % (self.password, self.port, db)

    def freeze(self):
        """SIGSTOP: the kernel still accepts connections, the server never answers."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def keys_and_values(self):
        """Every key and string value of every database, as one text (to search for secrets)."""
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password)
        out = []
        for db in client.info("keyspace"):
            dbclient = redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                                   db=int(db[2:]))
            for key in dbclient.scan_iter():
                kind = dbclient.type(key).decode()
                value = dbclient.get(key) if kind == "string" else dbclient.smembers(key)
                out.append("%r %r" % (key, value))
            dbclient.close()
        client.close()
        return "\n".join(out)

    def stop(self):
        if self.proc.poll() is None:
            self.thaw()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def make_tls_files(directory):
    """(certificate, key, CA) for 127.0.0.1 signed by a private CA, written to ``directory``."""
    def openssl(*args):
        subprocess.run(("openssl",) + args, cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.pem", "-days", "2", "-subj", "/CN=test-ca")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
            "-subj", "/CN=127.0.0.1")
    with open(os.path.join(directory, "ext"), "w") as handle:
        handle.write("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "ext")
    return tuple(os.path.join(str(directory), name) for name in ("srv.pem", "srv.key", "ca.pem"))


def require_redis_server():
    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.fail("%s not found: install the redis-server package (apt-get install "
                    "redis-server); the Redis state store tests need a real server" % REDIS_SERVER)
