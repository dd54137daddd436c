"""Reading domain XML back into VM fields (no hypervisor needed)."""
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import domain


def test_parse_reads_units_and_current_vcpus():
    text = ("<domain type='kvm'><name>n</name><memory unit='GiB'>2</memory>"
            "<currentMemory>1048576</currentMemory><vcpu current='2'>4</vcpu></domain>")
    vm = domain.parse_domain_xml(text)
    assert (vm["memory_mb"], vm["vcpus"], vm["domain_type"]) == (1024, 2, "kvm")
    assert vm["tags"] == [] and vm["metadata"] == {} and vm["disks"] == []
