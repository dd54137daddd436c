"""The collection's execution environment files, read by the real ansible-builder.

``meta/execution-environment.yml`` must name the run-time needs only (``meta/ee-requirements.txt``,
``meta/ee-bindep.txt``), and the example definition ``extensions/ee/execution-environment.yml``
must produce a build context that installs the collection from its tarball. ``ansible-builder
create`` makes that context; the stages that need a container (package installs, pip wheels)
cannot run here (no container engine, no registry), so the test runs the two steps of the build
that need none, as the Containerfile runs them: the galaxy stage's ``ansible-galaxy collection
install -r requirements.yml`` in the context's ``_build`` directory, and the builder stage's
``introspect.py`` (shipped in the context) over what it installed. ``ansible-builder introspect``
is checked the same way.

The oracles are the test's own: the third-party imports found in plugins/ (ast) mapped to their
distributions by the installed packages' metadata; the Debian packages that own the libvirt
library libvirt-python loads, the ssh client and libvirt's headers (dpkg -S); the test
requirements, which must never reach an image. The RPM names cannot be checked on this Debian
machine.
"""
import ast
import filecmp
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
import yaml
from bindep.depends import Depends
from packaging.requirements import Requirement

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "extensions", "ee")
ANNOTATION = "  # from collection resilient.virt"


def _run(args, **kwargs):
    proc = subprocess.run(args, capture_output=True, text=True, check=False, timeout=300, **kwargs)
    assert proc.returncode == 0, "%s failed: %s %s" % (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def _lines(path):
    with open(path) as handle:
        return [line.strip() for line in handle if line.strip() and not line.startswith("#")]


def _requirements(path):
    return dict((Requirement(line).name.lower(), str(Requirement(line).specifier))
                for line in _lines(path))


def _version():
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        return yaml.safe_load(handle)["version"]


def _third_party_imports():
    """The modules plugins/ imports that are neither stdlib nor Ansible, by dotted name (``from
    package import name`` counts as ``package.name``: a name may be a module)."""
    found = set()
    for where, _dirs, files in os.walk(os.path.join(ROOT, "plugins")):
        for name in files:
            if not name.endswith(".py"):
                continue
            with open(os.path.join(where, name)) as handle:
                tree = ast.parse(handle.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.update(node.module + "." + alias.name for alias in node.names)
    return set(name for name in found if name.split(".")[0] not in sys.stdlib_module_names
               and name.split(".")[0] not in ("ansible", "ansible_collections", "__future__"))


def _origin(module):
    """The file of ``module``; None when it is no module (a class, a namespace package)."""
    try:
        spec = importlib.util.find_spec(module)
    except ImportError:  # a name inside a module, not a module
        return None
    return spec.origin if spec is not None and spec.has_location else None


def _providers(module, distributions):
    """The distributions that provide ``module``: those of its top-level package or, when
    several share it as a namespace (opentelemetry), the one whose files hold the module."""
    owners = distributions.get(module.split(".")[0], [])
    if len(owners) < 2:
        return owners
    while _origin(module) is None:
        module = module.rsplit(".", 1)[0]  # ``from package import name``: name is no module
    origin = os.path.realpath(_origin(module))
    return [owner for owner in owners
            if any(os.path.realpath(entry.locate()) == origin
                   for entry in importlib.metadata.distribution(owner).files or ())]


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    """The example definition copied next to a freshly built tarball, and the build context
    ``ansible-builder create`` made from it: {"dir", "tarball", "context"}."""
    where = tmp_path_factory.mktemp("ee")
    for name in os.listdir(EXAMPLE):
        shutil.copy(os.path.join(EXAMPLE, name), str(where / name))
    _run(["ansible-galaxy", "collection", "build", ROOT, "--output-path", str(where)])
    tarball = where / ("resilient-virt-%s.tar.gz" % _version())
    assert tarball.is_file()
    _run(["ansible-builder", "create", "-f", str(where / "execution-environment.yml"),
          "-c", str(where / "context"), "--output-filename", "Containerfile"])
    return {"dir": where, "tarball": tarball, "context": where / "context"}


@pytest.fixture(scope="module")
def installed(context, tmp_path_factory):
    """The galaxy stage, run here: its ansible-galaxy command in the context's _build directory,
    into a collections path of the test's (without the tests' collections path, where the
    collection is linked already, as no image has it)."""
    target = tmp_path_factory.mktemp("usr-share-ansible") / "collections"
    env = dict((key, value) for key, value in os.environ.items()
               if key != "ANSIBLE_COLLECTIONS_PATH")
    _run(["ansible-galaxy", "collection", "install", "-r", "requirements.yml",
          "--collections-path", str(target)], cwd=str(context["context"] / "_build"),
         env=dict(env, ANSIBLE_GALAXY_DISABLE_GPG_VERIFY="1"))
    assert (target / "ansible_collections" / "resilient" / "virt" / "MANIFEST.json").is_file()
    return target


def test_meta_names_the_ee_only_files():
    with open(os.path.join(ROOT, "meta", "execution-environment.yml")) as handle:
        definition = yaml.safe_load(handle)
    assert definition == {"version": 3, "dependencies": {
        "python": "meta/ee-requirements.txt", "system": "meta/ee-bindep.txt"}}


def test_ee_requirements_are_the_runtime_imports_with_the_bounds_of_requirements_txt():
    ee = _requirements(os.path.join(ROOT, "meta", "ee-requirements.txt"))
    everything = _requirements(os.path.join(ROOT, "requirements.txt"))
    distributions = importlib.metadata.packages_distributions()
    imported = set()
    for name in _third_party_imports():
        owners = _providers(name, distributions)
        assert owners, "plugins import %s, which no installed package provides" % name
        imported.update(dist.lower() for dist in owners)
    assert set(ee) == imported, "meta/ee-requirements.txt must list exactly what plugins/ imports"
    for name, bounds in ee.items():
        assert everything.get(name) == bounds, "%s: %r here, %r in requirements.txt" % (
            name, bounds, everything.get(name))
    tests_only = _requirements(os.path.join(ROOT, "tests", "requirements.txt"))
    assert not set(ee) & set(tests_only)


def _dpkg_owner(path):
    owner = _run(["dpkg", "-S", os.path.realpath(path)]).stdout
    return owner.split(":")[0]


def test_ee_bindep_names_what_libvirt_python_builds_and_runs_with():
    with open(os.path.join(ROOT, "meta", "ee-bindep.txt")) as handle:
        depends = Depends(handle.read())

    def names(*profiles):
        return set(rule[0] for rule in depends.active_rules(list(profiles)))

    run_dpkg, build_dpkg = names("platform:dpkg"), names("platform:dpkg", "compile")
    run_rpm, build_rpm = names("platform:rpm"), names("platform:rpm", "compile")
    assert run_dpkg < build_dpkg and run_rpm < build_rpm and not run_dpkg & run_rpm

    # on this Debian machine: the packages that own what libvirt-python and qemu+ssh use
    import libvirtmod

    linked = [line.split("=>")[1].split()[0] for line in _run(["ldd", libvirtmod.__file__]).stdout.splitlines()
              if line.strip().startswith("libvirt.so")]
    assert linked, "libvirt-python is not linked to libvirt.so"
    assert _dpkg_owner(linked[0]) in run_dpkg
    assert _dpkg_owner(shutil.which("ssh")) in run_dpkg
    headers = _run(["pkg-config", "--variable=includedir", "libvirt"]).stdout.strip()
    assert _dpkg_owner(os.path.join(headers, "libvirt", "libvirt.h")) in build_dpkg - run_dpkg
    assert {"gcc", "pkg-config"} <= build_dpkg - run_dpkg and {"gcc"} <= build_rpm - run_rpm


def test_builder_create_makes_a_context_that_installs_the_collection(context):
    with open(os.path.join(EXAMPLE, "execution-environment.yml")) as handle:
        definition = yaml.safe_load(handle)
    build = context["context"] / "_build"
    with open(str(context["context"] / "Containerfile")) as handle:
        containerfile = handle.read().splitlines()
    assert 'ARG EE_BASE_IMAGE="%s"' % definition["images"]["base_image"]["name"] in containerfile
    refs = [line for line in containerfile if line.startswith("ARG ANSIBLE_INSTALL_REFS=")]
    assert refs and "ansible-core>=2.19,<2.20" in refs[0] and "ansible-runner>=2.4,<3" in refs[0]
    # the galaxy stage installs requirements.yml from the context; the builder stage merges the
    # requirements of the installed collections; the final stage checks ansible and the runner
    assert "COPY _build /build" in containerfile and "WORKDIR /build" in containerfile
    assert any(line.startswith("RUN ANSIBLE_GALAXY_DISABLE_GPG_VERIFY=1 ansible-galaxy collection "
                               "install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml "
                               '--collections-path "/usr/share/ansible/collections"')
               for line in containerfile), containerfile
    assert any(line.startswith("RUN $PYCMD /output/scripts/introspect.py introspect")
               for line in containerfile)
    assert "RUN /output/scripts/assemble" in containerfile
    assert "RUN /output/scripts/check_ansible $PYCMD" in containerfile
    with open(str(build / "requirements.yml")) as handle:
        galaxy = yaml.safe_load(handle)
    assert galaxy == {"collections": [{"name": "collections/resilient-virt-%s.tar.gz" % _version(),
                                       "type": "file"}]}
    copied = build / "collections" / context["tarball"].name
    assert filecmp.cmp(str(copied), str(context["tarball"]), shallow=False)


def test_the_build_merges_the_collection_ee_requirements(context, installed, tmp_path):
    root = installed / "ansible_collections" / "resilient" / "virt"
    with open(str(root / "MANIFEST.json")) as handle:
        assert yaml.safe_load(handle)["collection_info"]["version"] == _version()
    pip, bindep = tmp_path / "requirements.txt", tmp_path / "bindep.txt"
    _run([sys.executable, str(context["context"] / "_build" / "scripts" / "introspect.py"),
          "introspect", str(installed), "--write-pip=%s" % pip, "--write-bindep=%s" % bindep])
    ee_pip = _lines(os.path.join(ROOT, "meta", "ee-requirements.txt"))
    # the builder leaves out what every image has already (PyYAML comes with ansible-core)
    assert _lines(str(pip)) == [line + ANNOTATION for line in ee_pip
                                if Requirement(line).name.lower() != "pyyaml"]
    assert _lines(str(bindep)) == [line + ANNOTATION
                                   for line in _lines(os.path.join(ROOT, "meta", "ee-bindep.txt"))]


def test_builder_introspect_reports_the_ee_requirements_not_the_test_ones(installed):
    out = _run(["ansible-builder", "introspect", str(installed)]).stdout
    report = yaml.safe_load(out[out.index("---"):])
    names = set(Requirement(line.split("#")[0]).name.lower() for line in report["python"])
    assert names == set(_requirements(os.path.join(ROOT, "meta", "ee-requirements.txt"))) - {"pyyaml"}
    tests_only = set(_requirements(os.path.join(ROOT, "tests", "requirements.txt")))
    assert not names & tests_only, names & tests_only
    system = [line.split("#")[0].strip() for line in report["system"]]
    assert system == _lines(os.path.join(ROOT, "meta", "ee-bindep.txt"))
    assert "libvirt-clients [platform:dpkg]" not in system  # bindep.txt's lab-only entry
