"""The AWX credential types of extensions/awx/credential_types, for real.

Each type's injectors are rendered the way AWX renders them (``awx_injection.inject``, a
stand-in: AWX cannot run here) and the resulting environment is given to real ansible-playbook
runs, with ``-vvv``, whose tasks name no provider and no state store:

- the vSphere type against a vSphere simulator of the test's own serving HTTPS with a certificate
  of the lab CA (the CA goes through the type's file injector, certificates stay verified);
- the Proxmox VE type, with an API token and with a user and password, against a Proxmox VE
  simulator of the test's own (fakepve), its CA through the file injector;
- the state store type (a Redis ACL user whose password needs percent-encoding) with the lab's
  libvirt hypervisor hv1 named by LIBVIRT_DEFAULT_URI;
- an AWX job (AWX_HOST, JOB_ID) without a state store is warned once per task;
- a secret the environment holds is masked on both task paths (worker and module process);
- the inventory source reads the same variables.

What reached the providers and the store is checked from the outside (the simulator's VMs and
hosts, the Redis server's keys); no secret may appear anywhere in the output. The playbook that
registers the types runs against a FAKE awx.awx collection (tests/fixtures/fake_awx) that records
what it would send to AWX.
"""
import glob
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.resilient.virt.plugins.module_utils._masking import is_secret_key

from awx_injection import CREDENTIAL_TYPES, inject, load_credential_type
from own_simulator import BIN_DIR, vcsim
from playbook_runner import play, run_playbook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKE_AWX = os.path.join(ROOT, "tests", "fixtures", "fake_awx")
REGISTER = os.path.join(ROOT, "extensions", "awx", "register_credential_types.yml")
STORE_WARNING = "thrown away after every job"
ACL_PASSWORD = "Acl:p@ss/w0rd&more"  # ':', '@', '/' and '&' all need percent-encoding in a URL
AWX_JOB = {"AWX_HOST": "https://awx.example.com", "JOB_ID": "4242", "INVENTORY_ID": "7"}
PROVIDER_VARIABLES = ("VMWARE_HOST", "VMWARE_USER", "VMWARE_PASSWORD", "VMWARE_PORT",
                      "VMWARE_VALIDATE_CERTS", "VMWARE_CA_PATH", "LIBVIRT_DEFAULT_URI",
                      "PROXMOX_HOST", "PROXMOX_PORT", "PROXMOX_USER", "PROXMOX_PASSWORD",
                      "PROXMOX_TOKEN_ID", "PROXMOX_TOKEN_SECRET", "PROXMOX_VALIDATE_CERTS",
                      "PROXMOX_CA_PATH", "RESILIENT_VIRT_STATE_STORE")


def _files():
    return sorted(glob.glob(os.path.join(CREDENTIAL_TYPES, "*.yml")))


def _clean_environment(**extra):
    """The environment of a run: none of the variables a credential injects, unless given."""
    env = dict((name, "") for name in PROVIDER_VARIABLES)
    env.update(extra)
    return env


def _warnings(task):
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in task.get("warnings", [])]


# -- the files ---------------------------------------------------------------------------------
@pytest.mark.parametrize("path", _files(), ids=os.path.basename)
def test_every_credential_type_has_the_shape_awx_takes(path):
    from jinja2 import meta
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    with open(path) as handle:
        credential_type = yaml.safe_load(handle)
    assert set(credential_type) == {"name", "description", "kind", "inputs", "injectors"}
    assert credential_type["kind"] == "cloud"
    fields = credential_type["inputs"]["fields"]
    ids = [field["id"] for field in fields]
    assert len(ids) == len(set(ids))
    for field in fields:
        assert field["type"] in ("string", "boolean") and field.get("label"), field
        # what holds a password or a key is a secret field (AWX encrypts it and hides it), by
        # the names the collection masks (an API token's id is not a secret)
        if is_secret_key(field["id"]):
            assert field.get("secret") is True, field
    assert set(credential_type["inputs"].get("required", [])) <= set(ids)
    injectors = credential_type["injectors"]
    assert set(injectors) <= {"env", "file", "extra_vars"} and injectors.get("env")
    assert all(label == "template" or label.startswith("template.") for label in injectors.get("file", {}))
    jinja = ImmutableSandboxedEnvironment()
    for name, template in list(injectors["env"].items()) + list(injectors.get("file", {}).items()):
        assert not name.startswith("ANSIBLE_"), "AWX reserves ANSIBLE_ variables"
        used = meta.find_undeclared_variables(jinja.parse(template))
        assert used <= set(ids) | {"tower"}, "%s uses %s" % (name, sorted(used - set(ids)))


def test_credential_type_names_are_unique():
    names = [load_credential_type(os.path.basename(path)[:-4])["name"] for path in _files()]
    assert len(names) == len(set(names)) and {"resilient.virt vSphere", "resilient.virt state store"} <= set(names)


def test_what_the_types_inject_with_only_their_required_inputs(tmp_path):
    inputs = {"host": "vc.example.com", "username": "awx", "password": "Vc-S3cret"}
    vsphere = inject(load_credential_type("vsphere"), inputs, str(tmp_path / "vc"))
    # unset stays empty (the collection's defaults apply) and certificates stay verified
    assert vsphere == {"VMWARE_HOST": "vc.example.com", "VMWARE_PORT": "", "VMWARE_USER": "awx",
                       "VMWARE_PASSWORD": "Vc-S3cret", "VMWARE_VALIDATE_CERTS": "true", "VMWARE_CA_PATH": ""}
    proxmox = inject(load_credential_type("proxmox"), {"host": "pve1.example.com"}, str(tmp_path / "p"))
    assert proxmox == {"PROXMOX_HOST": "pve1.example.com", "PROXMOX_PORT": "", "PROXMOX_TOKEN_ID": "",
                       "PROXMOX_TOKEN_SECRET": "", "PROXMOX_USER": "", "PROXMOX_PASSWORD": "",
                       "PROXMOX_VALIDATE_CERTS": "true", "PROXMOX_CA_PATH": ""}
    store = inject(load_credential_type("state_store"), {"url": "redis://cache:6379/0"}, str(tmp_path / "s"))
    assert store == {"RESILIENT_VIRT_STATE_STORE": "redis://cache:6379/0"}
    store = inject(load_credential_type("state_store"), {
        "url": "redis+sentinel://s1:26379,s2:26379/main/0", "password": "a/b", "sentinel_password": "c@d",
        "ca_certificate": "PEM"}, str(tmp_path / "t"))
    ca_file = store["RESILIENT_VIRT_STATE_STORE"].rsplit("ssl_ca_certs=", 1)[1]
    assert store["RESILIENT_VIRT_STATE_STORE"] == (
        "redis+sentinel://:a%2Fb@s1:26379,s2:26379/main/0?sentinel_password=c%40d&ssl_ca_certs=" + ca_file)
    with open(ca_file) as handle:
        assert handle.read() == "PEM"


def test_the_register_playbook_registers_every_file_as_it_is(tmp_path):
    record = tmp_path / "registered.jsonl"
    env = dict(os.environ, FAKE_AWX_RECORD=str(record),
               ANSIBLE_COLLECTIONS_PATH=FAKE_AWX + os.pathsep + os.environ["ANSIBLE_COLLECTIONS_PATH"])
    check = subprocess.run(["ansible-playbook", "--syntax-check", REGISTER], env=env, capture_output=True,
                           text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    run = subprocess.run(["ansible-playbook", "-e", "ansible_python_interpreter=" + sys.executable, REGISTER],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    with open(record) as handle:
        registered = [json.loads(line) for line in handle]
    expected = []
    for path in _files():
        with open(path) as handle:
            expected.append(dict(yaml.safe_load(handle), state="present"))
    # the injector templates reach AWX unrendered: {{ host }} stays {{ host }}
    assert registered == expected


# -- vSphere -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ca_sim(tmp_path_factory):
    """A simulator of the test's own, HTTPS with a certificate of its lab CA: (run_dir, settings)."""
    run_dir = str(tmp_path_factory.mktemp("vcsim-awx"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, tls="ca", vms=1)
    yield run_dir, settings
    vcsim.stop(run_dir)


@pytest.mark.parametrize("in_process", ["true", "false"], ids=["worker", "module"])
def test_the_vsphere_credential_type_reaches_the_simulator(ca_sim, tmp_path, in_process):
    _run_dir, settings = ca_sim
    with open(settings["ca_path"]) as handle:
        ca_pem = handle.read()
    injected = inject(load_credential_type("vsphere"), {
        "host": settings["host"], "port": str(settings["port"]), "username": settings["username"],
        "password": settings["password"], "validate_certs": "true", "ca_certificate": ca_pem},
        str(tmp_path / "job"))
    assert injected["VMWARE_CA_PATH"].startswith(str(tmp_path / "job" / "env"))
    env = _clean_environment(RESILIENT_VIRT_IN_PROCESS=in_process, **injected)
    tasks = [{"name": "validate", "resilient.virt.provider": {"state": "validated"}},
             {"name": "list", "resilient.virt.vm_info": {}}]
    store = "sqlite:///%s" % (tmp_path / "state.db")
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": store})], env=env,
                       args=["-vvv"])
    assert run.rc == 0, run.describe()
    validated, listed = run.task("validate"), run.task("list")
    key = "vsphere:%s:%d" % (settings["host"], settings["port"])  # the endpoint the credential named
    assert validated["provider"]["key"] == key and validated["available"] is True, validated
    assert listed["vms"] and all(vm["provider_key"] == key for vm in listed["vms"]), listed
    # certificates verified: no warning that they are not, nor that the session is plain http
    assert not [w for w in _warnings(validated) if "not verified" in w or "not encrypted" in w]
    assert settings["password"] not in run.output


def test_a_wrong_port_from_the_credential_names_the_variable(tmp_path):
    injected = inject(load_credential_type("vsphere"), {
        "host": "vc.example.com", "port": "sdk", "username": "awx", "password": "Not-Used-S3cret"},
        str(tmp_path / "job"))
    run = run_playbook(tmp_path, [play([{"name": "validate", "resilient.virt.provider": {"state": "validated"},
                                         "ignore_errors": True}])],
                       env=_clean_environment(**injected), args=["-vvv"])
    task = run.task("validate")
    assert task.failed and task["error"]["type"] == "InvalidSpec", task
    assert [e["path"] for e in task["error"]["details"]["errors"]] == ["VMWARE_PORT"]
    assert "Not-Used-S3cret" not in run.output and "Traceback" not in run.output


@pytest.mark.parametrize("in_process", ["true", "false"], ids=["worker", "module"])
def test_a_secret_the_credential_injects_is_masked_on_both_task_paths(lab, tmp_path, in_process):
    """The password reaches the task only through the environment; a task that happens to
    print it (here as the name it looks for, echoed back in ``invocation``) shows it masked."""
    secret = "Injected-S3cret-pw"
    env = _clean_environment(LIBVIRT_DEFAULT_URI=lab.hypervisor("hv1").uri, VMWARE_PASSWORD=secret,
                             RESILIENT_VIRT_IN_PROCESS=in_process,
                             RESILIENT_VIRT_STATE_STORE="sqlite:///%s" % (tmp_path / "state.db"))
    run = run_playbook(tmp_path, [play([{"name": "list", "resilient.virt.vm_info": {"name": secret}}])],
                       env=env, args=["-vvv"])
    assert run.rc == 0, run.describe()
    assert run.task("list")["invocation"]["module_args"]["name"] != secret
    assert secret not in run.output


# -- Proxmox VE --------------------------------------------------------------------------------
@pytest.mark.parametrize("in_process", ["true", "false"], ids=["worker", "module"])
@pytest.mark.parametrize("login", ["token", "password"])
def test_the_proxmox_credential_type_reaches_the_simulator(simulated_pve, tmp_path, in_process, login):
    sim = simulated_pve
    with open(sim.ca_path) as handle:
        ca = handle.read()
    inputs = {"host": sim.provider["host"], "port": str(sim.provider["port"]), "ca_certificate": ca}
    if login == "token":
        inputs.update(token_id=sim.token_provider["token_id"], token_secret=sim.token_secret)
    else:
        inputs.update(username="root@pam", password=sim.password)
    injected = inject(load_credential_type("proxmox"), inputs, str(tmp_path / "job"))
    assert injected["PROXMOX_CA_PATH"].startswith(str(tmp_path / "job" / "env"))
    env = _clean_environment(RESILIENT_VIRT_IN_PROCESS=in_process, **injected)
    tasks = [{"name": "validate", "resilient.virt.provider": {"state": "validated"}},
             {"name": "list", "resilient.virt.vm_info": {}}]
    store = "sqlite:///%s" % (tmp_path / "state.db")
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": store})], env=env,
                       args=["-vvv"])
    assert run.rc == 0, run.describe()
    validated, listed = run.task("validate"), run.task("list")
    key = "proxmox:%s:%d" % (sim.provider["host"], sim.provider["port"])
    assert validated["provider"]["key"] == key and validated["available"] is True, validated
    assert [vm["name"] for vm in listed["vms"]] == ["tpl"], listed
    assert not [w for w in _warnings(validated) if "not verified" in w]
    assert sim.password not in run.output and sim.token_secret not in run.output


# -- the state store, with the lab's libvirt ---------------------------------------------------
@pytest.fixture
def acl_redis(start_redis):
    """A redis-server with an ACL user ``awx`` whose password needs percent-encoding."""
    return start_redis(extra_args=["--user", "awx", "on", ">" + ACL_PASSWORD, "~*", "&*", "+@all"])


def test_the_state_store_credential_type_shares_the_breakers_through_redis(lab, acl_redis, tmp_path):
    uri = lab.hypervisor("hv1").uri
    injected = inject(load_credential_type("state_store"), {
        "url": "redis://127.0.0.1:%d/0" % acl_redis.port, "username": "awx", "password": ACL_PASSWORD},
        str(tmp_path / "job"))
    env = _clean_environment(LIBVIRT_DEFAULT_URI=uri, HOME=str(tmp_path), **dict(AWX_JOB, **injected))
    tasks = [{"name": "list", "resilient.virt.vm_info": {}},
             {"name": "breakers", "resilient.virt.circuit_breaker": {}}]
    run = run_playbook(tmp_path, [play(tasks)], env=env, args=["-vvv"])
    assert run.rc == 0, run.describe()
    listed = run.task("list")
    key = listed["resilience"] and next(iter(listed["resilience"]))
    assert key and key.startswith("libvirt:qemu+unix:///system?socket=") and "hv1" in key, listed
    # the breaker lives in the Redis server (read from it directly), not in a SQLite file
    assert key in acl_redis.keys_and_values()
    assert not os.path.exists(tmp_path / ".ansible" / "resilient_virt" / "state.db")
    assert not [w for task in run.tasks for w in _warnings(task) if STORE_WARNING in w]
    for secret in (ACL_PASSWORD, "Acl%3Ap%40ss%2Fw0rd%26more"):
        assert secret not in run.output


def test_an_awx_job_without_a_state_store_is_warned_once_per_task(lab, tmp_path):
    env = _clean_environment(LIBVIRT_DEFAULT_URI=lab.hypervisor("hv1").uri, HOME=str(tmp_path), **AWX_JOB)
    tasks = [{"name": "list", "resilient.virt.vm_info": {}},
             {"name": "validate", "resilient.virt.provider": {"state": "validated"}}]
    run = run_playbook(tmp_path, [play(tasks)], env=env)
    assert run.rc == 0, run.describe()
    for name in ("list", "validate"):
        found = [w for w in _warnings(run.task(name)) if STORE_WARNING in w]
        assert len(found) == 1 and "AWX_HOST and JOB_ID" in found[0], run.task(name)


# -- the inventory source ----------------------------------------------------------------------
def test_an_inventory_source_without_providers_uses_the_credential(ca_sim, tmp_path):
    """AWX runs the source (a project file) with the credential's variables, as for a job."""
    from inventory_runner import run_inventory

    _run_dir, settings = ca_sim
    with open(settings["ca_path"]) as handle:
        ca_pem = handle.read()
    injected = inject(load_credential_type("vsphere"), {
        "host": settings["host"], "port": str(settings["port"]), "username": settings["username"],
        "password": settings["password"], "ca_certificate": ca_pem}, str(tmp_path / "job"))
    store = "sqlite:///%s" % (tmp_path / "state.db")
    run = run_inventory(tmp_path, {"include_vms": True}, env=_clean_environment(
        RESILIENT_VIRT_STATE_STORE=store, **injected))
    assert run.rc == 0, run
    hypervisors = run.hosts("hypervisors")
    assert hypervisors and all(run.hostvars[h]["resilient_virt_provider"] == "vsphere" for h in hypervisors), run
    assert run.hosts("vms"), run
    assert settings["password"] not in run.output


def test_an_inventory_entry_takes_what_it_leaves_unset_from_the_environment(lab, tmp_path):
    from inventory_runner import run_inventory

    hv1 = lab.hypervisor("hv1")
    store = "sqlite:///%s" % (tmp_path / "state.db")
    run = run_inventory(tmp_path, {"providers": {"kvm": {"type": "libvirt"}}}, env=_clean_environment(
        LIBVIRT_DEFAULT_URI=hv1.uri, RESILIENT_VIRT_STATE_STORE=store))
    assert run.rc == 0, run
    (host,) = run.hosts("hypervisors")
    assert run.hostvars[host]["resilient_virt_provider_key"] == "libvirt:kvm", run
    assert run.hostvars[host]["resilient_virt_name"] == "kvm"


def test_an_inventory_source_without_providers_or_credential_says_what_to_do(tmp_path):
    from inventory_runner import run_inventory

    run = run_inventory(tmp_path, {}, env=_clean_environment(
        RESILIENT_VIRT_STATE_STORE="sqlite:///%s" % (tmp_path / "state.db")))
    assert run.rc != 0
    assert "providers" in run.output and "VMWARE_HOST" in run.output and "LIBVIRT_DEFAULT_URI" in run.output
    assert "Traceback" not in run.output
