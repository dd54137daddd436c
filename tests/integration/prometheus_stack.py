"""Prometheus' own daemons from Debian, each private to a test: its own port, directory and
process, never the system service.

:class:`Daemon` starts a program on a free loopback port and waits until it answers HTTP;
:func:`pushgateway`, :func:`node_exporter` (the textfile collector alone) and :func:`prometheus`
(its configuration, data and rules in the test's directory) build one; :func:`query` and
:func:`alerts` ask Prometheus' HTTP API.
"""
import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml

PUSHGATEWAY = "/usr/bin/prometheus-pushgateway"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
PROMETHEUS = "/usr/bin/prometheus"
START_TIMEOUT = 60.0  # seconds for a daemon to answer, on a loaded machine


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def need(program):
    if not os.access(program, os.X_OK):
        pytest.skip("%s is not installed (lab/install-deps.sh installs it)" % program)


class Daemon:
    """``argv`` (with ``{port}`` replaced) run in ``directory``, its output in ``<name>.log``;
    started once ``probe`` answers."""

    def __init__(self, name, argv, directory, probe="/metrics"):
        need(argv[0])
        self.port = _free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = os.path.join(directory, name + ".log")
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([arg.format(port=self.port) for arg in argv], cwd=directory,
                                         stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                self.get(probe)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError("%s did not start: %s" % (name, self.output())) from None
                time.sleep(0.2)

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as answer:
            return answer.read().decode("utf-8")

    def output(self):
        with open(self.log, errors="replace") as f:
            return f.read()[-3000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def pushgateway(directory):
    return Daemon("pushgateway", [PUSHGATEWAY, "--web.listen-address=127.0.0.1:{port}"], directory)


def node_exporter(directory, textfile_directory):
    """node_exporter with every collector off but the textfile one, on ``textfile_directory``."""
    return Daemon("node_exporter", [
        NODE_EXPORTER, "--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
        "--collector.textfile", "--collector.textfile.directory=" + textfile_directory,
        "--web.disable-exporter-metrics"], directory)


def prometheus(directory, targets, rule_files=(), interval="1s"):
    """Prometheus scraping ``targets`` (host:port) and evaluating ``rule_files`` every
    ``interval``; its configuration and data in ``directory``. Started once it is ready."""
    config = os.path.join(directory, "prometheus.yml")
    with open(config, "w") as f:
        yaml.safe_dump({
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": list(rule_files),
            "scrape_configs": [{"job_name": "resilient_virt",
                                "static_configs": [{"targets": list(targets)}]}],
        }, f)
    return Daemon("prometheus", [
        PROMETHEUS, "--config.file=" + config, "--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.path=" + os.path.join(directory, "prometheus-data")], directory,
        probe="/-/ready")


def _api(daemon, path):
    answer = json.loads(daemon.get(path))
    assert answer["status"] == "success", answer
    return answer["data"]


def query(daemon, expr):
    """The instant vector ``expr`` gives now: [(labels, value)]."""
    data = _api(daemon, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert data["resultType"] == "vector", data
    return [(sample["metric"], float(sample["value"][1])) for sample in data["result"]]


def alerts(daemon):
    """The alerts Prometheus holds (pending or firing): [{"labels", "state", ...}]."""
    return _api(daemon, "/api/v1/alerts")["alerts"]
