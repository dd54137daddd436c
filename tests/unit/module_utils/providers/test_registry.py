"""Registry: built-in backends loaded on demand, plugins, clear errors for unknown types."""
import inspect
import subprocess
import sys

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import Internal, InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers import hookspecs
from ansible_collections.resilient.virt.plugins.module_utils.providers import _registry as registry
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import Provider
from ansible_collections.resilient.virt.plugins.module_utils.providers._guarded import (
    GuardedProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl

from provider_testing import COLLECTIONS, TEST_URI, quick_settings


class EchoProvider(Provider):
    type_name = "echo"
    capabilities = frozenset(("describe",))

    def describe(self, name):
        return {"name": name, "echo": True}


class EchoPlugin:
    @hookimpl
    def resilient_virt_provider_types(self):
        return [EchoProvider]


class Counter:
    def __init__(self):
        self.calls = 0

    @hookimpl
    def resilient_virt_after_call(self, operation):
        self.calls += 1


COUNTER = Counter()


def test_open_provider_builds_a_guarded_libvirt_provider(libvirt_config, store):
    guarded = registry.open_provider(libvirt_config, quick_settings(), store, environ={})
    try:
        assert isinstance(guarded, GuardedProvider)
        assert guarded.key == "libvirt:unit" == registry.provider_key(libvirt_config)
        assert guarded.policy.breaker.snapshot()["name"] == "libvirt:unit"
        assert guarded.describe("test")["provider_key"] == "libvirt:unit"
    finally:
        guarded.close()
    assert registry.provider_key({"type": "libvirt", "uri": TEST_URI}) == "libvirt:" + TEST_URI
    assert registry.provider_key({"type": "libvirt"}) == "libvirt:qemu:///system"


def test_only_the_requested_builtin_backend_is_imported_and_nothing_heavy():
    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "from ansible_collections.resilient.virt.plugins.module_utils.providers import _registry as registry\n"
        "registry.provider_class('libvirt')\n"
        "mods = [m for m in ('libvirt', 'jsonschema', 'pyVmomi', 'resilient_virt_example_provider',"
        " registry.__name__.replace('_registry', '_vsphere.backend')) if m in sys.modules]\n"
        "print(mods, registry.__name__.replace('_registry', '_libvirt.backend') in sys.modules)\n"
        % COLLECTIONS)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False, timeout=60)
    assert out.stdout.split() == ["[]", "True"], out.stderr


def test_backup_code_is_imported_by_the_first_backup_call_not_by_opening_a_provider(tmp_path):
    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "from ansible_collections.resilient.virt.plugins.module_utils.providers import _registry as registry\n"
        "from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store\n"
        "guarded = registry.open_provider({'type': 'libvirt', 'uri': 'test:///default'}, "
        "store=open_store('sqlite://%s/s.db'))\n"
        "name = registry.__name__.replace('_registry', '_libvirt.backup')\n"
        "before = [m for m in sys.modules if '_libvirt.backup' in m or m.endswith('restore')]\n"
        "try:\n"
        "    guarded.backup('backup_list', vm=None)\n"
        "except Exception as exc:\n"
        "    answer = exc\n"
        "print(before, name in sys.modules, type(answer).__name__)\n"
        % (COLLECTIONS, tmp_path))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False, timeout=60)
    # the test driver has no pool "backups": the backup code loaded and answered
    assert out.stdout.split() == ["[]", "True", "InvalidSpec"], out.stdout + out.stderr


def test_an_unknown_or_missing_type_names_provider_type_and_lists_known_types():
    with pytest.raises(InvalidSpec) as info:
        registry.provider_class("hyperv")
    message = str(info.value)
    assert message.startswith("provider.type='hyperv' is not a known provider type")
    assert "libvirt, proxmox, vsphere" in message and registry.ENTRY_POINT_GROUP in message
    assert info.value.details["errors"][0]["path"] == "provider.type"
    with pytest.raises(InvalidSpec, match="provider.type is required"):
        registry.open_provider({"uri": TEST_URI}, quick_settings(), environ={})
    with pytest.raises(InvalidSpec, match="provider.type must be a string"):
        registry.provider_key({"type": ["libvirt"]})
    with pytest.raises(InvalidSpec, match="provider must be a dict"):
        registry.provider_key("libvirt")


def test_installed_entry_points_are_listed_in_the_error():
    names = [ep.name for ep in registry.installed_entry_points()]
    with pytest.raises(InvalidSpec) as info:
        registry.provider_class("hyperv")
    for name in names:
        assert name in str(info.value)
    if not names:
        assert str(info.value).endswith(": none")


def test_a_plugin_object_adds_a_type_like_a_builtin(store):
    guarded = registry.open_provider({"type": "echo", "name": "e1"}, quick_settings(), store,
                                     plugins=[EchoPlugin()], environ={})
    assert guarded.key == "echo:e1"
    assert guarded.describe("vm") == {"name": "vm", "echo": True}


def test_calls_without_plugins_share_a_manager_per_type_that_holds_only_that_type(store):
    """The hookspecs are read once per process: calls without plugins share one manager per
    provider type and PLUGINS_ENV value, holding only what that type registers; a plugin passed
    to one call is registered in a manager of its own, so the next call never sees it."""
    guarded = registry.open_provider({"type": "libvirt", "uri": TEST_URI}, quick_settings(),
                                     store, environ={})
    guarded.close()
    shared = registry._shared_manager("libvirt", {})
    assert registry._shared_manager("libvirt", {}) is shared
    assert registry._shared_manager("vsphere", {}) is not shared
    assert registry._shared_manager("libvirt", {registry.PLUGINS_ENV: __name__ + ":COUNTER"}) \
        is not shared
    guarded = registry.open_provider({"type": "echo", "name": "e1"}, quick_settings(), store,
                                     plugins=[EchoPlugin()], environ={})
    assert guarded.describe("vm")["echo"] is True
    with pytest.raises(InvalidSpec, match="not a known provider type"):
        registry.open_provider({"type": "echo"}, quick_settings(), store, environ={})
    assert set(registry._declared_types(shared)) == {"libvirt"}


def test_a_declared_class_must_be_a_provider():
    class NotAProvider:
        @hookimpl
        def resilient_virt_provider_types(self):
            return {"odd": dict}

    with pytest.raises(Internal, match="not a subclass"):
        registry.provider_class("odd", registry.plugin_manager([NotAProvider()], environ={}))


def test_two_plugins_declaring_one_type_is_an_error():
    class Other(EchoProvider):
        pass

    class Clash:
        @hookimpl
        def resilient_virt_provider_types(self):
            return {"echo": Other}

    manager = registry.plugin_manager([EchoPlugin(), Clash()], environ={})
    with pytest.raises(Internal, match="declared twice"):
        registry.provider_class("echo", manager)


def test_observer_plugins_come_from_the_environment(tmp_path, monkeypatch, store,
                                                    libvirt_config):
    (tmp_path / "rv_observer.py").write_text(
        "from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs "
        "import hookimpl\n"
        "calls = []\n"
        "@hookimpl\n"
        "def resilient_virt_after_call(operation, outcome):\n"
        "    calls.append((operation, outcome))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    environ = {registry.PLUGINS_ENV: "rv_observer, %s:COUNTER" % __name__}
    COUNTER.calls = 0
    guarded = registry.open_provider(libvirt_config, quick_settings(), store, environ=environ)
    guarded.describe("test")
    guarded.close()
    import rv_observer

    assert rv_observer.calls == [("describe", "ok")] and COUNTER.calls == 1
    with pytest.raises(InvalidSpec) as info:
        registry.plugin_manager(environ={registry.PLUGINS_ENV: "no_such_module_here"})
    assert registry.PLUGINS_ENV in str(info.value) and "no_such_module_here" in str(info.value)


def test_every_hook_is_documented_with_its_result_kind():
    hooks = [getattr(hookspecs, name) for name in dir(hookspecs)
             if name.startswith("resilient_virt_")]
    assert {h.__name__ for h in hooks} >= {
        "resilient_virt_provider_types", "resilient_virt_classify_error",
        "resilient_virt_before_call", "resilient_virt_after_call",
        "resilient_virt_hold_capacity", "resilient_virt_release_capacity"}
    for hook in hooks:
        doc = inspect.getdoc(hook)
        assert doc and ("firstresult" in doc or "not firstresult" in doc), hook.__name__
    manager = registry.plugin_manager(environ={})
    assert manager.hook.resilient_virt_classify_error.spec.opts["firstresult"] is True
    assert manager.hook.resilient_virt_hold_capacity(provider=None, reservation={}) is None


def test_a_third_party_plugin_that_fails_to_load_is_named_in_the_error(tmp_path):
    """Entry points load through pluggy; one whose import fails gives an Internal error naming
    the group and the installed entry points, never a traceback."""
    dist = tmp_path / "broken_backend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[%s]\nbroken = broken_backend_mod\n"
                                           % registry.ENTRY_POINT_GROUP)
    (tmp_path / "broken_backend_mod.py").write_text("raise ImportError('no such library: hvlib')\n")
    script = (
        "import sys; sys.path[:0] = [%r, %r]\n"
        "from ansible_collections.resilient.virt.plugins.module_utils.providers import _registry\n"
        "from ansible_collections.resilient.virt.plugins.module_utils.errors import VirtError\n"
        "try:\n    _registry.provider_class('broken')\n"
        "except VirtError as err:\n    print(err.type + ': ' + err.message)\n"
        % (str(tmp_path), COLLECTIONS))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=False, timeout=60)
    assert out.stdout.startswith("Internal: a provider plugin of the entry point group "
                                 "resilient_virt.providers failed to load"), out
    assert "no such library: hvlib" in out.stdout
    assert "broken (broken-backend) = broken_backend_mod" in out.stdout
    assert "Traceback" not in out.stderr
