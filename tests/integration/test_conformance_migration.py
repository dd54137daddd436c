"""The conformance suite's migration case (plugins/plugin_utils/conformance/migration.py) on the
backends that move VMs between providers: libvirt, from lab hypervisor hv3 to hv1 (real
libvirtd + QEMU on both; the VM's disk is copied)."""
import pytest

from ansible_collections.resilient.virt.plugins.plugin_utils.conformance import Backend
from ansible_collections.resilient.virt.plugins.plugin_utils.conformance.migration import (
    MigrationCases)


class TestLibvirtMigration(MigrationCases):
    """migrate_to between two lab hypervisors."""

    @pytest.fixture
    def conformance_backend(self, lab):
        provider = {"type": "libvirt", "name": "conformance-hv3", "domain_type": "qemu",
                    "uri": lab.hypervisor("hv3").uri}
        return Backend(provider=provider,
                       spec={"vcpus": 1, "memory_mb": 64, "disks": [{"size_gb": 1}]})

    @pytest.fixture
    def conformance_migration_target(self, lab):
        return {"type": "libvirt", "name": "conformance-hv1", "domain_type": "qemu",
                "uri": lab.hypervisor("hv1").uri}
