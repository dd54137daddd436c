"""The playbooks the README shows (the demo, the failover tour, the fleet and the backups) run
cleanly against the lab."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _play(lab, tmp_path, playbook):
    env = dict(os.environ, RESILIENT_VIRT_STATE_STORE="sqlite:///%s" % (tmp_path / "state.db"), ANSIBLE_NOCOLOR="1")
    return subprocess.run(["ansible-playbook", "-i", lab.inventory_file, os.path.join(ROOT, "playbooks", playbook)],
                          env=env, capture_output=True, text=True, check=False, timeout=600)


def _recap(stdout):
    return [line for line in stdout.splitlines() if "ok=" in line and "failed=" in line]


def test_demo_playbook(lab, tmp_path):
    run = _play(lab, tmp_path, "demo.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "second run changed nothing" in run.stdout
    assert "ProviderAvailable=HealthCheckPassed" in run.stdout
    for host in ("hv1", "hv2", "hv3"):
        assert "%s %s-web running" % (host, host) in run.stdout
    recap = _recap(run.stdout)
    assert len(recap) == 4 and all("failed=0" in line for line in recap), recap
    assert "Traceback" not in run.stdout + run.stderr


def test_failover_playbook(lab, tmp_path):
    run = _play(lab, tmp_path, "failover.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "VMs covered" in run.stdout and '"complete": true' in run.stdout
    recap = _recap(run.stdout)
    assert recap and all("failed=0" in line for line in recap), recap


def test_fleet_playbook(lab, tmp_path):
    run = _play(lab, tmp_path, "fleet.yml")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert '"created": 16' in run.stdout
    assert "second run changed nothing: 16 VMs unchanged" in run.stdout
    assert '"fleet-hv1-1: updated"' in run.stdout and '"fleet-vcsim-2: updated"' in run.stdout
    assert "pruned: fleet-hv1-3, fleet-hv2-3, fleet-hv3-3, fleet-vcsim-3" in run.stdout
    assert "12 VMs removed" in run.stdout
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
