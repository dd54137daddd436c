"""Helpers shared by the provider tests (imported by name: tests/ is on sys.path)."""
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.silent import SilentEndpoint

from paths import COLLECTIONS, ROOT

__all__ = ("COLLECTIONS", "ROOT", "TEST_URI", "TEST_POOL", "quick_settings", "SilentDaemon")

TEST_URI = "test:///default"
TEST_POOL = "default-pool"  # the storage pool test:///default comes with


def quick_settings(**overrides):
    """Settings independent of the environment, with short waits so retries stay fast."""
    option = {"base_delay": "10ms", "max_delay": "50ms", "max_attempts": 3}
    option.update(overrides)
    return resolve_settings(option, environ={})


class SilentDaemon(SilentEndpoint):
    """A unix socket that accepts connections and never answers: a hung libvirtd."""

    @property
    def path(self):
        return self.address
