"""The proxmox provider through real ansible-playbook runs of ``vm`` and ``vm_info`` against a
Proxmox VE API simulator (fakepve, ``pve_simulator.py``), on both execution paths, read back with
a proxmoxer session of the test's own: a VM created with Proxmox's own cloud-init, tags,
metadata, a disk and a NIC, started until its guest agent reports an address, found again
without a change, listed, cloned from a template (linked and full) and deleted; the password
and the token secret absent from the -vvv output and from the state store.
"""
import os

from pve_simulator import AGENT_MAC

from playbook_runner import play, run_playbook

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBfakefakefakefakefakefakefakefakefakefake deploy"


def _vm(title, **args):
    return {"name": title, "resilient.virt.vm": args, "ignore_errors": True}


def test_lifecycle_through_playbooks(simulated_pve, tmp_path):
    sim = simulated_pve
    store = "sqlite:///%s" % (tmp_path / "state.db")
    spec = dict(name="web1", state="running", vcpus=2, memory_mb=512, wait_for_ip=True,
                wait_timeout="30s", disks=[{"size_gb": 4}],
                interfaces=[{"bridge": "vmbr0", "mac": AGENT_MAC, "vlan": 10}],
                tags=["web", "prod"], metadata={"owner": "team-a"},
                cloud_init={"user_data": {"users": [{"name": "deploy",
                                                     "ssh_authorized_keys": [SSH_KEY]}]},
                            "network_config": {"version": 2,
                                               "ethernets": {"eth0": {"dhcp4": True}}}})
    tasks = [
        _vm("create", **spec),
        _vm("again", **spec),
        {"name": "info", "resilient.virt.vm_info": {"name": "web1"}, "ignore_errors": True},
        _vm("linked", name="linked1", template="tpl", state="present"),
        _vm("full", name="full1", template="tpl", state="present",
            placement={"datastore": "local-lvm"}),
        {"name": "list", "resilient.virt.vm_info": {}, "ignore_errors": True},
        _vm("delete", name="full1", state="absent"),
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={
        "provider": sim.provider, "state_store": store})], args=("-vvv",))
    created = run.task("create")
    assert not created.failed, created
    assert created["changed"] and created["vm"]["addresses"] == ["192.0.2.10"], created
    again = run.task("again")
    assert not again.failed and not again["changed"], again
    info = run.task("info")
    assert not info.failed and info["vms"][0]["state"] == "running", info

    vmid = sim.vm_id("web1")
    node = created["vm"]["hypervisor"]
    config = sim.oracle.nodes(node).qemu(vmid).config.get()
    assert sim.oracle.nodes(node).qemu(vmid).status.current.get()["status"] == "running"
    assert config["ciuser"] == "deploy" and "ssh-ed25519" in config["sshkeys"].replace("%20", " ")
    # the cloud-init drive (the simulator names its volume like a disk's, PVE vm-N-cloudinit)
    assert config["ipconfig0"] == "ip=dhcp" and "media=cdrom" in config["ide2"]
    assert sorted(config["tags"].split(";")) == ["prod", "web"]
    assert config["net0"].lower().startswith("virtio=" + AGENT_MAC) and "tag=10" in config["net0"]
    assert config["cores"] == 2 and int(config["memory"]) == 512
    assert "team-a" in config["description"]

    linked = run.task("linked")
    assert not linked.failed, linked
    linked_config = sim.oracle.nodes("pve1").qemu(sim.vm_id("linked1")).config.get()
    assert "base-100-disk-0" in linked_config["scsi0"], linked_config  # a child of the base
    assert not run.task("full").failed, run.task("full")
    assert not run.task("delete").failed, run.task("delete")
    names = sorted(r["name"] for r in sim.oracle.cluster.resources.get(type="vm"))
    assert names == ["linked1", "tpl", "web1"], names
    listed = run.task("list")  # before the delete
    assert sorted(vm["name"] for vm in listed["vms"]) == ["full1", "linked1", "tpl", "web1"]

    assert sim.password not in run.output
    with open(store[len("sqlite://"):], "rb") as handle:
        assert sim.password.encode() not in handle.read()


def test_token_login_and_secrets_hidden(simulated_pve, tmp_path):
    sim = simulated_pve
    store = "sqlite:///%s" % (tmp_path / "state.db")
    tasks = [_vm("create", name="tok1", state="running", vcpus=1, memory_mb=256),
             {"name": "bad", "resilient.virt.vm_info": {
                 "provider": dict(sim.token_provider, token_secret="wrong-" + sim.token_secret)},
              "ignore_errors": True}]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={
        "provider": sim.token_provider, "state_store": store})], args=("-vvv",))
    assert not run.task("create").failed, run.task("create")
    assert sim.oracle.nodes(run.task("create")["vm"]["hypervisor"]).qemu(
        sim.vm_id("tok1")).status.current.get()["status"] == "running"
    bad = run.task("bad")
    assert bad.failed and bad["error"]["type"] == "Unauthorized", bad
    assert sim.token_secret not in run.output
    assert os.path.exists(store[len("sqlite://"):])
    with open(store[len("sqlite://"):], "rb") as handle:
        assert sim.token_secret.encode() not in handle.read()


def _disk(sim, name):
    """The first disk (scsi0) of the VM ``name``, by the oracle."""
    record = [r for r in sim.oracle.cluster.resources.get(type="vm") if r["name"] == name][0]
    return sim.oracle.nodes(record["node"]).qemu(record["vmid"]).config.get()["scsi0"]


def test_linked_and_full_clones_through_playbooks(simulated_pve, tmp_path):
    """clone: overlay is a linked clone (its disk a child of the template's base disk), copy a
    full one (a disk of its own, on placement.datastore when given); unset, a template is linked
    unless placement.datastore says where to copy it. What cannot be linked is refused before
    anything is made."""
    sim = simulated_pve
    tasks = [
        _vm("overlay", name="linked2", template="tpl", clone="overlay", state="present"),
        _vm("copy", name="full2", template="tpl", clone="copy", state="present"),
        _vm("copy elsewhere", name="full3", template="tpl", clone="copy", state="present",
            placement={"datastore": "local-lvm"}),
        _vm("unset", name="linked3", template="tpl", state="present"),
        _vm("a vm", name="plain1", vcpus=1, memory_mb=64, disks=[{"size_gb": 1}],
            state="present"),
        _vm("overlay of a vm", name="bad1", template="plain1", clone="overlay", state="present"),
        _vm("overlay moved", name="bad2", template="tpl", clone="overlay", state="present",
            placement={"datastore": "local-lvm"}),
        _vm("clone without template", name="bad3", vcpus=1, memory_mb=64, clone="copy"),
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"provider": sim.provider})])
    for title in ("overlay", "copy", "copy elsewhere", "unset", "a vm"):
        assert not run.task(title).failed, run.task(title)
    base = "vmdata:100/base-100-disk-0.qcow2/"  # a linked clone's volume names its base
    assert _disk(sim, "linked2").startswith(base), _disk(sim, "linked2")
    assert _disk(sim, "linked3").startswith(base), _disk(sim, "linked3")
    assert _disk(sim, "full2").startswith("vmdata:") and "base-100" not in _disk(sim, "full2")
    assert _disk(sim, "full3").startswith("local-lvm:") and "base-100" not in _disk(sim, "full3")
    for title in ("overlay of a vm", "overlay moved", "clone without template"):
        result = run.task(title)
        assert result.failed and result["error"]["type"] == "InvalidSpec", result
        assert [e["path"] for e in result["error"]["details"]["errors"]] == ["clone"], result
    assert "convert it to a template, or use clone: copy" in run.task("overlay of a vm")["msg"]
    names = sorted(r["name"] for r in sim.oracle.cluster.resources.get(type="vm"))
    assert names == ["full2", "full3", "linked2", "linked3", "plain1", "tpl"], names
