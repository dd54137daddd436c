"""The libvirt provider's SSH settings (key file, known hosts, host key verification) become the
URI parameters each libvirt SSH transport honours; mistakes are refused naming the setting.

The expected URIs are written out by hand (libvirt's remote URI documentation); the URI the
provider built is read back with urllib to compare.
"""
import os
import subprocess
from urllib.parse import parse_qs, urlsplit

import pytest

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
    LibvirtProvider)
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.ssh import (
    ssh_problem)

SOCKET = "/srv/lab/hv1/run/libvirt/libvirt-sock"
URI = "qemu+ssh://root@kvm1.example:2222/system?socket=" + SOCKET


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """A private key (made by ssh-keygen), its .pub file and a known-hosts file."""
    where = tmp_path_factory.mktemp("ssh")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "unit", "-f",
                    str(where / "id")], check=True)
    known = where / "known_hosts"
    known.write_text("[kvm1.example]:2222 %s\n" % " ".join(
        (where / "id.pub").read_text().split()[:2]))
    return {"key": str(where / "id"), "pub": str(where / "id.pub"), "known": str(known)}


def opened(provider):
    """(scheme, netloc, path, {parameter: value}) of the URI the provider opens."""
    parts = urlsplit(provider._uri)
    params = parse_qs(parts.query, keep_blank_values=True)
    assert all(len(values) == 1 for values in params.values()), params
    return parts.scheme, parts.netloc, parts.path, dict((k, v[0]) for k, v in params.items())


def test_key_and_known_hosts_move_ssh_to_libssh(keys):
    provider = LibvirtProvider({"uri": URI, "ssh_key_file": keys["key"],
                                "ssh_known_hosts": keys["known"]})
    assert opened(provider) == ("qemu+libssh", "root@kvm1.example:2222", "/system", {
        "socket": SOCKET, "keyfile": keys["key"], "sshauth": "privkey",
        "known_hosts": keys["known"], "known_hosts_verify": "normal"})
    assert provider.warnings == []
    assert provider.key == "libvirt:qemu+ssh://***@kvm1.example:2222/system?socket=" + SOCKET


def test_key_alone_keeps_openssh_and_never_prompts(keys):
    provider = LibvirtProvider({"uri": URI, "ssh_key_file": keys["key"]})
    assert opened(provider) == ("qemu+ssh", "root@kvm1.example:2222", "/system", {
        "socket": SOCKET, "keyfile": keys["key"], "no_tty": "1"})


def test_libssh2_uri_keeps_its_transport(keys):
    uri = "qemu+libssh2://root@kvm1.example/system"
    provider = LibvirtProvider({"uri": uri, "ssh_known_hosts": keys["known"]})
    assert opened(provider) == ("qemu+libssh2", "root@kvm1.example", "/system", {
        "known_hosts": keys["known"], "known_hosts_verify": "normal"})


@pytest.mark.parametrize("uri, scheme, wanted", [
    (URI, "qemu+ssh", {"no_verify": "1"}),
    ("qemu+libssh://root@kvm1.example:2222/system?socket=" + SOCKET, "qemu+libssh",
     {"known_hosts_verify": "ignore"}),
])
def test_verification_off_is_said_in_the_uri_and_warned(uri, scheme, wanted):
    provider = LibvirtProvider({"uri": uri, "ssh_verify_host_key": "no"})
    assert opened(provider)[0] == scheme
    assert opened(provider)[3] == dict({"socket": SOCKET}, **wanted)
    assert len(provider.warnings) == 1
    warning = provider.warnings[0]
    assert warning.startswith("provider.ssh_verify_host_key is false")
    assert "kvm1.example:2222" in warning and "root@" not in warning


def test_verification_off_leaves_the_known_hosts_out_and_says_so(keys):
    provider = LibvirtProvider({"uri": URI, "ssh_verify_host_key": False},
                               environ={"RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS": keys["known"]})
    assert opened(provider)[:2] == ("qemu+ssh", "root@kvm1.example:2222")
    assert opened(provider)[3] == {"socket": SOCKET, "no_verify": "1"}
    assert "(RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS is not used)" in provider.warnings[0]


def test_settings_from_the_environment(keys):
    environ = {"RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE": keys["key"],
               "RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS": keys["known"],
               "LIBVIRT_DEFAULT_URI": URI}
    provider = LibvirtProvider({}, environ=environ)
    assert opened(provider)[0] == "qemu+libssh"
    assert opened(provider)[3]["keyfile"] == keys["key"]
    assert opened(provider)[3]["known_hosts"] == keys["known"]
    off = LibvirtProvider({"uri": URI}, environ={"RESILIENT_VIRT_LIBVIRT_SSH_VERIFY_HOST_KEY": "false"})
    assert opened(off)[3]["no_verify"] == "1"
    assert off.warnings[0].startswith("RESILIENT_VIRT_LIBVIRT_SSH_VERIFY_HOST_KEY is false")


def test_environment_settings_are_left_out_for_a_local_uri(keys):
    environ = {"RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE": keys["key"],
               "RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS": keys["known"]}
    provider = LibvirtProvider({"uri": "qemu+unix:///system?socket=" + SOCKET}, environ=environ)
    assert provider._uri == "qemu+unix:///system?socket=" + SOCKET


def test_a_given_setting_with_a_local_uri_is_refused(keys):
    with pytest.raises(InvalidSpec) as info:
        LibvirtProvider({"uri": "qemu+tcp://admin:Hunter2Secret@kvm1/system",
                         "ssh_key_file": keys["key"]})
    message = info.value.message
    assert message.startswith("provider.ssh_key_file: ")
    assert "qemu+ssh://" in message and "Hunter2Secret" not in message
    assert info.value.details["errors"][0]["path"] == "provider.ssh_key_file"


@pytest.mark.parametrize("setting, parameter", [
    ("ssh_key_file", "keyfile"), ("ssh_known_hosts", "known_hosts"),
    ("ssh_verify_host_key", "no_verify")])
def test_a_setting_the_uri_already_says_is_refused(keys, setting, parameter):
    value = {"ssh_key_file": keys["key"], "ssh_known_hosts": keys["known"],
             "ssh_verify_host_key": False}[setting]
    with pytest.raises(InvalidSpec) as info:
        LibvirtProvider({"uri": "%s&%s=1" % (URI, parameter), setting: value})
    assert info.value.details["errors"][0]["path"] == "provider.%s" % setting
    assert "remove %s= from the URI" % parameter in info.value.message


def test_the_uri_own_extra_parameters_are_kept(keys):
    provider = LibvirtProvider({"uri": URI + "&no_tty=0", "ssh_key_file": keys["key"]})
    assert opened(provider)[3]["no_tty"] == "0"


def test_missing_and_public_key_files_are_refused(keys, tmp_path):
    with pytest.raises(InvalidSpec) as info:
        LibvirtProvider({"uri": URI, "ssh_known_hosts": str(tmp_path / "absent")})
    assert info.value.message.startswith("provider.ssh_known_hosts: %s is not a file"
                                         % (tmp_path / "absent"))
    with pytest.raises(InvalidSpec) as info:
        LibvirtProvider({"uri": URI},
                        environ={"RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE": keys["pub"]})
    assert info.value.message.startswith("RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE: ")
    assert "not the .pub file" in info.value.message


def test_relative_paths_are_made_absolute(keys, monkeypatch):
    monkeypatch.chdir(os.path.dirname(keys["key"]))
    provider = LibvirtProvider({"uri": URI, "ssh_key_file": "id"})
    assert opened(provider)[3]["keyfile"] == keys["key"]


# what libvirt 9.0 said when connecting through sshd (see tests/integration/test_libvirt_ssh.py)
@pytest.mark.parametrize("message, fix", [
    ("Cannot recv data: Host key verification failed.: Connection reset by peer", "known"),
    ("libssh transport error: No user interaction callback provided: Can't verify the session "
     "host key", "known"),
    ("authentication failed: !!! SSH HOST KEY VERIFICATION FAILED !!!: Identity of host "
     "'h:22' differs from stored identity.", "known"),
    ("libssh transport error: failed to authenticate: Access denied for 'publickey'. "
     "Authentication that can continue: publickey", "key"),
    ("Cannot recv data: root@h: Permission denied (publickey).: Connection reset by peer", "key"),
    ("libssh transport error: Remote command terminated with non-zero code: 1", None),
])
def test_ssh_failures_name_their_fix(message, fix):
    def path(key):
        return "provider.%s" % key

    said = ssh_problem(message, "qemu+ssh://root:pw12345@kvm1.example:2222/system", path)
    if fix is None:
        assert said is None
        return
    assert "kvm1.example:2222" in said and "pw12345" not in said
    if fix == "known":
        assert "`ssh-keyscan -p 2222 kvm1.example`" in said
        assert "provider.ssh_known_hosts or the environment variable " \
               "RESILIENT_VIRT_LIBVIRT_KNOWN_HOSTS" in said
    else:
        assert "provider.ssh_key_file or the environment variable " \
               "RESILIENT_VIRT_LIBVIRT_SSH_KEY_FILE" in said
