"""Real Redis topologies for tests: a Sentinel-watched primary with a replica, and a Cluster.

Every process is a real ``redis-server`` or ``redis-sentinel`` on loopback, private to the test
run, with passwords; nothing is shared with the machine's own Redis.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
from redis_server import REDIS_PASSWORD, RedisServer

REDIS_SENTINEL = "/usr/bin/redis-sentinel"
REDIS_CLI = "/usr/bin/redis-cli"
SENTINEL_PASSWORD = "Sentinel-Pa55word"
SERVICE = "storemaster"


def _port_with_bus():
    """A free port whose cluster bus port (port + 10000) is free too."""
    while True:
        with socket.socket() as sock, socket.socket() as bus:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
            if port + 10000 > 65535:
                continue
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
            return port


def _wait(predicate, seconds, what):
    """The predicate's first true answer, asked every 0.1 s for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            answer = predicate()
            if answer:
                return answer
        except Exception:  # noqa: BLE001 - the servers are still starting
            pass
        time.sleep(0.1)
    pytest.fail("%s did not happen within %gs" % (what, seconds))


def _client(port, password=REDIS_PASSWORD, **kwargs):
    import redis

    return redis.Redis(host="127.0.0.1", port=port, password=password, socket_timeout=2, **kwargs)


class SentinelSetup:
    """A primary, a replica and three Sentinels (quorum 2, failover after 1 s of silence).

    ``tls_files`` (certificate, key, CA): every server and Sentinel speaks only TLS."""

    def __init__(self, tls_files=None):
        self.tls = {"ssl": True, "ssl_ca_certs": tls_files[2]} if tls_files else {}
        replication = ["--masterauth", REDIS_PASSWORD] + (["--tls-replication", "yes"] if tls_files else [])
        self.servers = [RedisServer(tls_files, extra_args=replication)]
        self.servers.append(RedisServer(tls_files, extra_args=replication + [
            "--replicaof", "127.0.0.1", str(self.servers[0].port)]))
        self.dir = tempfile.mkdtemp(prefix="redis-sentinel-")
        self.sentinel_ports = []
        self.sentinels = []
        for index in range(3):
            port = _port_with_bus()
            listen = ["port %d" % port]
            if tls_files:
                listen = ["port 0", "tls-port %d" % port, "tls-cert-file %s" % tls_files[0],
                          "tls-key-file %s" % tls_files[1], "tls-ca-cert-file %s" % tls_files[2],
                          "tls-auth-clients no", "tls-replication yes"]
            conf = os.path.join(self.dir, "sentinel%d.conf" % index)
            with open(conf, "w") as handle:
                handle.write("\n".join(listen + [
                    "bind 127.0.0.1", "daemonize no",
                    "dir %s" % self.dir, "logfile %s" % os.path.join(self.dir, "s%d.log" % index),
                    "requirepass %s" % SENTINEL_PASSWORD,
                    "sentinel sentinel-pass %s" % SENTINEL_PASSWORD,
                    "sentinel monitor %s 127.0.0.1 %d 2" % (SERVICE, self.servers[0].port),
                    "sentinel auth-pass %s %s" % (SERVICE, REDIS_PASSWORD),
                    "sentinel down-after-milliseconds %s 1000" % SERVICE,
                    "sentinel failover-timeout %s 5000" % SERVICE, ""]))
            self.sentinel_ports.append(port)
            self.sentinels.append(subprocess.Popen([REDIS_SENTINEL, conf], stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL))
        try:
            _wait(self._ready, 30, "Sentinels seeing the primary, its replica and each other")
        except BaseException:
            self.stop()
            raise

    def _ask(self, port, *args):
        """A SENTINEL command, raw (redis-py 6.4's parsers of these replies are broken)."""
        client = _client(port, SENTINEL_PASSWORD, **self.tls)
        try:
            return client.execute_command("SENTINEL", *args)
        finally:
            client.close()

    def _ready(self):
        for port in self.sentinel_ports:
            reply = self._ask(port, "MASTER", SERVICE)
            master = dict(zip(reply[::2], reply[1::2]))
            if int(master[b"num-slaves"]) < 1 or int(master[b"num-other-sentinels"]) < 2:
                return False
        return _client(self.servers[1].port, **self.tls).info("replication")["master_link_status"] == "up"

    def url(self, db=0, scheme="redis+sentinel"):
        return "%s://:%s@%s/%s/%d?sentinel_password=%s" % (
            scheme, REDIS_PASSWORD, ",".join("127.0.0.1:%d" % p for p in self.sentinel_ports),
            SERVICE, db, SENTINEL_PASSWORD)

    def primary_port(self, sentinel_port=None):
        port = sentinel_port or self.sentinel_ports[0]
        return int(self._ask(port, "GET-MASTER-ADDR-BY-NAME", SERVICE)[1])

    def server(self, port):
        return next(server for server in self.servers if server.port == port)

    def _agreed_primary(self):
        """(port, replication info) of the primary every Sentinel names, if it says it is one;
        else None."""
        ports = {self.primary_port(port) for port in self.sentinel_ports}
        if len(ports) != 1:
            return None
        port = ports.pop()
        replication = _client(port, **self.tls).info("replication")
        return (port, replication) if replication["role"] == "master" else None

    def settled_primary(self):
        """The agreed primary's port once it serves a replica, else None.

        After a failover (or a primary frozen past the Sentinels' patience) the roles move for a
        few seconds; a test begins only on a settled setup."""
        agreed = self._agreed_primary()
        return agreed[0] if agreed and agreed[1]["connected_slaves"] >= 1 else None

    def flush(self):
        """Empty the settled primary and wait until its replica has the emptiness too."""
        def flushed():
            port = self.settled_primary()
            if port is None:
                return False
            client = _client(port, **self.tls)
            try:
                client.flushall()
                return client.execute_command("WAIT", 1, 5000) >= 1
            finally:
                client.close()
        _wait(flushed, 60, "an emptied primary whose replica has caught up")

    def kill_primary(self):
        """SIGKILL the primary; return its port."""
        port = self.primary_port()
        server = self.server(port)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        return port

    def wait_failover(self, old_port, seconds=60):
        """Wait until every Sentinel names a new primary that accepts writes; return its port."""
        def moved():
            agreed = self._agreed_primary()
            return agreed[0] if agreed and agreed[0] != old_port else None
        return _wait(moved, seconds, "the Sentinels' failover")

    def restart(self, port, attempts=2):
        """Start a killed server again on its port, as a replica of the primary the Sentinels
        agree on once they have replaced it (a loaded machine may take them more than one
        failover attempt, each 5 s apart), and wait until the setup has settled again with it:
        replicating, or promoted by the Sentinels with a replica of its own. A server that
        does neither within 60 s is stopped and started once more against the primary they
        then agree on; if that fails too, the failure quotes the servers' and Sentinels' logs
        (in two full runs on a loaded machine the link never came up, the cause unseen)."""
        index = self.servers.index(self.server(port))
        for attempt in range(attempts):
            primary = self.wait_failover(port)
            self.servers[index].stop()
            self.servers[index] = RedisServer(port=port, extra_args=[
                "--masterauth", REDIS_PASSWORD, "--replicaof", "127.0.0.1", str(primary)])
            try:
                _wait(lambda: self._settled_with(port), 60,
                      "a settled setup with the restarted server (replicating, or the primary)")
                return
            except pytest.fail.Exception as failure:
                if attempt == attempts - 1:
                    pytest.fail("%s\n%s" % (failure, self._logs()))

    def _settled_with(self, port):
        settled = self.settled_primary()
        return settled is not None and (
            settled == port or _client(port).info("replication")["master_link_status"] == "up")

    def _logs(self, lines=15):
        """The last lines of every server's and Sentinel's log, to say why a setup did not settle."""
        logs = [os.path.join(server.dir, "redis.log") for server in self.servers]
        logs += [os.path.join(self.dir, "s%d.log" % index) for index in range(len(self.sentinels))]
        out = []
        for path in logs:
            try:
                with open(path) as handle:
                    tail = handle.readlines()[-lines:]
            except OSError as error:
                tail = ["(%s)\n" % error]
            out.append("== %s\n%s" % (os.path.relpath(path, os.path.dirname(os.path.dirname(path))),
                                      "".join(tail)))
        return "\n".join(out)

    def stop(self):
        for proc in self.sentinels:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)
        for server in self.servers:
            server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class ClusterSetup:
    """Three primaries with ``--cluster-enabled yes``, slots spread by ``redis-cli --cluster``."""

    def __init__(self):
        self.servers = []
        for _dummy in range(3):
            port = _port_with_bus()
            self.servers.append(RedisServer(port=port, extra_args=[
                "--cluster-enabled", "yes", "--cluster-node-timeout", "2000",
                "--masterauth", REDIS_PASSWORD]))  # nodes.conf in the server's own directory
        create = subprocess.run(
            [REDIS_CLI, "--no-auth-warning", "-a", REDIS_PASSWORD, "--cluster", "create"]
            + ["127.0.0.1:%d" % server.port for server in self.servers] + ["--cluster-yes"],
            capture_output=True, text=True, timeout=60, check=False)
        if create.returncode != 0:
            self.stop()
            pytest.fail("redis-cli --cluster create failed:\n%s%s" % (create.stdout, create.stderr))
        _wait(self._ready, 30, "the cluster reporting cluster_state:ok on every node")

    def _ready(self):
        for server in self.servers:
            client = _client(server.port)
            try:
                if client.execute_command("CLUSTER INFO").get("cluster_state") != "ok":
                    return False
            finally:
                client.close()
        return True

    def url(self, scheme="redis+cluster"):
        return "%s://:%s@%s" % (scheme, REDIS_PASSWORD,
                                ",".join("127.0.0.1:%d" % s.port for s in self.servers))

    def client(self):
        from redis.cluster import ClusterNode, RedisCluster

        return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", s.port) for s in self.servers],
                            password=REDIS_PASSWORD, socket_timeout=2)

    def flush(self):
        for server in self.servers:
            client = _client(server.port)
            client.flushall()
            client.close()

    def stop(self):
        for server in self.servers:
            server.stop()


def require_redis_topologies():
    for path in (REDIS_SENTINEL, REDIS_CLI):
        if not os.access(path, os.X_OK):
            pytest.fail("%s not found: install the redis-sentinel and redis-tools packages "
                        "(apt-get install redis-sentinel); the Sentinel and Cluster state "
                        "store tests need them" % path)


def raw_client(url):
    """A plain redis-py client on the data of a Sentinel or Cluster store URL made by these
    setups (the primary the Sentinels name, or every node of the Cluster): the tests' own view."""
    import redis
    from redis.cluster import ClusterNode, RedisCluster

    hosts = url.split("@", 1)[1].split("/", 1)[0].split("?", 1)[0]
    ports = [int(text.rsplit(":", 1)[1]) for text in hosts.split(",")]
    if url.startswith("redis+cluster://"):
        return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports],
                            password=REDIS_PASSWORD, socket_timeout=2)
    client = _client(ports[0], SENTINEL_PASSWORD)
    try:
        primary = int(client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)[1])
    finally:
        client.close()
    return redis.Redis(host="127.0.0.1", port=primary, password=REDIS_PASSWORD, socket_timeout=2)
