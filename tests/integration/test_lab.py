"""The lab gives independent real hypervisors that can be broken on purpose."""
import json
import os
import shutil
import subprocess
import threading
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pvesim
import pytest
import requests
import yaml

pytestmark = pytest.mark.lab

HANG_PROOF = 2.0  # seconds a call must stay unanswered to count as hung
THAW_ANSWER = 30.0  # bound for the hung call to finish once thawed


def _open(the_lab, name):
    return libvirt.open(the_lab.hypervisor(name).uri)


def _unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def test_state_and_inventory_describe_the_lab(lab):
    with open(lab.state_file) as f:
        state = json.load(f)
    hvs = {h["name"]: h for h in state["hypervisors"]}
    assert sorted(hvs) == ["hv1", "hv2", "hv3"]
    assert [hvs[n]["az"] for n in ("hv1", "hv2", "hv3")] == ["az1", "az2", "az1"]
    for name, entry in hvs.items():
        assert entry["uri"] == "qemu+unix:///system?socket=" + entry["socket"]
        with open(entry["pid_files"]["libvirtd"]) as f:
            assert int(f.read()) == lab.hypervisor(name).daemon_pid("libvirtd")

    tool = shutil.which("ansible-inventory")
    assert tool is not None, "ansible-inventory is not installed (run `make deps`)"
    out = subprocess.run([tool, "-i", lab.inventory_file, "--list"], check=True,
                         capture_output=True, text=True).stdout
    inv = json.loads(out)
    hostvars = inv["_meta"]["hostvars"]
    assert sorted(inv["hypervisors"]["hosts"]) == ["hv1", "hv2", "hv3"]
    assert sorted(inv["az1"]["hosts"]) == ["hv1", "hv3"]
    assert inv["az2"]["hosts"] == ["hv2"]
    for name in ("hv1", "hv2", "hv3"):
        provider = {"type": "libvirt", "name": name, "uri": hvs[name]["uri"], "az": hvs[name]["az"],
                    "cpu_allocation_ratio": 8, "domain_type": "qemu"}
        assert hostvars[name]["ansible_connection"] == "local"
        assert hostvars[name]["resilient_virt_provider"] == provider
        assert hostvars[name]["resilient_virt_providers"][name] == provider


def _secret(the_lab, simulator):
    with open(os.path.join(the_lab.run_dir, simulator, "password")) as f:
        return f.read().strip()


def test_proxmox_simulator_is_a_three_node_cluster_in_the_inventory(lab):
    """lab.py up starts a simulated Proxmox VE cluster (fakepve) whose settings in the lab
    inventory log in with a verified certificate; the inventory source holds no password."""
    pve = _pve_settings(lab)
    password = _secret(lab, "pve")
    assert pve == {"type": "proxmox", "name": "pve", "host": "127.0.0.1", "port": pve["port"],
                   "username": "root@pam", "password": password, "storage": "vmdata",
                   "ca_path": os.path.join(lab.run_dir, "vcsim", "tls", "ca.pem")}
    with open(lab.state_file) as f:
        assert json.load(f)["proxmox"]["password"] == "(in inventory.yml)"
    resources = _pve_api(pve).cluster.resources.get()
    assert sorted(r["node"] for r in resources if r["type"] == "node") == ["pve1", "pve2", "pve3"]
    assert [(r["name"], r["node"], r["template"]) for r in resources
            if r["type"] == "qemu"] == [("tpl", "pve1", 1)]
    assert "vmdata" in {r["storage"] for r in resources if r["type"] == "storage"}
    with open(lab.source_file) as f:
        source = f.read()
    assert password not in source
    assert yaml.safe_load(source)["providers"]["pve"]["password"] == (
        "{{ lookup('ansible.builtin.file', '%s') }}" % os.path.join(lab.run_dir, "pve", "password"))
    assert os.stat(os.path.join(lab.run_dir, "pve", "password")).st_mode & 0o777 == 0o600


def test_up_again_leaves_running_hypervisors_alone(lab):
    before = {n: lab.hypervisor(n).daemon_pid("libvirtd") for n in lab.names()}
    assert lab.up(3) == []
    after = {n: lab.hypervisor(n).daemon_pid("libvirtd") for n in lab.names()}
    assert before == after and all(after.values())


def test_pid_file_of_another_namespace_is_not_trusted(lab, lab_module, tmp_path):
    real = lab.hypervisor("hv1")
    pid = real.daemon_pid("libvirtd")
    (tmp_path / "hv1" / "run").mkdir(parents=True)
    (tmp_path / "hv1" / "run" / "libvirtd.pid").write_text("%d\n" % pid)  # a libvirtd, not ours
    impostor = lab_module.Lab(str(tmp_path))
    assert impostor.hypervisor("hv1").daemon_pid("libvirtd") is None
    assert impostor.stop("hv1") is False
    assert real.daemon_pid("libvirtd") == pid and real.state() == "running"


def test_each_hypervisor_takes_incoming_migrations_on_ports_of_its_own(lab):
    ranges = []
    for name in lab.names():
        with open(os.path.join(lab.hypervisor(name).dir, "etc", "qemu.conf")) as handle:
            conf = dict(line.split("=", 1) for line in handle.read().splitlines()
                        if line.startswith("migration_port_"))
        ranges.append(range(int(conf["migration_port_min "]), int(conf["migration_port_max "]) + 1))
    assert all(r.start > 1024 and r.stop <= 32768 for r in ranges), ranges
    assert len(set(port for r in ranges for port in r)) == sum(len(r) for r in ranges), ranges


def test_hypervisors_are_independent(lab, domain_xml):
    name = _unique("lab-indep")
    conn = _open(lab, "hv1")
    dom = conn.defineXML(domain_xml(name))
    try:
        assert name in conn.listDefinedDomains()
        for other in ("hv2", "hv3"):
            with pytest.raises(libvirt.libvirtError) as err:
                _open(lab, other).lookupByName(name)
            assert err.value.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN
    finally:
        dom.undefine()
        conn.close()


def _with_disk(domain_xml, name, path):
    """``domain_xml(name)`` with a qcow2 disk at ``path``."""
    domain = ET.fromstring(domain_xml(name))
    disk = ET.SubElement(domain.find("devices"), "disk", type="file", device="disk")
    ET.SubElement(disk, "driver", name="qemu", type="qcow2")
    ET.SubElement(disk, "source", file=path)
    ET.SubElement(disk, "target", dev="vda", bus="virtio")
    return ET.tostring(domain, encoding="unicode")


def test_a_disk_on_shared_storage_is_the_same_file_on_every_hypervisor(lab, domain_xml):
    name = _unique("lab-shared")
    volume = ET.Element("volume")
    ET.SubElement(volume, "name").text = name + ".qcow2"
    ET.SubElement(volume, "capacity", unit="MiB").text = "16"
    ET.SubElement(ET.SubElement(volume, "target"), "format", type="qcow2")
    first, second = _open(lab, "hv1"), _open(lab, "hv2")
    vol = first.storagePoolLookupByName("shared").createXML(ET.tostring(volume, encoding="unicode"))
    path = vol.path()
    try:
        # the test's own view: one file of the lab's run directory, under the same path in both
        on_host = os.path.join(lab.run_dir, "shared", name + ".qcow2")
        assert os.path.isfile(on_host)
        pool = second.storagePoolLookupByName("shared")
        pool.refresh(0)
        assert pool.storageVolLookupByName(name + ".qcow2").path() == path
        # the VM runs on hv1, then, stopped there, on hv2 from the same disk
        xml = _with_disk(domain_xml, name, path)
        first.createXML(xml).destroy()
        dom = second.createXML(xml)
        try:
            assert dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING
            assert len(lab.hypervisor("hv2").qemu_pids()) == 1
            assert lab.hypervisor("hv1").qemu_pids() == []
        finally:
            dom.destroy()
    finally:
        vol.delete(0)
        first.close()
        second.close()
    assert not os.path.exists(on_host)


@pytest.mark.parametrize("name", ["hv1", "hv2", "hv3"])
def test_tiny_domain_starts_and_is_destroyed(lab, domain_xml, name):
    hv = lab.hypervisor(name)
    conn = _open(lab, name)
    try:
        dom = conn.createXML(domain_xml(_unique("lab-tiny")))
        try:
            assert dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING
            assert len(hv.qemu_pids()) == 1
            for other in set(lab.names()) - {name}:
                assert lab.hypervisor(other).qemu_pids() == []
        finally:
            dom.destroy()
        assert conn.listAllDomains() == []
        assert hv.qemu_pids() == []
    finally:
        conn.close()


def test_stop_is_an_outage_and_start_ends_it(lab, outage, domain_xml):
    name = _unique("lab-outage")
    conn = _open(lab, "hv3")
    conn.createXML(domain_xml(name))
    try:
        outage.stop("hv3")
        assert lab.hypervisor("hv3").state() == "stopped"
        with pytest.raises(libvirt.libvirtError):
            conn.getVersion()  # the open connection breaks
        with pytest.raises(libvirt.libvirtError):
            _open(lab, "hv3")  # and new ones are refused
        assert _open(lab, "hv1").getVersion() > 0  # the others do not notice

        outage.start("hv3")
        conn = _open(lab, "hv3")
        # like a real host whose libvirtd crashed: the guest kept running
        assert conn.lookupByName(name).state()[0] == libvirt.VIR_DOMAIN_RUNNING
    finally:
        _destroy(conn, name)
        conn.close()


def _destroy(conn, name):
    """Destroy the transient domain ``name`` unless it has already ended (a guest that libvirtd
    did not reattach after its restart ends on its own)."""
    try:
        conn.lookupByName(name).destroy()
    except libvirt.libvirtError as exc:
        if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
            raise


def test_freeze_hangs_calls_until_thaw(lab, outage):
    uri = lab.hypervisor("hv2").uri
    conn = libvirt.open(uri)
    answers = {}

    def new_connection():
        answers["new"] = libvirt.open(uri).getVersion()

    def open_connection():
        answers["open"] = conn.getVersion()

    outage.freeze("hv2")
    assert lab.hypervisor("hv2").state() == "frozen"
    threads = [threading.Thread(target=fn, daemon=True) for fn in (new_connection, open_connection)]
    for t in threads:
        t.start()
    threads[0].join(HANG_PROOF)
    threads[1].join(0.1)
    assert [t.is_alive() for t in threads] == [True, True] and answers == {}

    outage.thaw("hv2")
    for t in threads:
        t.join(THAW_ANSWER)
    assert answers["new"] > 0 and answers["open"] > 0
    conn.close()


def _lab_pids(hv):
    pids = {d: hv.daemon_pid(d) for d in ("hvinit", "virtlogd", "libvirtd")}
    pids.update(("qemu-%d" % p, p) for p in hv.qemu_pids())
    return pids


def test_down_leaves_no_process_and_up_survives_stale_files(lab, lab_module, domain_xml,
                                                            tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("down"))
    # reuse the session lab's QEMU capability cache: saves the probe, libvirt revalidates it
    shutil.copytree(lab.hypervisor("hv1").path("cache"), os.path.join(run_dir, "hv1", "cache"))
    small = lab_module.Lab(run_dir)
    try:
        assert small.up(1) == ["hv1"]
        hv = small.hypervisor("hv1")
        conn = libvirt.open(hv.uri)
        conn.createXML(domain_xml(_unique("lab-down")))
        conn.close()
        pids = _lab_pids(hv)
        assert all(pids.values()) and len(pids) == 4
        pve = _pve_settings(small)
        pids["pvesim"] = pvesim.status(run_dir)["pid"]
        assert _pve_vm_names(pve) == ["tpl"]
        _pve_api(pve).nodes("pve2").qemu.post(vmid=200, name="lab-down-vm")
        assert _pve_vm_names(pve) == ["lab-down-vm", "tpl"]

        small.down()
        alive = {k: p for k, p in pids.items() if lab_module._alive(p)}
        assert alive == {}
        assert hv.processes() == []
        assert hv.state() == "stopped"
        assert os.path.exists(hv.pid_file("libvirtd"))  # stale from now on
        assert pvesim.status(run_dir)["running"] is False
        with pytest.raises(requests.exceptions.ConnectionError):
            _pve_vm_names(pve)

        assert small.up(1) == ["hv1"]
        assert libvirt.open(hv.uri).listAllDomains() == []  # transient domain gone with its QEMU
        # the simulated cluster starts afresh on the port it had (the inventory stays valid)
        assert _pve_settings(small) == pve
        assert _pve_vm_names(pve) == ["tpl"]
    finally:
        small.down()
    assert hv.processes() == []
    assert pvesim.status(run_dir)["running"] is False


def _pve_settings(the_lab):
    with open(the_lab.inventory_file) as f:
        return yaml.safe_load(f)["all"]["vars"]["resilient_virt_providers"]["pve"]


def _pve_api(pve):
    from proxmoxer import ProxmoxAPI

    return ProxmoxAPI(pve["host"], port=pve["port"], user=pve["username"],
                      password=pve["password"], verify_ssl=pve["ca_path"], timeout=10)


def _pve_vm_names(pve):
    return sorted(r["name"] for r in _pve_api(pve).cluster.resources.get(type="vm"))
