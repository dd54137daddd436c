"""A module process that describes one VM imports only the code that path needs.

Every task is a fresh Python process, which compiles each module it imports from the AnsiballZ
zip (make bench measures it): code that only some tasks reach is imported where they reach it.
The task runs in a fresh interpreter, as a module process does, on libvirt's in-process test
driver (its one domain is ``test``) with a state store given.
"""
import json
import subprocess
import sys

from paths import COLLECTIONS

MODULE_UTILS = "ansible_collections.resilient.virt.plugins.module_utils."
# code the describe path must not import: what it needs is imported where it is needed
ELSEWHERE = (
    "providers._libvirt.ssh",       # SSH settings given, or a libvirt error to classify
    "providers._libvirt.create",    # create, reconfigure, delete of volumes
    "providers._libvirt.checks",    # create, reconfigure
    "providers._libvirt.edit",      # reconfigure
    "providers._reconfigure",       # reconfigure
    "_state.memory",                # the state store failed under store_failure=open
    "_awx",                         # no state store given
)
SCRIPT = """
import contextlib, io, json, sys
sys.path.insert(0, %(collections)r)
from ansible.module_utils.testing import patch_module_args
from ansible_collections.resilient.virt.plugins.modules.vm_info import VmInfoModule
out = io.StringIO()
with patch_module_args(%(args)r), contextlib.redirect_stdout(out):
    try:
        VmInfoModule.main()
    except SystemExit:
        pass
result = json.loads(out.getvalue().strip().splitlines()[-1])
print(json.dumps([result.get("failed", False), [vm["name"] for vm in result.get("vms", [])],
                  sorted(name for name in sys.modules if name.startswith(%(prefix)r))]))
"""


def test_describing_a_vm_imports_none_of_the_code_other_paths_need(tmp_path):
    args = {"provider": {"type": "libvirt", "name": "unit", "uri": "test:///default"},
            "name": "test", "state_store": "sqlite://%s" % (tmp_path / "s.db")}
    script = SCRIPT % {"collections": COLLECTIONS, "args": args, "prefix": MODULE_UTILS}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False, timeout=60)
    assert out.returncode == 0, out.stderr
    failed, names, imported = json.loads(out.stdout.strip().splitlines()[-1])
    assert (failed, names) == (False, ["test"]), out.stdout
    assert MODULE_UTILS + "providers._libvirt.backend" in imported  # the path was taken
    assert [name for name in ELSEWHERE if MODULE_UTILS + name in imported] == []
