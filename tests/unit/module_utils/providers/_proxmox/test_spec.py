"""Specs into PVE's create parameters (spec.py), Proxmox's own cloud-init included: each
parameter as PVE's API documents it, and each refusal naming the spec field."""
from urllib.parse import unquote

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, NotSupported
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.spec import (
    cloud_init_parameters, create_parameters, hardware_parameters, placement_request,
    validate_spec)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.vm_dict import (
    METADATA_PREFIX)

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOq0 deploy@ci"


def _paths(err):
    return [e["path"] for e in err.value.details["errors"]]


def test_a_full_spec_becomes_pves_parameters():
    spec = validate_spec({
        "name": "web1", "vcpus": 2, "memory_mb": 1024, "autostart": True,
        "disks": [{"size_gb": 10}, {"size_gb": 20, "bus": "virtio", "storage": "ceph"},
                  {"size_gb": 5}],
        "interfaces": [{"bridge": "vmbr1", "vlan": 10, "mac": "bc:24:11:00:00:01"},
                       {"model": "e1000"}],
        "tags": ["web", "prod", "web"], "metadata": {"owner": "team-a"},
        "placement": {"resource_pool": None}, "template": None,
    })
    params = create_parameters(spec, 123, "local-lvm", "vmbr0", pool="web")
    assert params == {
        "vmid": 123, "name": "web1", "ostype": "l26", "scsihw": "virtio-scsi-single",
        "agent": "1", "cores": 2, "sockets": 1, "memory": 1024,
        "scsi0": "local-lvm:10", "virtio0": "ceph:20", "scsi1": "local-lvm:5",
        "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr1,tag=10", "net1": "e1000,bridge=vmbr0",
        "tags": "prod;web", "description": METADATA_PREFIX + '{"owner":"team-a"}',
        "onboot": 1, "pool": "web",
    }


def test_a_clones_added_disks_take_the_next_free_slots():
    spec = validate_spec({"name": "c", "template": "tpl",
                          "disks": [{"size_gb": 4}, {"size_gb": 8}]})
    assert hardware_parameters(spec, "vmdata", "vmbr0", first_slots={"scsi": 1}) == {
        "scsi1": "vmdata:4", "scsi2": "vmdata:8"}


def test_cloud_init_is_proxmoxs_own_parameters_and_drive():
    cloud_init = {
        "user_data": {"users": [{"name": "deploy", "ssh_authorized_keys": [KEY],
                                 "plain_text_passwd": "s3cret pass"}]},
        "network_config": {"version": 2, "ethernets": {
            "eth0": {"addresses": ["192.0.2.10/24", "2001:db8::10/64"], "gateway4": "192.0.2.1",
                     "nameservers": {"addresses": ["192.0.2.53", "192.0.2.54"]}},
            "eth1": {"dhcp4": True, "dhcp6": True}}},
    }
    spec = validate_spec({"name": "ci", "vcpus": 1, "memory_mb": 512,
                          "interfaces": [{}, {}], "cloud_init": cloud_init})
    params = create_parameters(spec, 101, "vmdata", "vmbr0")
    assert params["ide2"] == "vmdata:cloudinit"
    assert params["ciuser"] == "deploy" and params["cipassword"] == "s3cret pass"
    assert unquote(params["sshkeys"]) == KEY + "\n"
    assert params["ipconfig0"] == "ip=192.0.2.10/24,gw=192.0.2.1,ip6=2001:db8::10/64"
    assert params["ipconfig1"] == "ip=dhcp,ip6=dhcp"
    assert params["nameserver"] == "192.0.2.53 192.0.2.54"


def test_cloud_init_given_as_text():
    params = cloud_init_parameters({
        "user_data": "#cloud-config\nssh_authorized_keys: ['%s']\npassword: pw\n" % KEY,
        "network_config": "version: 2\nethernets:\n  eth0: {dhcp4: true}\n"}, 1)
    assert params == {"sshkeys": params["sshkeys"], "cipassword": "pw", "ipconfig0": "ip=dhcp"}
    assert unquote(params["sshkeys"]) == KEY + "\n"


def test_what_proxmoxs_cloud_init_cannot_do_is_named():
    with pytest.raises(InvalidSpec) as err:
        cloud_init_parameters({
            "user_data": {"users": [{"name": "a", "homedir": "/x"}, {"name": "b"}],
                          "packages": ["nginx"]},
            "meta_data": {"instance-id": "x"},
            "network_config": {"version": 2, "ethernets": {
                "eth0": {"addresses": ["192.0.2.1/24", "192.0.2.2/24"], "mtu": 9000}}}}, 1)
    assert _paths(err) == [
        "cloud_init.user_data.packages", "cloud_init.user_data.users",
        "cloud_init.user_data.users[0].homedir", "cloud_init.meta_data",
        "cloud_init.network_config.ethernets.eth0.addresses",
        "cloud_init.network_config.ethernets.eth0.mtu"]


@pytest.mark.parametrize("network_config", [{"version": 1, "config": []}, "version: 2\n",
                                            "[not, a, mapping]", "a: [unclosed"])
def test_only_a_version_2_network_config_is_taken(network_config):
    with pytest.raises(InvalidSpec) as err:
        cloud_init_parameters({"network_config": network_config}, 1)
    assert _paths(err) == ["cloud_init.network_config"]


def test_every_bad_field_is_reported_by_its_path():
    with pytest.raises(InvalidSpec) as err:
        validate_spec({"name": "bad_name", "vcpus": 0, "memory_mb": 64,
                       "disks": [{"size_gb": 1, "bus": "nvme"}],
                       "interfaces": [{"mac": "nope"}], "tags": ["Web"], "colour": "red"})
    paths = _paths(err)
    for path in ("name", "vcpus", "disks[0].bus", "interfaces[0].mac", "tags[0]", "colour"):
        assert path in paths, (path, paths)


def test_without_template_vcpus_and_memory_are_required():
    with pytest.raises(InvalidSpec) as err:
        validate_spec({"name": "a"})
    assert set(_paths(err)) >= {"vcpus", "memory_mb"}
    assert validate_spec({"name": "a", "template": "tpl"})["name"] == "a"


def test_too_many_disks_on_a_bus():
    with pytest.raises(InvalidSpec, match="7 disks on the sata bus; Proxmox has 6 slots"):
        validate_spec({"name": "a", "template": "t", "disks": [{"size_gb": 1, "bus": "sata"}] * 7})


@pytest.mark.parametrize("key", ["customization", "guest_id", "libvirt", "boot"])
def test_settings_of_other_platforms_are_not_supported(key):
    with pytest.raises(NotSupported, match=key):
        validate_spec({"name": "a", "template": "t", key: {"x": 1} if key != "guest_id" else "x"})


def test_placement_and_its_older_keys():
    assert placement_request({"placement": {"host": "pve2", "resource_pool": "p"},
                              "datastore": "ceph"}) == ("pve2", "ceph", "p")
    assert placement_request({}) == (None, None, None)
    with pytest.raises(InvalidSpec) as err:
        placement_request({"placement": {"host": "pve2"}, "hypervisor": "pve3"})
    assert _paths(err) == ["placement.host"]


@pytest.mark.parametrize("clone", ["overlay", "copy"])
def test_clone_says_what_a_clone_is_made_of(clone):
    assert validate_spec({"name": "c", "template": "tpl", "clone": clone})["clone"] == clone


@pytest.mark.parametrize("spec, message", [
    ({"name": "c", "vcpus": 1, "memory_mb": 64, "clone": "copy"}, "set template"),
    ({"name": "c", "template": "t", "clone": "overlay", "placement": {"datastore": "ceph"}},
     "use clone: copy"),
    ({"name": "c", "template": "t", "clone": "overlay", "datastore": "ceph"}, "use clone: copy"),
    ({"name": "c", "template": "t", "clone": "linked"}, "clone"),
])
def test_a_clone_that_cannot_be_is_refused_by_its_field(spec, message):
    with pytest.raises(InvalidSpec, match=message) as err:
        validate_spec(spec)
    assert _paths(err) == ["clone"]
