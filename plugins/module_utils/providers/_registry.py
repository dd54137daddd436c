"""Find the backend of a provider type and open it behind the resilience policy.

Backends are pluggy plugins (see ``hookspecs.py``); each declares its types with the hook
``resilient_virt_provider_types``. Built-in backends are modules of this collection listed in
:data:`BUILTIN_BACKENDS`, and only the module of the requested type is imported (with a plain
``from ... import`` inside a function, so that Ansible packs every backend module into the module
payload while importing none of them before it is needed). Third-party
backends are found through the entry point group :data:`ENTRY_POINT_GROUP`, read only when the
requested type is not built in: the entry point named like the type is loaded, or, when none
has that name, every entry point of the group. Observer plugins listed in the environment
variable :data:`PLUGINS_ENV` (``package.module`` or ``package.module:object``, comma
separated) or passed as ``plugins`` are registered for every provider. The backup hooks of a
built-in backend are a :class:`BuiltinBackups` plugin registered with it, which imports the
backend's backup module on the first backup call: opening a provider does not load backup code.
"""
import importlib
import os
import threading

from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Internal, InvalidSpec, field_error)
from ansible_collections.resilient.virt.plugins.module_utils.providers._guarded import GuardedProvider
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import Provider
from ansible_collections.resilient.virt.plugins.module_utils.providers.hookspecs import hookimpl

__all__ = ("BUILTIN_BACKENDS", "BUILTIN_BACKUPS", "BuiltinBackups", "ENTRY_POINT_GROUP",
           "PLUGINS_ENV", "plugin_manager", "provider_class", "provider_key", "open_provider",
           "installed_entry_points")


# A backend's code is imported when a provider of its type is first opened: a task pays only for
# the backends it uses (libvirt's 68 ms, vSphere's 106 ms in a module process, python3 -X importtime).
def _libvirt_backend():
    from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import backend as libvirt_backend
    return libvirt_backend


def _vsphere_backend():
    from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere import backend as vsphere_backend
    return vsphere_backend


def _proxmox_backend():
    from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox import backend as proxmox_backend
    return proxmox_backend


def _libvirt_backups():
    from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt import backup as libvirt_backup
    return libvirt_backup


def _vsphere_backups():
    from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere import backup as vsphere_backup
    return vsphere_backup


def _proxmox_backups():
    from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox import backup as proxmox_backup
    return proxmox_backup


class BuiltinBackups:
    """The ``resilient_virt_backup_*`` hooks of a built-in backend: each calls
    ``backup_<operation>`` of the module ``load()`` imports, on first use."""

    def __init__(self, load):
        self._load = load

    @hookimpl
    def resilient_virt_backup_prepare(self, provider, request):
        return self._load().backup_prepare(provider, request)

    @hookimpl
    def resilient_virt_backup_start(self, provider, handle):
        return self._load().backup_start(provider, handle)

    @hookimpl
    def resilient_virt_backup_poll(self, provider, handle):
        return self._load().backup_poll(provider, handle)

    @hookimpl
    def resilient_virt_backup_cancel(self, provider, handle):
        return self._load().backup_cancel(provider, handle)

    @hookimpl
    def resilient_virt_backup_list(self, provider, vm):
        return self._load().backup_list(provider, vm)

    @hookimpl
    def resilient_virt_backup_delete(self, provider, artifact):
        return self._load().backup_delete(provider, artifact)


# type name -> function importing the backend module (a plugin with module-level hookimpls)
BUILTIN_BACKENDS = {"libvirt": _libvirt_backend, "vsphere": _vsphere_backend,
                    "proxmox": _proxmox_backend}
# type name -> the plugin with its backup hooks (a backend without one has no backups)
BUILTIN_BACKUPS = {"libvirt": BuiltinBackups(_libvirt_backups),
                   "vsphere": BuiltinBackups(_vsphere_backups),
                   "proxmox": BuiltinBackups(_proxmox_backups)}
ENTRY_POINT_GROUP = "resilient_virt.providers"
PLUGINS_ENV = "RESILIENT_VIRT_PLUGINS"
_SHARED = {}  # (PLUGINS_ENV value, provider type) -> the manager of calls without plugins
_LOCK = threading.RLock()  # registering is a look then a change: one thread at a time


def _load_object(reference):
    """``package.module`` or ``package.module:attr.path`` -> the object."""
    module_name, _colon, attr = reference.partition(":")
    target = importlib.import_module(module_name.strip())
    for part in filter(None, attr.strip().split(".")):
        target = getattr(target, part)
    return target


def plugin_manager(plugins=(), environ=None):
    """A PluginManager with the hookspecs, ``plugins`` and the plugins of PLUGINS_ENV."""
    try:
        import pluggy
    except ImportError as exc:
        raise Internal("the Python library pluggy is needed to use providers; install it on the "
                       "managed node (pip install pluggy)", cause=exc) from exc

    # imported after the check above: hookspecs imports pluggy
    from ansible_collections.resilient.virt.plugins.module_utils.providers import hookspecs

    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    environ = os.environ if environ is None else environ
    for plugin in plugins:
        _register(manager, plugin)
    for reference in filter(None, (r.strip() for r in environ.get(PLUGINS_ENV, "").split(","))):
        try:
            plugin = _load_object(reference)
        except (ImportError, AttributeError) as exc:
            raise field_error(PLUGINS_ENV, "cannot load plugin %r (%s: %s); fix or remove it"
                              % (reference, type(exc).__name__, exc), cause=exc) from exc
        _register(manager, plugin)
    return manager


def _shared_manager(type_name, environ):
    """The manager of this process for provider type ``type_name`` and the PLUGINS_ENV value of
    ``environ``: the hookspecs are read once per process (for tasks run in the controller's
    worker, before it forks) and it only ever holds what :func:`provider_class` registers for
    that type, so it serves every call without ``plugins`` exactly as a new one would."""
    key = (environ.get(PLUGINS_ENV, ""), type_name)
    with _LOCK:
        if key not in _SHARED:
            _SHARED[key] = plugin_manager(environ=environ)
        return _SHARED[key]


def _register(manager, plugin):
    with _LOCK:
        if not manager.is_registered(plugin):
            manager.register(plugin)


def installed_entry_points():
    """Entry points of ENTRY_POINT_GROUP installed in this Python environment."""
    from importlib import metadata

    found = metadata.entry_points()
    if hasattr(found, "select"):
        return list(found.select(group=ENTRY_POINT_GROUP))
    return list(found.get(ENTRY_POINT_GROUP, ()))  # Python 3.9


def _entry_point_label(entry_point):
    dist = getattr(entry_point, "dist", None)
    return "%s (%s)" % (entry_point.name, dist.name) if dist is not None else entry_point.name


def _load_plugins(manager, type_name):
    """Register the plugin(s) that may implement ``type_name``; return the group's entry points.

    Third-party plugins load through pluggy's ``load_setuptools_entrypoints``: the entry point
    named like the type, else every entry point of the group.
    """
    if type_name in BUILTIN_BACKENDS:
        _register(manager, BUILTIN_BACKENDS[type_name]())
        if type_name in BUILTIN_BACKUPS:
            _register(manager, BUILTIN_BACKUPS[type_name])
        return []
    entry_points = installed_entry_points()
    try:
        with _LOCK:
            if not manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=type_name):
                manager.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    except Exception as exc:
        raise Internal("a provider plugin of the entry point group %s failed to load (%s: %s); "
                       "installed: %s" % (ENTRY_POINT_GROUP, type(exc).__name__, exc, ", ".join(
                           "%s = %s" % (_entry_point_label(ep), ep.value) for ep in entry_points)),
                       cause=exc) from exc
    return entry_points


def _declared_types(manager):
    types = {}
    for answer in manager.hook.resilient_virt_provider_types():
        classes = answer.items() if isinstance(answer, dict) else \
            [(klass.type_name, klass) for klass in answer]
        for name, klass in classes:
            if not (isinstance(klass, type) and issubclass(klass, Provider)):
                raise Internal("provider type %r is declared with %r, which is not a subclass of "
                               "%s.Provider" % (name, klass, Provider.__module__))
            if types.get(name, klass) is not klass:
                raise Internal("provider type %r is declared twice: by %s.%s and %s.%s" % (
                    name, types[name].__module__, types[name].__name__, klass.__module__,
                    klass.__name__))
            types[name] = klass
    return types


def provider_class(type_name, manager=None):
    """The Provider subclass of ``type_name``; InvalidSpec naming ``provider.type`` if none."""
    manager = manager or _shared_manager(type_name, os.environ)
    entry_points = [] if type_name is None else _load_plugins(manager, type_name)
    klass = _declared_types(manager).get(type_name)
    if klass is not None:
        return klass
    if type_name is None:
        entry_points = installed_entry_points()
    known = "built-in types: %s; installed plugins (entry point group %s): %s" % (
        ", ".join(sorted(BUILTIN_BACKENDS)), ENTRY_POINT_GROUP,
        ", ".join(_entry_point_label(ep) for ep in entry_points) or "none")
    if type_name is None:
        message = "provider.type is required; " + known
    else:
        message = "provider.type=%r is not a known provider type; %s" % (type_name, known)
    raise field_error("provider.type", message)


def _check_config(config):
    if not isinstance(config, dict):
        raise InvalidSpec("provider must be a dict such as {type: libvirt, uri: 'qemu:///system'}"
                          ", not %s" % type(config).__name__)
    type_name = config.get("type")
    if type_name is not None and not isinstance(type_name, str):
        raise field_error("provider.type", "provider.type must be a string such as libvirt, not %r"
                          % (type_name,))
    return type_name


def provider_key(config, plugins=(), environ=None):
    """The key (breaker and rate limit name) of the provider ``config``, without connecting;
    ``environ`` (default: this process's) gives the options' environment fallbacks."""
    type_name = _check_config(config)
    environ = os.environ if environ is None else environ
    manager = plugin_manager(plugins, environ) if plugins else _shared_manager(type_name, environ)
    return provider_class(type_name, manager)(config, environ=environ).key


def open_provider(config, settings=None, store=None, plugins=(), environ=None, spans=None):
    """A GuardedProvider for the ``provider`` dict ``config``; nothing is contacted yet.

    ``settings``: a ResilienceSettings (default: resolved from the environment); ``store``: the
    StateStore (default: ``open_store(settings.state_store)``); ``plugins``: extra plugin
    objects (observers, fault injectors, backends); ``environ``: the task's environment (default:
    this process's), for the plugins, settings and store and the options' environment fallbacks;
    ``spans``: the task's ``_resilience.spans.SpanLog``, when its calls are recorded for traces.
    """
    type_name = _check_config(config)
    environ = os.environ if environ is None else environ
    manager = plugin_manager(plugins, environ) if plugins else _shared_manager(type_name, environ)
    provider = provider_class(type_name, manager)(config, environ=environ)
    if settings is None:
        settings = resolve_settings(environ=environ)
    if store is None:
        store = open_store(settings.state_store, environ=environ)
    return GuardedProvider(provider, store, settings, manager.hook, spans=spans)
