"""Provider test fixtures: a SQLite state store in tmp_path, a test:///default libvirt config."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

from provider_testing import TEST_POOL, TEST_URI


@pytest.fixture
def store(tmp_path):
    return open_store("sqlite:///%s" % (tmp_path / "state.db"), environ={})


@pytest.fixture
def libvirt_config():
    return {"type": "libvirt", "uri": TEST_URI, "storage_pool": TEST_POOL, "name": "unit"}
