"""The collection builds into a tarball that installs, and every module's documentation renders."""
import json
import os
import subprocess
import tarfile

import yaml

from ansible_collections.resilient.virt.plugins.plugin_utils._module_list import MODULES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, check=False, timeout=300, **kwargs)


def test_build_install_and_ansible_doc(tmp_path):
    built = _run(["ansible-galaxy", "collection", "build", ROOT, "--output-path", str(tmp_path)])
    assert built.returncode == 0, built.stderr
    tarballs = [name for name in os.listdir(tmp_path) if name.endswith(".tar.gz")]
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        version = yaml.safe_load(handle)["version"]
    assert tarballs == ["resilient-virt-%s.tar.gz" % version]
    with tarfile.open(str(tmp_path / tarballs[0])) as tar:
        shipped = set(tar.getnames())
    tops = set(name.split("/")[0] for name in shipped)
    assert tops == {"MANIFEST.json", "FILES.json", "COPYING", "CHANGELOG.rst", "README.md",
                    "requirements.txt", "bindep.txt", "meta", "plugins", "roles", "docs",
                    "changelogs", "extensions"}, tops
    # what an execution environment build reads (meta/) and the example definition
    assert {"meta/execution-environment.yml", "meta/ee-requirements.txt", "meta/ee-bindep.txt",
            "extensions/ee/execution-environment.yml", "extensions/ee/requirements.yml"} <= shipped
    assert "docs/benchmarks.md" not in shipped and "docs/bench-report.md" not in shipped
    assert not [name for name in shipped if name.startswith("changelogs/fragments")]

    target = tmp_path / "collections"
    installed = _run(["ansible-galaxy", "collection", "install", "--force", str(tmp_path / tarballs[0]),
                      "-p", str(target)])
    assert installed.returncode == 0, installed.stderr
    root = target / "ansible_collections" / "resilient" / "virt"
    assert (root / "plugins" / "modules" / "vm.py").is_file()

    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(target))
    docs = _run(["ansible-doc", "--json"] + ["resilient.virt.%s" % name for name in MODULES], env=env)
    assert docs.returncode == 0, docs.stderr
    rendered = json.loads(docs.stdout)
    for name in MODULES:
        entry = rendered["resilient.virt.%s" % name]
        assert entry["doc"]["short_description"] and entry["examples"] and entry["return"] is not None, name
        assert "provider" in entry["doc"]["options"], "%s lacks the common provider option" % name
        assert "resilience" in entry["doc"]["options"], "%s lacks the common resilience option" % name
        assert "in_process" in entry["doc"]["options"], "%s lacks the in_process option" % name
        assert entry["doc"]["attributes"]["action"]["support"] == "full", name
    role = _run(["ansible-doc", "-t", "role", "resilient.virt.failover_reservations"], env=env)
    assert role.returncode == 0 and "failover_requirements" in role.stdout, role.stderr
    inventory = _run(["ansible-doc", "--json", "-t", "inventory", "resilient.virt.hypervisors"],
                     env=env)
    assert inventory.returncode == 0, inventory.stderr
    entry = json.loads(inventory.stdout)["resilient.virt.hypervisors"]
    options = entry["doc"]["options"]
    assert {"providers", "include_vms", "timeout", "hostnames", "keyed_groups", "cache"} <= set(options)
    assert entry["examples"]
