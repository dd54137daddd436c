"""The playbooks the README and docs/ show (the demo, the failover tour, the fleet and the backups) run
cleanly against the lab."""
import json
import os
import re
import sqlite3
import subprocess

from simulator_session import Simulator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _play(lab, tmp_path, playbook):
    env = dict(os.environ, RESILIENT_VIRT_STATE_STORE="sqlite:///%s" % (tmp_path / "state.db"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(["ansible-playbook", "-i", lab.inventory_file, os.path.join(ROOT, "playbooks", playbook)],
                          env=env, capture_output=True, text=True, check=False, timeout=600)


def _recap(stdout):
    return [line for line in stdout.splitlines() if "ok=" in line and "failed=" in line]


def _lab_contents(lab, vsphere):
    """What the lab holds, read without the collection: each hypervisor's daemon answering and
    its domains (libvirt-python), the vSphere simulator's VMs and hosts (pyVmomi), and the
    Proxmox VE simulator's VMs and nodes (proxmoxer)."""
    import libvirt
    import yaml
    from proxmoxer import ProxmoxAPI

    contents = {}
    for name in lab.names():
        conn = libvirt.open(lab.hypervisor(name).uri)
        try:
            contents[name] = sorted(d.name() for d in conn.listAllDomains())
        finally:
            conn.close()
    sim = Simulator(vsphere)
    contents["vcsim"] = sorted(sim.power_by_name())
    contents["vcsim hosts"] = sorted(sim.vm_count_by_host())
    with open(lab.inventory_file) as handle:
        pve = yaml.safe_load(handle)["all"]["vars"]["resilient_virt_providers"]["pve"]
    resources = ProxmoxAPI(pve["host"], port=pve["port"], user=pve["username"],
                           password=pve["password"], verify_ssl=pve["ca_path"],
                           timeout=10).cluster.resources.get()
    contents["pve"] = sorted(r["name"] for r in resources if r["type"] == "qemu")
    contents["pve nodes"] = sorted(r["node"] for r in resources if r["type"] == "node")
    return contents


def _acts(stdout):
    """{act number: its line} of the demo's output."""
    return dict((int(m.group(1)), m.group(0)) for m in re.finditer(r'"(?:msg": ")?Act (\d) - [^"]*', stdout))


def test_demo_playbook(lab, vsphere, tmp_path):
    """Each act's figures, against what the demo's own settings and the lab imply, and the lab
    left as it was found."""
    before = _lab_contents(lab, vsphere)
    run = _play(lab, tmp_path, "demo.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "Traceback" not in run.stdout + run.stderr
    acts = _acts(run.stdout)
    assert sorted(acts) == list(range(1, 10)), acts
    libvirt_vms = sum(len(before[name]) for name in lab.names())
    assert "%d hypervisors and %d VMs from 5 providers in 5 zones" % (
        len(lab.names()) + len(before["vcsim hosts"]) + len(before["pve nodes"]),
        libvirt_vms + len(before["vcsim"]) + len(before["pve"])) in acts[1]
    assert "10 VMs created on 5 providers in one task; the second run changed nothing (10 unchanged)" in acts[2]
    # failure_threshold 3 with 5 attempts a call: the first call opens the breaker, the other 3
    # of hv2's 4 creates are refused; hv1 and hv3 create their 4 each
    assert ("3 attempts reached it, then its breaker opened (failure_threshold 3) and its other 3 "
            "tasks failed fast") in acts[3]
    assert "hv1 and hv3 created 8 of 8 VMs meanwhile" in acts[3]
    spared = float(re.search(r"([\d.]+) s of retry waits spared \(4 calls x 7.5 s\)", acts[3]).group(1))
    # without a breaker each of the 4 calls waits 0.5 + 1 + 2 + 4 s; the first one waited
    # 0.5 + 1 + 2 s (up to 10 % jitter each) before its fourth attempt was refused
    assert 4 * 7.5 - 3.5 * 1.1 - 0.05 <= spared <= 4 * 7.5 - 3.5 + 0.05, acts[3]
    hang = float(re.search(r"Timeout after ([\d.]+) s", acts[4]).group(1))
    assert 3 <= hang < 5, acts[4]
    assert re.search(r"hv1 4 VMs [\d.]+ s, hv2 BreakerOpen [\d.]+ s", acts[4]), acts[4]
    assert "open -> half_open, half_open -> closed on its first call; the rerun created only the 4 VMs" in acts[5]
    assert "(12 in all, nothing twice)" in acts[5]
    # web VMs: hv1 and hv3 are az1's only hypervisors, so each of their 6 web VMs needs a
    # reservation of its own on the other one (12); each hana_small VM on the simulator needs
    # two that it shares with no other (4): 16 of 64 MiB
    assert "14 of 14 VMs covered (hana_* twice, web once) by 16 reservations holding 1024 MiB" in acts[6]
    assert ("if hv1 died, its 6 VMs that hold slots would move to their reservations on hv3 "
            "(6 moves, 0 unplaced)") in acts[6]
    assert re.search(r"InProgress when its task returned and Completed when followed to its end, "
                     r"[1-9]\d* bytes stored; its restore to demo-backup-restored: Completed, "
                     r"the VM there \(stopped\)", acts[7]), acts[7]
    # hv3's 6 web VMs (act 2's two, act 3's four) hold act 6's reservations on hv1: all come back
    # there, act 2's running one first, then its stopped twin; the guest that ran on hv3 is killed
    # by the fence. Planned again without hv3, az1 has hv1 alone: its 12 web VMs find no slot, the
    # simulator's 2 hana_small VMs keep their 4
    assert re.search(r"fenced it with the lab's own power control \(lab_only_power, LAB ONLY: killed "
                     r"libvirtd, virtlogd and [1-9]\d* QEMU process\(es\)\); 6 of 6 VMs came back on "
                     r"their reservations' hv1, highest priority first \(demo-hv3-0, demo-hv3-1, "
                     r"(demo-hv3-job-\d, ){3}demo-hv3-job-\d\), every one running [\d.]+ s after", acts[8]), acts[8]
    assert "planned again without hv3: 2 of 14 VMs covered by 4 reservations, 12 short of a slot" in acts[8]
    # the 24 VMs acts 2, 3 and 7 made, and hv3's 6 twice: the copies on hv1 and the old definitions
    assert "30 demo VMs, the reservations and the backup are gone, every daemon is running; all acts passed" in acts[9]
    recap = _recap(run.stdout)
    assert recap and all("failed=0" in line for line in recap), recap
    assert _lab_contents(lab, vsphere) == before
    with sqlite3.connect(str(tmp_path / "state.db")) as store:
        records = store.execute("SELECT namespace, key, value FROM records").fetchall()
    # no reservation or backup record left; the fleet keeps the time of its last full run
    assert sorted(set(namespace for namespace, _key, _value in records)) == ["breaker", "vm_fleet_runs"]
    assert all(json.loads(value)["state"] == "closed" for namespace, _key, value in records
               if namespace == "breaker"), records


def test_failover_playbook(lab, tmp_path):
    run = _play(lab, tmp_path, "failover.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "VMs covered" in run.stdout and '"complete": true' in run.stdout
    recap = _recap(run.stdout)
    assert recap and all("failed=0" in line for line in recap), recap


def test_fleet_playbook(lab, tmp_path):
    run = _play(lab, tmp_path, "fleet.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert '"created": 20' in run.stdout
    assert "second run changed nothing: 20 VMs unchanged" in run.stdout
    assert '"fleet-hv1-1: updated"' in run.stdout and '"fleet-vcsim-2: updated"' in run.stdout
    assert "pruned: fleet-hv1-3, fleet-hv2-3, fleet-hv3-3, fleet-pve-3, fleet-vcsim-3" in run.stdout
    assert "15 VMs removed" in run.stdout
    recap = _recap(run.stdout)
    assert recap and all("failed=0" in line for line in recap), recap


def test_backup_playbook(lab, tmp_path):
    run = _play(lab, tmp_path, "backup.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert '"backup-demo-full Completed ' in run.stdout
    assert '"backup-demo-incremental Completed ' in run.stdout
    assert '"backup-demo-full-restored: stopped"' in run.stdout
    assert '"backup-demo-incremental-restored: stopped"' in run.stdout
    recap = _recap(run.stdout)
    assert recap and all("failed=0" in line for line in recap), recap
