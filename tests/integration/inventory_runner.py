"""Run real ``ansible-inventory`` processes on a resilient.virt.hypervisors source.

``run_inventory(tmp_path, source, ...)`` writes ``source`` (a dict) as
``<name>.hypervisors.yml`` and runs ``ansible-inventory -i`` on it, with ``--list`` unless other
arguments are given. The result holds the exit code, the output, the wall time and, for
``--list``, the inventory with Ansible's ``{"__ansible_unsafe": value}`` wrappers (strings that
came from a provider, not from a trusted template) taken off.
"""
import json
import os
import subprocess
import time

import yaml


def plain(value):
    """``value`` from ``ansible-inventory --list`` without the ``__ansible_unsafe`` wrappers."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return dict((key, plain(item)) for key, item in value.items())
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


class InventoryRun:
    def __init__(self, proc, wall, listed):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.wall = wall
        self.data = {}
        if listed and proc.returncode == 0:
            self.data = plain(json.loads(proc.stdout[proc.stdout.find("{"):]))

    @property
    def output(self):
        return self.stdout + "\n" + self.stderr

    @property
    def hostvars(self):
        return self.data.get("_meta", {}).get("hostvars", {})

    def hosts(self, group):
        """Hosts directly in ``group`` (--list gives children separately)."""
        return sorted(self.data.get(group, {}).get("hosts", []))

    @property
    def all_vars(self):
        """Variables of the ``all`` group (--export keeps them there)."""
        return self.data.get("all", {}).get("vars", {})

    def __repr__(self):
        return "InventoryRun(rc=%s, %.1f s, stderr=%s, stdout=%s)" % (
            self.rc, self.wall, self.stderr[-3000:], self.stdout[-3000:])


def run_inventory(tmp_path, source, args=("--list", "--export"), env=None, timeout=120,
                  name="lab"):
    path = os.path.join(str(tmp_path), name + ".hypervisors.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(dict(source, plugin="resilient.virt.hypervisors"), handle, sort_keys=False)
    environ = dict(os.environ, ANSIBLE_NOCOLOR="1", PYTHONDONTWRITEBYTECODE="1",
                   ANSIBLE_INVENTORY_UNPARSED_FAILED="1", ANSIBLE_INVENTORY_ENABLED="auto")
    environ.update(env or {})
    began = time.monotonic()
    proc = subprocess.run(["ansible-inventory", "-i", path] + list(args), env=environ,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=str(tmp_path))
    return InventoryRun(proc, time.monotonic() - began, "--list" in args)
