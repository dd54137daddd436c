"""No file under plugins/ imports from a layer above its own (docs/architecture.md#layers).

Every import of the collection's own code is checked, at the top of a file or inside a function.
"""
import ast
import os

from paths import ROOT

PACKAGE = "ansible_collections.resilient.virt."
UTILS = "plugins/module_utils/"
# lowest first; a path ending in "/" is a package with everything under it
LAYERS = (
    ("errors", (UTILS + "__init__.py", UTILS + "errors.py", UTILS + "_network_errors.py",
                UTILS + "_masking.py", UTILS + "_time.py", UTILS + "_convert.py",
                UTILS + "_input.py", UTILS + "_conditions.py")),
    ("resilience and state", (UTILS + "_resilience/", UTILS + "_state/")),
    ("providers", (UTILS + "providers/", UTILS + "_required_libraries.py")),
    ("tasks", (UTILS + "_vm/", UTILS + "_fleet/", UTILS + "_backup/", UTILS + "_snapshot/",
               UTILS + "_failover/", UTILS + "_health/", UTILS + "_inventory/", UTILS + "_migration/",
               UTILS + "_events/", UTILS + "_task_context.py")),
    ("module base", (UTILS + "_module_base.py", UTILS + "_awx.py")),
    ("modules and plugins", ("plugins/modules/", "plugins/action/", "plugins/callback/",
                             "plugins/inventory/", "plugins/plugin_utils/",
                             "plugins/doc_fragments/")),
)


def layer_of(path):
    """The index in LAYERS of the file ``path`` (relative to the repository)."""
    for index, (_name, members) in enumerate(LAYERS):
        if any(path == member or member.endswith("/") and path.startswith(member)
               for member in members):
            return index
    raise AssertionError("%s is in no layer: add it to LAYERS here and to docs/architecture.md"
                         % path)


def file_of(module):
    """The file (relative to the repository) of the collection's ``module``, or None."""
    base = module[len(PACKAGE):].replace(".", "/")
    for candidate in (base + ".py", base + "/__init__.py"):
        if os.path.exists(os.path.join(ROOT, candidate)):
            return candidate
    return None


def imported_files(path):
    """The collection's files that ``path`` imports, each with the line of its import."""
    with open(os.path.join(ROOT, path)) as handle:
        tree = ast.parse(handle.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            # "from package import module" imports the module; else a name of the package
            modules = [node.module + "." + alias.name if file_of(node.module + "." + alias.name)
                       else node.module for alias in node.names]
        else:
            continue
        for module in modules:
            if module.startswith(PACKAGE):
                yield node.lineno, file_of(module) or module


def plugin_files():
    for folder, _dirs, names in os.walk(os.path.join(ROOT, "plugins")):
        for name in names:
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(folder, name), ROOT)


def test_no_file_imports_from_a_higher_layer():
    upwards = []
    for path in sorted(plugin_files()):
        own = layer_of(path)
        for line, target in imported_files(path):
            if layer_of(target) > own:
                upwards.append("%s:%d (%s) imports %s (%s)" % (
                    path, line, LAYERS[own][0], target, LAYERS[layer_of(target)][0]))
    assert not upwards, "imports against the layer order:\n" + "\n".join(upwards)
