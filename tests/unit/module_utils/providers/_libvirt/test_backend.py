"""The libvirt provider against libvirt's in-process test:///default driver.

test:///default starts with one running domain, "test", a network "default" and a storage
pool "default-pool"; its state lives as long as a connection to it is open in this process.
"""
import subprocess
import sys
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, Internal, InvalidSpec, NotFound, NotSupported, Timeout, Unavailable, classify)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
    LibvirtProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.spec import validate_spec
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import (
    open_provider)

from provider_testing import COLLECTIONS, TEST_POOL, TEST_URI, SilentDaemon, quick_settings


@pytest.fixture
def provider(libvirt_config):
    prov = LibvirtProvider(libvirt_config)
    yield prov
    prov.close()


def libvirt_error(fn):
    """The raw libvirtError raised by ``fn``."""
    import libvirt

    with pytest.raises(libvirt.libvirtError) as info:
        fn()
    return info.value


def volumes(provider):
    conn = provider._connection()
    return sorted(conn.storagePoolLookupByName(TEST_POOL).listVolumes())


def test_validate_reports_the_endpoint(provider):
    info = provider.validate()
    assert info["driver"] == "TEST" and info["uri"] == TEST_URI
    assert info["libvirt_version"].count(".") == 2 and info["hostname"]


def test_list_hypervisors_reports_the_host_and_running_usage(libvirt_config):
    prov = LibvirtProvider(dict(libvirt_config, az="az1", traits=["ssd"]))
    try:
        (host,) = prov.list_hypervisors()
        assert (host["name"], host["az"], host["traits"], host["state"]) == (
            "unit", "az1", ["ssd"], "up")
        assert host["cpu"] == 16 and host["memory_mb"] > 0
        assert (host["used_cpu"], host["used_memory_mb"]) == (2, 2048)  # the "test" domain
        assert host["vm_count"] == len(prov._connection().listAllDomains(0)) == 1
    finally:
        prov.close()
    unnamed = LibvirtProvider({"type": "libvirt", "uri": TEST_URI})
    try:
        assert unnamed.list_hypervisors()[0]["name"] == unnamed.validate()["hostname"]
        assert unnamed.key == "libvirt:test:///default"
    finally:
        unnamed.close()


def test_lifecycle_of_a_diskless_vm(provider):
    vm = provider.create({"name": "life", "vcpus": 1, "memory_mb": 64, "tags": ["web"],
                          "metadata": {"owner": "me"}, "interfaces": [{"network": "default"}]})
    assert (vm["state"], vm["vcpus"], vm["memory_mb"], vm["disks"]) == ("stopped", 1, 64, [])
    assert (vm["tags"], vm["metadata"]) == (["web"], {"owner": "me"})
    assert (vm["provider"], vm["provider_key"]) == ("unit", "libvirt:unit")
    assert provider.describe("life") == vm
    with pytest.raises(Conflict):
        provider.create({"name": "life", "vcpus": 1, "memory_mb": 64})
    with pytest.raises(Conflict):
        provider.power("life", "reboot")
    assert provider.power("life", "on")["state"] == "running"
    assert provider.power("life", "on")["state"] == "running"  # already there: no error
    assert provider.power("life", "reboot")["state"] == "running"
    assert provider.power("life", "shutdown", timeout=5)["state"] == "stopped"
    assert provider.power("life", "off")["state"] == "stopped"
    names = [v["name"] for v in provider.list_vms()]
    assert names == sorted(names) and {"life", "test"} <= set(names)
    assert [v["name"] for v in provider.list_vms({"tags": ["web"]})] == ["life"]
    assert [v["name"] for v in provider.list_vms({"state": "running"})] == ["test"]
    provider.delete("life")
    with pytest.raises(NotFound):
        provider.describe("life")
    with pytest.raises(NotFound):
        provider.delete("life")


def test_list_vms_filters_names_and_states_from_the_domain_list(provider):
    for name in ("web-1", "web-2", "db-1"):
        provider.create({"name": name, "vcpus": 1, "memory_mb": 64})
    provider.power("web-2", "on")
    assert [v["name"] for v in provider.list_vms({"name": "web-*"})] == ["web-1", "web-2"]
    assert [v["name"] for v in provider.list_vms({"name": "web-*", "state": "stopped"})] == ["web-1"]
    assert [v["name"] for v in provider.list_vms({"state": "running"})] == ["test", "web-2"]
    assert provider.list_vms({"name": "nothing*"}) == []
    assert all(v["addresses"] == [] for v in provider.list_vms())  # no leases on the test driver


class LeasesConnection:
    """A fake libvirt connection (named so): only networks' DHCP leases, which need dnsmasq and
    a bridge that cannot run here; "gone" answers as a network that does not exist."""

    def __init__(self, leases):
        self.leases = leases
        self.asked = []

    def networkLookupByName(self, name):
        import libvirt

        self.asked.append(name)
        if name not in self.leases:  # libvirt's own error, from its test driver
            return libvirt.open(TEST_URI).networkLookupByName(name)
        return type("Network", (), {"DHCPLeases": lambda _self: self.leases[name]})()


def test_addresses_come_from_the_leases_of_the_vms_networks_one_call_per_network():
    from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
        _leases)

    conn = LeasesConnection({"lan": [
        {"mac": "52:54:00:AA:00:01", "ipaddr": "192.168.122.10"},
        {"mac": "52:54:00:aa:00:01", "ipaddr": "fd00::10"},
        {"mac": "52:54:00:aa:00:02", "ipaddr": "192.168.122.11"}]})
    vms = [{"interfaces": [{"network": "lan", "mac": "52:54:00:aa:00:01"}]},
           {"interfaces": [{"network": "lan", "mac": "52:54:00:aa:00:02"},
                           {"network": "gone", "mac": "52:54:00:aa:00:03"},
                           {"bridge": "br0", "mac": "52:54:00:aa:00:04"}]}]
    found = _leases(conn, vms)
    assert found == {"52:54:00:aa:00:01": ["192.168.122.10", "fd00::10"],
                     "52:54:00:aa:00:02": ["192.168.122.11"]}
    assert conn.asked == ["gone", "lan"]


def test_delete_of_a_running_vm_powers_it_off_first(provider):
    provider.create({"name": "busy", "vcpus": 1, "memory_mb": 64})
    provider.power("busy", "on")
    provider.delete("busy")
    assert "busy" not in [v["name"] for v in provider.list_vms()]


def test_disks_by_size_become_volumes_that_delete_removes(provider):
    before = volumes(provider)
    vm = provider.create({"name": "disky", "vcpus": 1, "memory_mb": 64,
                          "disks": [{"size_gb": 2}, {"path": "/images/base.raw"}]})
    created = sorted(set(volumes(provider)) - set(before))
    assert len(created) == 1 and created[0].startswith("disky-")
    assert vm["disks"][0]["size_gb"] == 2 and vm["disks"][0]["path"].endswith(created[0])
    assert vm["disks"][1]["path"] == "/images/base.raw" and "size_gb" not in vm["disks"][1]
    provider.delete("disky")
    assert volumes(provider) == before


def test_a_missing_storage_pool_is_an_invalid_spec_naming_the_field(libvirt_config):
    prov = LibvirtProvider(dict(libvirt_config, storage_pool="nopool"))
    try:
        with pytest.raises(InvalidSpec) as info:
            prov.create({"name": "nopool", "vcpus": 1, "memory_mb": 64, "disks": [{"size_gb": 1}]})
        assert "provider.storage_pool" in str(info.value) and "nopool" in str(info.value)
        assert info.value.details["errors"][0]["path"] == "provider.storage_pool"
        with pytest.raises(NotFound):
            prov.describe("nopool")
        assert prov.create({"name": "nopool", "vcpus": 1, "memory_mb": 64})["disks"] == []
    finally:
        prov.close()


def test_a_failed_define_leaves_no_volume_behind(provider):
    before = volumes(provider)
    with pytest.raises(InvalidSpec) as info:  # libvirt's schema refuses an rng of no model
        provider.create({"name": "bad-rng", "vcpus": 1, "memory_mb": 64, "disks": [{"size_gb": 1}],
                         "libvirt": {"xml": ["<rng model='no-such-model'/>"]}})
    assert info.value.details["errors"][0]["path"] == "libvirt.xml"
    assert "libvirt's schema" in info.value.message
    assert volumes(provider) == before
    with pytest.raises(NotFound):
        provider.describe("bad-rng")


def test_a_multicast_mac_address_is_refused_by_its_field():
    with pytest.raises(InvalidSpec) as info:
        validate_spec({"name": "multi", "vcpus": 1, "memory_mb": 64,
                       "interfaces": [{"network": "default", "mac": "01:00:00:00:00:01"}]})
    assert info.value.details["errors"][0]["path"] == "interfaces[0].mac"
    assert "multicast" in info.value.message


def test_an_invalid_spec_lists_every_bad_field_and_creates_nothing(provider):
    with pytest.raises(InvalidSpec) as info:
        provider.create({"name": "bad", "vcpus": 0, "memory_mb": 64,
                         "disks": [{"size_gb": -1}]})
    paths = [e["path"] for e in info.value.details["errors"]]
    assert paths == ["vcpus", "disks[0].size_gb"]
    with pytest.raises(NotFound):
        provider.describe("bad")


def test_a_name_with_xml_characters_is_stored_verbatim(provider):
    name = 'a&b<c>"'
    assert provider.create({"name": name, "vcpus": 1, "memory_mb": 64})["name"] == name
    assert provider.describe(name)["name"] == name
    provider.delete(name)


def test_reconfigure_stopped_and_running_vms(provider):
    provider.create({"name": "grow", "vcpus": 1, "memory_mb": 128})
    vm = provider.reconfigure("grow", vcpus=2, memory_mb=256)
    assert (vm["vcpus"], vm["memory_mb"], vm["restart_required"]) == (2, 256, False)
    provider.power("grow", "on")
    vm = provider.reconfigure("grow", memory_mb=128)  # shrinking memory works live
    assert (vm["memory_mb"], vm["restart_required"]) == (128, False)
    vm = provider.reconfigure("grow", vcpus=4)  # above the live maximum: next boot
    assert (vm["vcpus"], vm["restart_required"]) == (4, True)  # as configured, not yet running
    assert provider.reconfigure("grow", vcpus=4)["restart_required"] is True
    live = provider._connection().lookupByName("grow").XMLDesc(0)
    assert "<vcpu placement='static'>2</vcpu>" in live
    provider.power("grow", "off")
    assert provider.power("grow", "on")["vcpus"] == 4
    with pytest.raises(InvalidSpec) as info:
        provider.reconfigure("grow", vcpus=0)
    assert "vcpus" in str(info.value)
    with pytest.raises(NotFound):
        provider.reconfigure("nothere", vcpus=1)
    provider.delete("grow")


def test_task_status_and_migrate_are_not_supported(provider):
    assert "task_status" not in provider.capabilities
    with pytest.raises(NotSupported, match="libvirt provider does not support task_status"):
        provider.task_status("t1")
    with pytest.raises(NotSupported):
        provider.require("migrate")


def test_libvirt_errors_map_into_the_taxonomy(provider):
    conn = provider._connection()
    provider.create({"name": "idle", "vcpus": 1, "memory_mb": 64})
    cases = [
        (lambda: conn.lookupByName("nope"), NotFound),
        (lambda: conn.defineXML("<domain>"), InvalidSpec),
        (lambda: conn.lookupByName("idle").reboot(0), Conflict),  # not running
        (lambda: LibvirtProvider({"type": "libvirt", "uri": "qemu+unix:///system?socket=/no/s"})
         ._open(), Unavailable),
    ]
    for fn, expected in cases:
        exc = libvirt_error(fn)
        err = provider.classify_error(exc)
        assert isinstance(err, expected), (exc, err)
        assert err.cause is exc and err.details["libvirt_code"] == exc.get_error_code()
        assert isinstance(classify(exc, [provider.classify_error]), expected)
    assert provider.classify_error(ValueError("x")) is None
    assert isinstance(classify(RuntimeError("x"), [provider.classify_error]), Internal)


def test_provider_options_are_checked_and_secrets_never_shown():
    with pytest.raises(InvalidSpec) as info:
        LibvirtProvider({"type": "libvirt", "uri": "not a uri"})
    assert "provider.uri" in str(info.value)
    with pytest.raises(InvalidSpec) as info:
        LibvirtProvider({"type": "libvirt", "url": TEST_URI, "domain_type": "xen",
                         "password": 123456789})
    paths = sorted(e["path"] for e in info.value.details["errors"])
    assert paths == ["provider.domain_type", "provider.password", "provider.url"]
    assert "123456789" not in str(info.value) and "hidden" in str(info.value)
    prov = LibvirtProvider({"type": "libvirt", "uri": TEST_URI, "username": "u",
                            "password": "s3cr3t!", "port": None})
    assert prov.safe_config()["password"] != "s3cr3t!" and "port" not in prov.config
    assert "domain_type" not in prov.config and prov.config["storage_pool"] == "default"


def test_credentials_are_given_through_open_auth(libvirt_config):
    prov = LibvirtProvider(dict(libvirt_config, username="u", password="p"))
    try:
        assert prov.validate()["driver"] == "TEST"
    finally:
        prov.close()


def test_libvirt_errors_are_not_printed_to_stderr(tmp_path):
    script = ("import sys; sys.path.insert(0, %r)\n"
              "from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt."
              "backend import LibvirtProvider\n"
              "p = LibvirtProvider({'type': 'libvirt', 'uri': 'test:///default'})\n"
              "try:\n    p.describe('missing')\nexcept Exception as e:\n"
              "    print(type(e).__name__)\np.close()\n" % COLLECTIONS)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False, timeout=60)
    assert out.stdout.strip() == "NotFound"
    assert out.stderr == ""


def test_a_hung_daemon_times_out_and_the_connection_is_abandoned(tmp_path, store):
    daemon = SilentDaemon(str(tmp_path / "libvirt-sock"))
    config = {"type": "libvirt", "uri": "qemu+unix:///system?socket=%s" % daemon.path}
    guarded = open_provider(config, quick_settings(max_attempts=2, timeout_validate=0.5),
                            store, environ={})
    started = time.monotonic()
    with pytest.raises(Timeout) as info:
        guarded.validate()
    assert time.monotonic() - started < 0.5 * 2 + 2
    assert info.value.details["attempts"] == 2
    assert guarded.provider._shared.generation == 2 and guarded.provider._shared.current is None
    assert guarded.policy.breaker.snapshot()["consecutive_failures"] == 2
    started = time.monotonic()
    guarded.close()
    assert time.monotonic() - started < 1
    daemon.close()


def test_a_process_with_a_call_stuck_in_a_hung_daemon_still_exits(tmp_path):
    daemon = SilentDaemon(str(tmp_path / "libvirt-sock"))
    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "from ansible_collections.resilient.virt.plugins.module_utils.providers._registry "
        "import open_provider\n"
        "from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import "
        "resolve_settings\n"
        "p = open_provider({'type': 'libvirt', 'uri': 'qemu+unix:///system?socket=%s'},\n"
        "    resolve_settings({'retry_preset': 'none', 'timeout_describe': 0.5}, environ={}),\n"
        "    environ={'RESILIENT_VIRT_STATE_STORE': 'sqlite:///%s'})\n"
        "try:\n    p.list_vms()\nexcept Exception as e:\n    print(type(e).__name__)\n"
        "p.close()\n" % (COLLECTIONS, daemon.path, tmp_path / "state.db"))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False, timeout=30)
    assert out.stdout.strip() == "Timeout", out.stderr
    daemon.close()


def _persistent(provider, name):
    import xml.etree.ElementTree as ET

    import libvirt

    dom = provider._connection().lookupByName(name)
    return ET.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)), dom


def test_day2_labels_boot_autostart_and_interfaces_of_a_stopped_vm(provider):
    rv = "{https://resilient.virt/xmlns/vm/1}"
    provider.create({"name": "d2", "vcpus": 1, "memory_mb": 64, "metadata": {"a": "1", "b": "2"},
                     "tags": ["x"], "interfaces": [{"network": "default"}]})
    try:
        vm = provider.reconfigure("d2", metadata={"b": None, "c": "3"}, tags=["y", "z"],
                                  boot=["network", "hd"], autostart=True,
                                  interfaces=[{"network": "default"}, {"network": "default"}])
        root, dom = _persistent(provider, "d2")
        items = dict((i.get("key"), i.text) for i in root.iter(rv + "item"))
        assert items == {"a": "1", "c": "3"} == vm["metadata"]
        assert [t.text for t in root.iter(rv + "tag")] == ["y", "z"] == vm["tags"]
        assert [b.get("dev") for b in root.findall("os/boot")] == ["network", "hd"]
        assert dom.autostart() == 1 and vm["autostart"] is True
        macs = [n.find("mac").get("address") for n in root.findall("devices/interface")]
        assert len(set(macs)) == 2 and all(m.startswith("52:54:00:") for m in macs)
        left = provider.reconfigure("d2", interfaces=[{"network": "default"}])["interfaces"]
        assert [(n["mac"], n["network"]) for n in left] == [(macs[0], "default")]
        assert [vm["name"] for vm in provider.list_vms() if vm["autostart"]] == ["d2"]
        with pytest.raises(InvalidSpec) as info:
            provider.reconfigure("d2", disks=[{"size_gb": 0}])
        assert "disks[0].size_gb" in str(info.value)
    finally:
        provider.delete("d2")


def test_pause_and_suspend(provider):
    provider.create({"name": "ps", "vcpus": 1, "memory_mb": 64})
    try:
        with pytest.raises(Conflict, match="stopped"):
            provider.power("ps", "pause")
        provider.power("ps", "on")
        assert provider.power("ps", "pause")["state"] == "paused"
        assert provider.power("ps", "pause")["changed"] is False
        saved = provider.power("ps", "suspend")
        assert saved["state"] == "suspended" and saved["changed"] is True
        _root, dom = _persistent(provider, "ps")
        assert dom.hasManagedSaveImage(0) and not dom.isActive()
        assert provider.power("ps", "suspend")["changed"] is False
        assert [vm["name"] for vm in provider.list_vms({"state": "suspended"})] == ["ps"]
        assert provider.power("ps", "on")["state"] in ("running", "paused")
        provider.power("ps", "off")
        provider.power("ps", "on")
        provider.power("ps", "suspend")
        stopped = provider.power("ps", "off")  # discards the saved state
        assert stopped["state"] == "stopped" and not dom.hasManagedSaveImage(0)
    finally:
        provider.delete("ps")


def test_a_stopped_vm_shows_no_address_from_its_last_lease(provider):
    mac = "52:54:00:aa:00:09"
    provider.create({"name": "leased", "vcpus": 1, "memory_mb": 64,
                     "interfaces": [{"network": "default", "mac": mac}]})
    conn = provider._connection()
    dom = conn.lookupByName("leased")
    leases = {mac: ["192.168.122.9"]}  # the lease outlives the guest
    assert provider._vm(conn, dom, leases=leases, arp=False)["addresses"] == []
    provider.power("leased", "on")
    running = provider._vm(conn, dom, leases=leases, arp=False)
    assert running["addresses"] == ["192.168.122.9"]
    assert running["interfaces"][0]["address_source"] == "lease"
