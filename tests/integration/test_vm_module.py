"""resilient.virt.vm through real ansible-playbook runs against one lab hypervisor (hv1).

What the module reports is checked against libvirt itself (libvirt-python on the lab's URI).
"""
import uuid
import xml.etree.ElementTree as ET

import libvirt
import pytest
import yaml

from playbook_runner import play, run_playbook


HV = "hv1"
VM = "resilient.virt.vm"
SMALL = {"vcpus": 1, "memory_mb": 64}
# a diskless guest has no OS to honour ACPI: a short graceful wait, then power off
STOP = {"state": "stopped", "force": True, "shutdown_timeout": "2s"}


def _unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def _provider(lab):
    hv = lab.hypervisor(HV)
    return {"type": "libvirt", "name": hv.name, "uri": hv.uri, "az": hv.az, "domain_type": "qemu"}


def _defaults(lab, tmp_path):
    return {"provider": _provider(lab), "state_store": "sqlite:///%s" % (tmp_path / "state.db")}


def _task(title, **args):
    return {"name": title, VM: args}


class Libvirt:
    """Direct access to the lab hypervisor, independent of the collection."""

    def __init__(self, lab):
        self.conn = libvirt.open(lab.hypervisor(HV).uri)

    def names(self):
        return [dom.name() for dom in self.conn.listAllDomains(0)]

    def xml(self, name):
        return ET.fromstring(self.conn.lookupByName(name).XMLDesc(0))

    def remove(self, names):
        for name in names:
            try:
                dom = self.conn.lookupByName(name)
            except libvirt.libvirtError:
                continue
            if dom.isActive():
                dom.destroy()
            dom.undefine()

    def close(self):
        self.conn.close()


@pytest.fixture
def hv(lab):
    conn = Libvirt(lab)
    yield conn
    conn.close()


def test_lifecycle_is_idempotent_with_diff(lab, hv, tmp_path):
    name = _unique("it-life")
    steps = [
        ("present", dict(SMALL, state="present")),
        ("running", dict(SMALL, state="running")),
        ("stopped", dict(SMALL, **STOP)),
        ("memory", dict(SMALL, state="stopped", memory_mb=96)),
    ]
    tasks = []
    for step, args in steps:
        tasks.append(_task(step, name=name, **args))
        tasks.append(_task(step + " again", name=name, **args))
    tasks += [
        _task("restarted from stopped", name=name, state="restarted"),
        _task("restarted while running", name=name, state="restarted"),
        {"name": "look", "resilient.virt.vm_info": {"name": name}},
        _task("absent", name=name, state="absent"),
        _task("absent again", name=name, state="absent"),
    ]
    try:
        run = run_playbook(tmp_path, [play(tasks, module_defaults=_defaults(lab, tmp_path))],
                           diff=True)
    finally:
        hv.remove([name])
    assert run.rc == 0, run
    expected = {  # task -> (actions, state after, memory after)
        "present": (["create"], "stopped", 64),
        "running": (["start"], "running", 64),
        "stopped": (["shutdown"], "stopped", 64),
        "memory": (["reconfigure"], "stopped", 96),
        "restarted from stopped": (["start"], "running", 96),
        "restarted while running": (["reboot"], "running", 96),
    }
    for title, (actions, state, memory) in expected.items():
        result = run.task(title)
        assert result["changed"] is True, result
        assert result["actions"] == actions, result
        assert (result["vm"]["state"], result["vm"]["memory_mb"]) == (state, memory), result
        assert result["diff"]["after"]["state"] == state, result
        assert result["diff"]["before"] == result["changes"]["before"], result
        assert [c["type"] for c in result["conditions"]] == ["Ready"]
    assert run.task("present")["diff"]["before"] == {"state": "absent"}
    memory = run.task("memory")["diff"]
    assert (memory["before"]["memory_mb"], memory["after"]["memory_mb"]) == (64, 96)
    for step, _args in steps:
        again = run.task(step + " again")
        assert again["changed"] is False and again["actions"] == [], again
        assert "diff" not in again.result
    seen = run.task("look")["vms"]
    assert [(v["name"], v["state"], v["memory_mb"]) for v in seen] == [(name, "running", 96)]
    gone = run.task("absent")
    assert gone["changed"] is True and gone["vm"] is None
    assert gone["diff"] == {"before": {"state": "running", "vcpus": 1, "memory_mb": 96},
                            "after": {"state": "absent"}}
    assert run.task("absent again")["changed"] is False
    assert name not in hv.names()


def test_check_mode_bad_spec_and_xml_special_names(lab, hv, tmp_path):
    planned = _unique("it-check")
    bad = _unique("it-bad")
    suffix = uuid.uuid4().hex[:6]
    special = "a&b<c>\"d'-" + suffix
    entity = "e&amp;f&#38;g-" + suffix
    injection = "x</name><memory>1</memory><name>y-" + suffix
    bad_spec = dict(vcpus=0, memory_mb=64, disks=[{"size_gb": -1}], interfaces=[{"bogus": 1}])
    tasks = [
        dict(_task("check create", name=planned, state="running", **SMALL), check_mode=True),
        dict(_task("bad spec", name=bad, state="running", **bad_spec), ignore_errors=True),
        dict(_task("special name", name=special, **SMALL), ignore_errors=True),
        dict(_task("entity name", name=entity, **SMALL), ignore_errors=True),
        dict(_task("injection name", name=injection, **SMALL), ignore_errors=True),
    ]
    try:
        run = run_playbook(tmp_path, [play(tasks, module_defaults=_defaults(lab, tmp_path))],
                           diff=True)
        names = hv.names()
        created = {n: hv.xml(n) for n in (special, entity, injection) if n in names}
    finally:
        hv.remove([planned, bad, special, entity, injection])
    assert "Traceback" not in run.output

    check = run.task("check create")
    assert check["changed"] is True and check["actions"] == ["create", "start"]
    assert check["diff"] == {"before": {"state": "absent"},
                             "after": {"state": "running", "vcpus": 1, "memory_mb": 64}}
    assert check["vm"] is None
    assert planned not in names, "check mode created the VM"

    failed = run.task("bad spec")
    assert failed.failed and failed["error"]["type"] == "InvalidSpec"
    paths = {e["path"] for e in failed["error"]["details"]["errors"]}
    assert {"vcpus", "disks[0].size_gb", "interfaces[0].bogus"} <= paths, failed
    for path in ("vcpus", "disks[0].size_gb", "interfaces[0].bogus"):
        assert path in failed["msg"]
    assert bad not in names, "an invalid spec created a VM"

    for title, vm_name in (("special name", special), ("entity name", entity),
                           ("injection name", injection)):
        result = run.task(title)
        if result.failed:  # rejected: cleanly, naming the field, and nothing was defined
            assert result["error"]["type"] == "InvalidSpec", result
            assert "name" in {e["path"] for e in result["error"]["details"]["errors"]}
            assert vm_name not in created
            continue
        assert result["vm"]["name"] == vm_name
        root = created[vm_name]  # stored verbatim: libvirt's own XML carries the same name
        assert root.findtext("name") == vm_name
        assert len(root.findall("name")) == 1
        memory = root.find("memory")
        assert int(memory.text) * {"KiB": 1, "MiB": 1024}[memory.get("unit", "KiB")] == 64 * 1024
    assert not [n for n in names if n.startswith("y-") or n == "x"], "a name was split"
    assert special in created, "a name with XML special characters must be accepted"


def test_provider_password_never_shown(lab, tmp_path):
    with open(lab.inventory_file) as f:
        providers = yaml.safe_load(f)["all"]["vars"]["resilient_virt_providers"]
    vcsim = providers.get("vcsim")
    assert vcsim, "the lab inventory has no vSphere simulator (lab/vcsim.py)"
    wrong = "Wr0ng-" + uuid.uuid4().hex
    once = {"retry_preset": "none"}
    tasks = [
        {"name": "wrong password", "resilient.virt.vm_info": {
            "provider": dict(vcsim, password=wrong), "resilience": once}, "ignore_errors": True},
        {"name": "unreachable port", "resilient.virt.vm": {
            "provider": "vc", "providers": {"vc": dict(vcsim, port=1)}, "name": "nothing",
            "state": "absent", "resilience": once}, "ignore_errors": True},
    ]
    plays = [play(tasks, module_defaults={"state_store": "sqlite:///%s" % (tmp_path / "s.db")})]
    # -vvv with the default callback (what a user sees); the results from the JSON callback's
    # document, written to a file
    run = run_playbook(tmp_path, plays, name="verbose", args=["-vvv"],
                       shown_with="ansible.builtin.default")
    assert run.task("wrong password")["error"]["type"] == "Unauthorized"
    assert run.task("unreachable port")["error"]["type"] == "Unavailable"
    assert run.rc == 0, run
    for output in (run.document, run.output):
        assert wrong not in output
        assert vcsim["password"] not in output
        assert "Traceback" not in output
