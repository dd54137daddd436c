"""libvirt over SSH as an execution environment does it: no ssh-agent and no ``~/.ssh``, the key
and the known hosts given as files (provider settings, or the environment variables an AWX
credential injects).

The test starts a real OpenSSH server (``/usr/sbin/sshd -D``) on a free loopback port, with a
host key and an authorised client key it makes with ssh-keygen (root login by key only, no
passwords). Through it, libvirt reaches the lab hypervisor hv1: the URI's ``socket=`` names hv1's
socket and ``proxy=netcat`` makes the remote side run ``nc -U`` on it (libvirt's own
virt-ssh-helper would open the default socket instead). The oracles are the test's own: a domain
the test defines on hv1 over its Unix socket, and the server's log, which records each key it
accepted (compared with ssh-keygen's fingerprint of the client key).
"""
import os
import shutil
import socket
import subprocess
import time
import uuid
from urllib.parse import urlencode

import pytest
import yaml

from playbook_runner import play, run_playbook

SSHD = "/usr/sbin/sshd"
CREDENTIAL_TYPE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "extensions", "awx", "credential_types", "libvirt.yml")


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _keygen(path, comment):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path],
                   check=True)
    with open(path + ".pub") as handle:
        return " ".join(handle.read().split()[:2])  # type and key, without the comment


class SshServer:
    """An sshd on 127.0.0.1:``port``; ``accepted()`` lists the key fingerprints it accepted."""

    def __init__(self, where):
        if os.geteuid() != 0:
            pytest.fail("this test runs sshd with root logins: run it as root (make test does)")
        self.dir = where
        self.port = _free_port()
        self.host_key = _keygen(os.path.join(where, "host_key"), "test-host")
        self.key_file = os.path.join(where, "client_key")
        client = _keygen(self.key_file, "test-client")
        self.fingerprint = subprocess.run(["ssh-keygen", "-l", "-f", self.key_file + ".pub"],
                                          capture_output=True, text=True, check=True).stdout.split()[1]
        with open(os.path.join(where, "authorized_keys"), "w") as handle:
            handle.write(client + "\n")
        self.known_hosts = self.write_known_hosts("known_hosts", "[127.0.0.1]:%d" % self.port,
                                                  self.host_key)
        config = os.path.join(where, "sshd_config")
        with open(config, "w") as handle:
            handle.write("\n".join([
                "Port %d" % self.port, "ListenAddress 127.0.0.1",
                "HostKey %s" % os.path.join(where, "host_key"),
                "AuthorizedKeysFile %s" % os.path.join(where, "authorized_keys"),
                "PermitRootLogin prohibit-password", "PubkeyAuthentication yes",
                "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
                "StrictModes no",  # the files live under /tmp, which is world-writable
                "PidFile none", "LogLevel VERBOSE", ""]))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        self.log = os.path.join(where, "sshd.log")
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", config], stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while "Server listening on" not in self.read_log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail("sshd did not start: %s" % self.read_log())
            time.sleep(0.05)

    def write_known_hosts(self, name, host, key):
        path = os.path.join(self.dir, name)
        with open(path, "w") as handle:
            handle.write("%s %s\n" % (host, key))
        return path

    def read_log(self):
        with open(self.log) as handle:
            return handle.read()

    def accepted(self):
        return [line.split()[-1] for line in self.read_log().splitlines()
                if "Accepted publickey for root from 127.0.0.1" in line]

    def private_key_lines(self):
        """The lines of the private key's body: none of them may ever be shown."""
        with open(self.key_file) as handle:
            return [line.strip() for line in handle if len(line.strip()) > 20
                    and not line.startswith("-----")]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if not (os.path.exists(SSHD) and shutil.which("ssh-keygen") and shutil.which("nc")):
        pytest.fail("needs openssh-server, openssh-client and netcat (lab/install-deps.sh installs them)")
    server = SshServer(str(tmp_path_factory.mktemp("sshd")))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def hv1_domain(lab, domain_xml):
    """A domain the test defines on hv1 over its Unix socket (not through the collection)."""
    import libvirt

    name = "ssh-%s" % uuid.uuid4().hex[:8]
    conn = libvirt.open(lab.hypervisor("hv1").uri)
    dom = conn.defineXML(domain_xml(name))
    try:
        yield name, dom.UUIDString()
    finally:
        dom.undefine()
        conn.close()


def _uri(sshd, lab):
    query = urlencode({"socket": lab.hypervisor("hv1").socket, "proxy": "netcat"})
    return "qemu+ssh://root@127.0.0.1:%d/system?%s" % (sshd.port, query)


def _store(tmp_path):
    return {"RESILIENT_VIRT_STATE_STORE": "sqlite:///%s" % (tmp_path / "state.db")}


def _assert_no_key(sshd, run):
    for output in (run.output, run.document):  # the document: results the JSON callback wrote
        assert "Traceback" not in output
        for line in sshd.private_key_lines():
            assert line not in output, "a line of the private key is shown"


def test_vm_info_over_ssh_with_the_key_and_known_hosts_as_settings(sshd, lab, hv1_domain, tmp_path):
    name, dom_uuid = hv1_domain
    provider = {"type": "libvirt", "name": "hv1-ssh", "uri": _uri(sshd, lab),
                "ssh_key_file": sshd.key_file, "ssh_known_hosts": sshd.known_hosts}
    before = len(sshd.accepted())
    tasks = [{"name": "list", "resilient.virt.vm_info": {"provider": provider, "name": name}},
             {"name": "validate", "resilient.virt.provider": {"provider": provider,
                                                              "list_hypervisors": False}}]
    run = run_playbook(tmp_path, [play(tasks)], env=_store(tmp_path), args=("-vvv",))
    assert run.rc == 0, run
    (vm,) = run.task("list")["vms"]
    assert (vm["name"], vm["uuid"], vm["state"]) == (name, dom_uuid, "stopped")
    info = run.task("validate")["provider"]["info"]
    assert info["uri"].startswith("qemu+libssh://")  # the transport that honours known_hosts
    assert run.task("validate")["available"] is True
    assert sshd.accepted()[before:] and set(sshd.accepted()[before:]) == {sshd.fingerprint}
    _assert_no_key(sshd, run)


def awx_injection(credential_type, inputs, private_data_dir):
    """A stand-in for AWX's injection of a custom credential (CredentialType.inject_credential):
    the ``file`` templates rendered into files (mode 0600) of ``private_data_dir``/env, named to
    the other templates as ``tower.filename.<name>``, then the ``env`` templates rendered, all in
    Jinja's immutable sandbox; an ssh_private_key field gets the final newline AWX adds."""
    from types import SimpleNamespace

    from jinja2.sandbox import ImmutableSandboxedEnvironment

    namespace = dict(inputs)
    for field in credential_type["inputs"]["fields"]:
        if field.get("format") == "ssh_private_key" and not namespace[field["id"]].endswith("\n"):
            namespace[field["id"]] += "\n"
    jinja = ImmutableSandboxedEnvironment()
    files = {}
    os.makedirs(os.path.join(private_data_dir, "env"), exist_ok=True)
    for label, template in credential_type["injectors"].get("file", {}).items():
        path = os.path.join(private_data_dir, "env", "tmp" + uuid.uuid4().hex[:8])
        with open(path, "w") as handle:
            handle.write(jinja.from_string(template).render(**namespace))
        os.chmod(path, 0o600)
        files[label.split(".", 1)[1]] = path
    namespace["tower"] = SimpleNamespace(filename=SimpleNamespace(**files))
    return dict((name, jinja.from_string(template).render(**namespace))
                for name, template in credential_type["injectors"]["env"].items())


def test_vm_info_over_ssh_with_what_the_awx_credential_type_injects(sshd, lab, hv1_domain, tmp_path):
    """No provider in the task: the URI, the key and the known hosts all come from the
    environment that the libvirt credential type (extensions/awx/credential_types/libvirt.yml)
    injects, rendered as AWX renders it."""
    name, dom_uuid = hv1_domain
    with open(CREDENTIAL_TYPE) as handle:
        credential_type = yaml.safe_load(handle)
    with open(sshd.key_file) as handle:
        key = handle.read().rstrip("\n")  # pasted without its final newline
    with open(sshd.known_hosts) as handle:
        known_hosts = handle.read().rstrip("\n")
    injected = awx_injection(credential_type, {"uri": _uri(sshd, lab), "ssh_private_key": key,
                                               "known_hosts": known_hosts}, str(tmp_path / "job"))
    assert sorted(injected) == ["LIBVIRT_DEFAULT_URI", "RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS",
                                "RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE"]
    env = dict(_store(tmp_path), **injected)
    for in_process in ("true", "false"):  # in Ansible's worker, then as a module process
        before = len(sshd.accepted())
        run = run_playbook(tmp_path, [play([{"name": "list", "resilient.virt.vm_info": {"name": name}}])],
                           env=dict(env, RESILIENT_VIRT_IN_PROCESS=in_process), args=("-vvv",))
        assert run.rc == 0, run
        (vm,) = run.task("list")["vms"]
        assert (vm["name"], vm["uuid"]) == (name, dom_uuid)
        assert set(sshd.accepted()[before:]) == {sshd.fingerprint}
        _assert_no_key(sshd, run)


def test_a_host_key_the_known_hosts_do_not_vouch_for_fails_naming_the_fix(sshd, lab, tmp_path):
    other = _keygen(os.path.join(str(tmp_path), "other_host_key"), "other")
    unlisted = sshd.write_known_hosts("unlisted", "[127.0.0.1]:%d" % (sshd.port + 1), sshd.host_key)
    changed = sshd.write_known_hosts("changed", "[127.0.0.1]:%d" % sshd.port, other)
    uri = _uri(sshd, lab)
    before = len(sshd.accepted())
    tasks = [
        {"name": "unlisted", "ignore_errors": True, "resilient.virt.vm_info": {"provider": {
            "type": "libvirt", "uri": uri, "ssh_key_file": sshd.key_file,
            "ssh_known_hosts": unlisted}}},
        {"name": "changed", "ignore_errors": True, "resilient.virt.vm_info": {}},
    ]
    env = dict(_store(tmp_path), LIBVIRT_DEFAULT_URI=uri,
               RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE=sshd.key_file,
               RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS=changed)
    # what the default callback shows, and the JSON callback's document (written to a file)
    run = run_playbook(tmp_path, [play(tasks)], env=env, args=("-vvv",), name="refused",
                       shown_with="default")
    _assert_no_key(sshd, run)
    for output in (run.output, run.document):
        assert "ssh-keyscan -p %d 127.0.0.1" % sshd.port in output
    for task, where in (("unlisted", "provider.ssh_known_hosts or the environment variable "
                                     "RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS"),
                        ("changed", "RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS")):
        result = run.task(task)
        assert result.failed
        error = result["error"]
        assert error["type"] == "Unauthorized" and error["retryable"] is False, error
        assert "127.0.0.1:%d" % sshd.port in result["msg"]
        assert "ssh-keyscan -p %d 127.0.0.1" % sshd.port in result["msg"], result
        assert where in result["msg"], result
    assert sshd.accepted()[before:] == []  # refused before the key was offered


def test_a_refused_key_and_a_missing_socket_are_told_apart(sshd, lab, tmp_path):
    stranger = os.path.join(str(tmp_path), "stranger_key")
    _keygen(stranger, "stranger")
    uri = _uri(sshd, lab)
    gone = "qemu+ssh://root@127.0.0.1:%d/system?%s" % (sshd.port, urlencode(
        {"socket": os.path.join(str(tmp_path), "no-such-sock"), "proxy": "netcat"}))
    settings = {"type": "libvirt", "ssh_known_hosts": sshd.known_hosts}
    tasks = [
        {"name": "refused", "ignore_errors": True, "resilient.virt.vm_info": {
            "provider": dict(settings, uri=uri, ssh_key_file=stranger)}},
        {"name": "gone", "ignore_errors": True, "resilient.virt.vm_info": {
            "provider": dict(settings, uri=gone, ssh_key_file=sshd.key_file),
            "resilience": {"max_attempts": 2, "base_delay": 0.1}}},
    ]
    run = run_playbook(tmp_path, [play(tasks)], env=_store(tmp_path), args=("-vvv",))
    _assert_no_key(sshd, run)
    refused = run.task("refused")
    assert refused.failed and refused["error"]["type"] == "Unauthorized", refused
    assert "127.0.0.1:%d refused the SSH key" % sshd.port in refused["msg"]
    assert "provider.ssh_key_file or the environment variable RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE" \
        in refused["msg"]
    gone_result = run.task("gone")
    assert gone_result.failed and gone_result["error"]["type"] == "Unavailable", gone_result
    assert gone_result["error"]["details"]["attempts"] == 2  # retried: the host may come back
