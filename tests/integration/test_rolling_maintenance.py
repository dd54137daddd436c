"""The rolling_maintenance role on the lab's real hypervisors, through real ansible-playbook
runs: a tiny guest on hv1 is rolled through hv1 then hv2. The first run drains hv1 (the guest
moves live to hv2), runs the user's tasks and brings hv1 back, drains hv2 (the guest moves back)
and stops where the user's tasks fail for hv2, naming it; the second run, with the same round
name, goes on with hv2 only; a third does nothing. The test's own libvirt-python connection sees
the guest running, migrated, on hv1 at the end; the user's tasks leave a line per batch.
"""
import json
import uuid

import libvirt
import pytest
from backup_disks import make_vm, remove_prefixed
from playbook_runner import play, run_playbook

PATCH = """
- name: Patch
  ansible.builtin.lineinfile:
    path: "{{ patched_file }}"
    line: "{{ rolling_batch | map(attribute='provider') | join(',') }} {{ run_tag }}"
    create: true
    mode: "0600"
- name: Fail where asked
  ansible.builtin.fail:
    msg: "patching {{ fail_on }} failed"
  when: fail_on in (rolling_batch | map(attribute='provider'))
"""


@pytest.fixture
def guest(lab):
    hv1, hv2 = lab.hypervisor("hv1"), lab.hypervisor("hv2")
    conn1, conn2 = libvirt.open(hv1.uri), libvirt.open(hv2.uri)
    prefix = "roll-%s-" % uuid.uuid4().hex[:6]
    make_vm(conn1, hv1, prefix + "vm", size_mib=16)
    yield hv1, hv2, conn1, prefix + "vm"
    for conn in (conn1, conn2):
        remove_prefixed(conn, prefix)
        conn.close()


def test_a_round_rolls_through_stops_at_a_failure_and_goes_on(tmp_path, guest):
    hv1, hv2, conn1, name = guest
    (tmp_path / "patch.yml").write_text(PATCH)
    providers = dict((hv.name, {"type": "libvirt", "name": hv.name, "uri": hv.uri, "az": "az1",
                                "cpu_allocation_ratio": 32}) for hv in (hv1, hv2))
    defaults = {"providers": providers, "state_store": "sqlite://%s" % (tmp_path / "s.db")}
    state_dir = tmp_path / "rolling"
    role = {"name": "roll", "ansible.builtin.include_role": {
        "name": "resilient.virt.rolling_maintenance"}, "vars": {
        "rolling_hypervisors": [{"provider": "hv1"}, {"provider": "hv2"}],
        "rolling_run": "r1", "rolling_tasks": str(tmp_path / "patch.yml"),
        "rolling_state_dir": str(state_dir), "patched_file": str(tmp_path / "patched.txt")}}

    def roll(fail_on, run_name):
        run = run_playbook(tmp_path, [play([role], module_defaults=defaults,
                                           vars={"fail_on": fail_on, "run_tag": run_name})],
                           name=run_name)
        assert "Traceback" not in run.output, run.output
        return run

    def patched():
        return (tmp_path / "patched.txt").read_text().splitlines()

    def done():
        return json.loads((state_dir / "r1.json").read_text())["done"]

    run = roll("hv2", "first")
    assert run.rc != 0
    assert "rolling maintenance stopped at hv2/, in the task" in run.output, run.output
    assert "patching hv2 failed" in run.output
    assert done() == ["hv1/"]
    assert (state_dir / "r1.json").stat().st_mode & 0o777 == 0o600
    assert patched() == ["hv1 first", "hv2 first"]
    dom = conn1.lookupByName(name)  # moved to hv2 by the first drain, back by the second
    assert dom.state() == [libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_RUNNING_MIGRATED]

    run = roll("none", "second")
    assert run.rc == 0, run.describe()
    assert done() == ["hv1/", "hv2/"]
    assert patched() == ["hv1 first", "hv2 first", "hv2 second"]  # hv1 is not done again

    run = roll("none", "third")
    assert run.rc == 0, run.describe()
    assert patched() == ["hv1 first", "hv2 first", "hv2 second"]
    assert conn1.lookupByName(name).state()[0] == libvirt.VIR_DOMAIN_RUNNING
