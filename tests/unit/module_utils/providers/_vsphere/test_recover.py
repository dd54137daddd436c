"""The .vmx path a datastore search result names, in vCenter's form and in the simulator's."""
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.recover import (
    _datastore_path)


def test_a_search_result_names_the_vmx_in_vcenters_form():
    assert _datastore_path("[ds1] web/", "web.vmx") == "[ds1] web/web.vmx"
    assert _datastore_path("[ds1]/web", "web.vmx") == "[ds1] web/web.vmx"  # the simulator's
    assert _datastore_path("[ds1]", "web.vmx") == "[ds1] web.vmx"
    assert _datastore_path("[shared ds] a/b", "web.vmx") == "[shared ds] a/b/web.vmx"
