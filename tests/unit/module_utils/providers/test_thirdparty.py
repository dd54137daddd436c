"""A third-party backend installed with pip is found through its entry point, unchanged.

The package is tests/fixtures/thirdparty_provider (provider type ``memory_example``, a fake
backend keeping VMs in a JSON file). It is installed into the running Python with
``pip install --no-deps`` (from a copy, so the repository gets no build files) unless the
installed copy already matches the fixture.
"""
import importlib
import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
from importlib import metadata

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict, InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers import _registry as registry
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import Provider

from provider_testing import COLLECTIONS, ROOT, quick_settings

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "thirdparty_provider")
DIST = "resilient-virt-example-provider"
PACKAGE = "resilient_virt_example_provider"
SOURCES = ("__init__.py", "backend.py")


def _installed_is_current():
    try:
        entry_points = metadata.distribution(DIST).entry_points
    except metadata.PackageNotFoundError:
        return False
    if [(ep.group, ep.name) for ep in entry_points] != [(registry.ENTRY_POINT_GROUP,
                                                         "memory_example")]:
        return False
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return False
    installed = list(spec.submodule_search_locations)[0]
    return all(_read(os.path.join(installed, name)) == _read(os.path.join(FIXTURE, PACKAGE, name))
               for name in SOURCES)


def _read(path):
    if not os.path.exists(path):
        return None
    with open(path, "rb") as handle:
        return handle.read()


@pytest.fixture(scope="module", autouse=True)
def example_installed(tmp_path_factory):
    if not _installed_is_current():
        source = str(tmp_path_factory.mktemp("example") / "src")
        shutil.copytree(FIXTURE, source)
        out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps",
                              "--force-reinstall", "--quiet", source],
                             capture_output=True, text=True, check=False, timeout=600)
        assert out.returncode == 0, "pip install of the example provider failed:\n" + out.stderr
        importlib.invalidate_caches()
        assert _installed_is_current()


def _config(tmp_path, **extra):
    return dict({"type": "memory_example", "path": str(tmp_path / "vms.json")}, **extra)


def test_the_entry_point_provider_works_through_open_provider(tmp_path, store):
    assert "memory_example" not in registry.BUILTIN_BACKENDS
    guarded = registry.open_provider(_config(tmp_path, name="mem"), quick_settings(), store,
                                     environ={})
    assert isinstance(guarded.provider, Provider)
    assert type(guarded.provider).__module__ == PACKAGE + ".backend"
    assert guarded.key == "memory_example:mem"
    assert guarded.validate()["fake"] is True
    vm = guarded.create({"name": "demo", "vcpus": 2, "memory_mb": 256, "tags": ["t"]})
    assert (vm["state"], vm["provider"], vm["provider_key"]) == ("stopped", "mem", "memory_example:mem")
    with pytest.raises(Conflict):
        guarded.create({"name": "demo", "vcpus": 2, "memory_mb": 256})
    assert guarded.power("demo", "on")["state"] == "running"
    assert guarded.list_hypervisors()[0]["used_cpu"] == 2
    assert [v["name"] for v in guarded.list_vms({"tags": ["t"]})] == ["demo"]
    assert stat.S_IMODE(os.stat(tmp_path / "vms.json").st_mode) == 0o600
    assert guarded.policy.breaker.snapshot()["successes_total"] >= 5


def test_its_options_are_checked_like_a_builtin(tmp_path):
    with pytest.raises(InvalidSpec) as info:
        registry.provider_key({"type": "memory_example", "pth": "x"})
    paths = sorted(e["path"] for e in info.value.details["errors"])
    assert paths == ["provider.path", "provider.pth"]


def test_state_survives_across_processes_and_loads_only_on_demand(tmp_path):
    script = (
        "import json, sys; sys.path.insert(0, %r)\n"
        "from ansible_collections.resilient.virt.plugins.module_utils.providers import _registry as registry\n"
        "from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import "
        "resolve_settings\n"
        "env = {'RESILIENT_VIRT_STATE_STORE': 'sqlite:///%s'}\n"
        "settings = resolve_settings({}, environ={})\n"
        "registry.open_provider({'type': 'libvirt', 'uri': 'test:///default'}, settings, "
        "environ=env).close()\n"
        "before = %r in sys.modules\n"
        "p = registry.open_provider(json.loads(sys.argv[1]), settings, environ=env)\n"
        "vm = p.power('demo', 'on') if sys.argv[2] == 'on' else p.describe('demo')\n"
        "print(json.dumps([before, vm['state']]))\n"
        % (COLLECTIONS, tmp_path / "state.db", PACKAGE))
    config = _config(tmp_path)
    registry.open_provider(config, quick_settings(), environ={
        "RESILIENT_VIRT_STATE_STORE": "sqlite:///%s" % (tmp_path / "state.db")}).create(
        {"name": "demo", "vcpus": 1, "memory_mb": 64})
    for action, expected in (("on", "running"), ("describe", "running")):
        out = subprocess.run([sys.executable, "-c", script, json.dumps(config), action],
                             capture_output=True, text=True, check=False, timeout=60)
        assert json.loads(out.stdout) == [False, expected], out.stderr
