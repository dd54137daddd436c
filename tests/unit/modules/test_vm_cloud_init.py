"""The vm module never shows cloud_init.user_data: not in its result, its invocation or its error,
on the failure path that test:///default gives (it cannot upload the seed)."""
import json
import sys
import uuid

from ansible_collections.resilient.virt.plugins.modules import vm

from tests.unit.modules.test_fuzz import run_module


def test_user_data_is_masked_and_short_values_do_not_garble_the_result(tmp_path):
    marker = "it-img-S3cret-%s" % uuid.uuid4().hex[:8]
    # under keys whose names do not say secret: only no_log keeps the marker hidden
    user_data = {"ssh_authorized_keys": ["ssh-ed25519 %s" % marker], "write_files": [
        {"path": "/etc/x", "content": marker, "permissions": 1}], "runcmd": [["sh", "-c", "id"]]}
    result, printed = run_module(vm.VmModule, {
        "provider": {"type": "libvirt", "uri": "test:///default", "storage_pool": "default-pool"},
        "state_store": "sqlite://%s" % (tmp_path / "s.db"), "name": "it-img-mask", "vcpus": 1,
        "memory_mb": 1024, "state": "present", "cloud_init": {"user_data": user_data}})
    assert result["failed"] and result["error"]["type"] == "NotSupported", printed
    assert "virStorageVolUpload" in result["msg"]
    assert marker not in printed
    args = result["invocation"]["module_args"]
    assert json.dumps(args["cloud_init"]["user_data"]).count(marker) == 0
    assert args["cloud_init"]["user_data"]["write_files"][0]["content"] == (
        "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER")
    # "1", "sh", "-c" and "id" are not masked wherever they appear
    assert (args["vcpus"], args["memory_mb"], args["name"]) == (1, 1024, "it-img-mask")
    assert "********" not in result["msg"]


def test_without_pycdlib_a_seed_fails_naming_it_and_makes_nothing(tmp_path, monkeypatch):
    import libvirt

    monkeypatch.setitem(sys.modules, "pycdlib", None)  # what a Python without it does: ImportError
    conn = libvirt.open("test:///default")  # the driver's state lives while a connection is open
    pool = conn.storagePoolLookupByName("default-pool")
    before = sorted(pool.listVolumes())
    try:
        result, printed = run_module(vm.VmModule, {
            "provider": {"type": "libvirt", "uri": "test:///default", "storage_pool": "default-pool"},
            "state_store": "sqlite://%s" % (tmp_path / "s.db"), "name": "it-img-nolib", "vcpus": 1,
            "memory_mb": 64, "disks": [{"size_gb": 1}], "cloud_init": {"user_data": "#cloud-config\n"}})
        assert result["failed"] and result["error"]["type"] == "MissingLibrary", printed
        assert result["error"]["details"]["libraries"] == ["pycdlib"]
        assert "pip install pycdlib" in result["msg"]
        assert sorted(pool.listVolumes()) == before
        assert "it-img-nolib" not in [d.name() for d in conn.listAllDomains(0)]
    finally:
        conn.close()


def test_a_cloud_init_task_runs_in_the_worker_when_the_controller_has_pycdlib():
    from ansible_collections.resilient.virt.plugins.plugin_utils import _in_process as ip

    core = dict((name, True) for name in ("pluggy", "tenacity", "jsonschema", "libvirt"))
    args = {"provider": {"type": "libvirt", "uri": "test:///default"}, "cloud_init": {}}

    def reason(available):
        return ip.module_path_reason("vm", True, False, 0, None, {}, {}, args, available)

    probed = dict(core)
    assert reason(probed) is None  # pycdlib and yaml probed now, not at the controller's load
    assert probed["pycdlib"] is True and probed["yaml"] is True
    assert "cannot import pycdlib" in reason(dict(core, pycdlib=False))
    assert reason(dict(core, pycdlib=False, yaml=True)).endswith("cannot import pycdlib")


def test_vm_fleet_takes_cloud_init_and_keeps_its_user_data_hidden(tmp_path):
    from ansible_collections.resilient.virt.plugins.modules import vm_fleet

    marker = "it-img-S3cret-%s" % uuid.uuid4().hex[:8]
    result, printed = run_module(vm_fleet.VmFleetModule, {
        "provider": {"type": "libvirt", "uri": "test:///default", "storage_pool": "default-pool"},
        "state_store": "sqlite://%s" % (tmp_path / "s.db"), "owner": "it-img",
        "vms": [{"name": "it-img-fleet", "vcpus": 1, "memory_mb": 64,
                 "cloud_init": {"user_data": {"write_files": [{"content": marker}]}}}]})
    # the create reached the provider (test:///default cannot upload the seed)
    assert result["failed"] and "virStorageVolUpload" in printed, printed
    assert marker not in printed
