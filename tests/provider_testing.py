"""Helpers shared by the provider tests (imported by name: tests/ is on sys.path)."""
import socket
import threading

from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings

from paths import COLLECTIONS, ROOT

__all__ = ("COLLECTIONS", "ROOT", "TEST_URI", "TEST_POOL", "quick_settings", "SilentDaemon")

TEST_URI = "test:///default"
TEST_POOL = "default-pool"  # the storage pool test:///default comes with


def quick_settings(**overrides):
    """Settings independent of the environment, with short waits so retries stay fast."""
    option = {"base_delay": "10ms", "max_delay": "50ms", "max_attempts": 3}
    option.update(overrides)
    return resolve_settings(option, environ={})


class SilentDaemon:
    """A unix socket that accepts connections and never answers: a hung libvirtd."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(8)
        self.accepted = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        for conn in self.accepted:
            conn.close()
        self.sock.close()
