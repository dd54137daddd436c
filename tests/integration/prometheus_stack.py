"""Prometheus' own daemons from Debian, each private to a test: its own port, directory and
process, never the system service.

:class:`Daemon` starts a program on a free loopback port and waits until it answers HTTP;
:func:`pushgateway` builds one.
"""
import os
import socket
import subprocess
import time
import urllib.request

import pytest

PUSHGATEWAY = "/usr/bin/prometheus-pushgateway"
START_TIMEOUT = 60.0  # seconds for a daemon to answer, on a loaded machine


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def need(program):
    if not os.access(program, os.X_OK):
        pytest.skip("%s is not installed (lab/install-deps.sh installs it)" % program)


class Daemon:
    """``argv`` (with ``{port}`` replaced) run in ``directory``, its output in ``<name>.log``."""

    def __init__(self, name, argv, directory):
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
                self.get("/metrics")
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

