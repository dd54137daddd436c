"""The SSH settings of a libvirt provider, turned into the parameters of the URI it opens.

In an execution environment there is no ssh-agent and no ``~/.ssh``: the private key and the
known hosts come as files (from credentials). libvirt takes them as URI parameters, which its
SSH transports honour differently (libvirt 9.0):

- ``ssh`` runs OpenSSH's ``ssh``: ``keyfile``, ``no_tty`` (never ask for a password),
  ``no_verify`` (accept a host key it has not seen); no parameter names a known-hosts file;
- ``libssh`` and ``libssh2`` speak SSH in the process: ``keyfile``, ``sshauth`` (``privkey``: the
  key only), ``known_hosts`` and ``known_hosts_verify`` (``normal``: a host key that is not
  listed, or differs, fails the connection; ``ignore``: not checked).

So a known-hosts file given with a ``+ssh`` URI moves the connection to the ``libssh``
transport (same user, host, port, path and parameters). Settings given with a URI that is not
SSH are refused; settings from the environment (a credential injects them for every task) are
left out for such a URI. A setting is refused when the URI already has its parameter; the
extra parameters (``no_tty``, ``sshauth``...) the URI already has are kept as they are.
"""
import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error, redact
from ansible_collections.resilient.virt.plugins.module_utils.providers._libvirt.backend import (
    SSH_ENV as ENV)

__all__ = ("ENV", "is_ssh", "ssh_uri", "ssh_problem")

SSH_TRANSPORTS = ("ssh", "libssh", "libssh2")
# setting -> the URI parameters that say the same (a URI that has one as well is refused)
_PARAMETERS = {"ssh_key_file": ("keyfile",), "ssh_known_hosts": ("known_hosts",),
               "ssh_verify_host_key": ("no_verify", "known_hosts_verify")}
_HOST_KEY = ("host key verification failed", "can't verify the session host key",
             "differs from stored identity")
_KEY_REFUSED = ("permission denied (publickey", "access denied for 'publickey'",
                "error while reading private key", "failed to authenticate")


def _transport(uri):
    return urlsplit(uri).scheme.partition("+")[2] or None


def _host(uri):
    """``host[:port]`` of ``uri``: no user name, no password."""
    parts = urlsplit(uri)
    return "%s:%d" % (parts.hostname, parts.port) if parts.port else str(parts.hostname)


def is_ssh(uri):
    """True when ``uri`` names one of libvirt's SSH transports."""
    return _transport(uri) in SSH_TRANSPORTS


def _readable_file(path, where, what):
    """``path`` made absolute (``~`` expanded) once it is a readable file; InvalidSpec naming
    ``where`` otherwise."""
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        raise field_error(where, "%s is not a file; give the path of %s" % (full, what))
    if not os.access(full, os.R_OK):
        raise field_error(where, "%s cannot be read by this user (uid %d); make it readable "
                                 "(mode 0600, owned by the user that runs the task)"
                          % (full, os.getuid()))
    return full


def _check_key(full, where):
    """Refuse a file that does not start like a private key (a public key is a common slip);
    only its first bytes are read, and nothing of them is shown."""
    with open(full, "rb") as handle:
        head = handle.read(64)
    if not head.startswith(b"-----BEGIN ") or b"PRIVATE KEY" not in head:
        raise field_error(where, "%s does not hold an SSH private key in OpenSSH or PEM format "
                                 "(it should start with -----BEGIN OPENSSH PRIVATE KEY-----); "
                                 "give the private key, not the .pub file" % full)


def ssh_uri(uri, config, given, from_env, path):
    """(the URI to open, warnings): ``uri`` with the parameters of the SSH settings in
    ``config``. ``given``: the settings set by the provider dict or the environment (not
    defaults), ``from_env`` those of them the environment set; ``path(key)`` names a setting in
    errors (``provider.<key>`` or its variable)."""
    wanted = [key for key in ENV if key in given]
    if not wanted:
        return uri, []
    transport = _transport(uri)
    if transport not in SSH_TRANSPORTS:
        explicit = [key for key in wanted if key not in from_env]
        if explicit:
            raise field_error(path(explicit[0]), "applies to SSH connections only, and the URI %s "
                              "is not one; use qemu+ssh://user@host/system (or qemu+libssh://), or "
                              "remove %s" % (redact(uri), path(explicit[0])))
        return uri, []
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    present = set(name for name, _value in query)
    for key in wanted:
        clash = sorted(present.intersection(_PARAMETERS[key]))
        if clash:
            raise field_error(path(key), "says what the URI's %s= parameter already says; give "
                              "it in one place: remove %s= from the URI, or leave %s unset"
                              % (clash[0], clash[0], path(key)))
    added, warnings = [], []
    verify = config["ssh_verify_host_key"]
    known_hosts = config.get("ssh_known_hosts") if verify else None
    if known_hosts:
        known_hosts = _readable_file(known_hosts, path("ssh_known_hosts"),
                                     "a known-hosts file listing the host's key")
        if transport == "ssh":
            transport = "libssh"
        added += [("known_hosts", known_hosts), ("known_hosts_verify", "normal")]
    if "ssh_key_file" in config:
        key_file = _readable_file(config["ssh_key_file"], path("ssh_key_file"),
                                  "the SSH private key")
        _check_key(key_file, path("ssh_key_file"))
        added.append(("keyfile", key_file))
        added.append(("no_tty", "1") if transport == "ssh" else ("sshauth", "privkey"))
    if not verify:
        added.append(("no_verify", "1") if transport == "ssh" else ("known_hosts_verify", "ignore"))
        unused = " (%s is not used)" % path("ssh_known_hosts") if config.get("ssh_known_hosts") else ""
        warnings.append("%s is false: the SSH host key of %s is not verified%s, so a man in the "
                        "middle could take the connection; give the host's key in a known-hosts "
                        "file (provider.ssh_known_hosts) instead"
                        % (path("ssh_verify_host_key"), _host(uri), unused))
    added = [(name, value) for name, value in added if name not in present]  # the URI's own win
    scheme = "%s+%s" % (parts.scheme.partition("+")[0], transport)
    return urlunsplit((scheme, parts.netloc, parts.path, urlencode(query + added),
                       parts.fragment)), warnings


def ssh_problem(message, uri, path):
    """What to do about the SSH failure ``message`` says (a host key that is not trusted, a key
    that is refused) when connecting to ``uri``, or None for any other failure."""
    text = message.lower()
    host = _host(uri)
    if any(marker in text for marker in _HOST_KEY):
        parts = urlsplit(uri)
        return ("the SSH host key of %s is not listed in the known-hosts file, or differs from "
                "it: after checking its fingerprint with the host's administrator, add the host's "
                "key (the output of `ssh-keyscan -p %d %s`) to a known-hosts file and give that "
                "file in %s" % (host, parts.port or 22, parts.hostname,
                                _either(path, "ssh_known_hosts")))
    if any(marker in text for marker in _KEY_REFUSED):
        return ("%s refused the SSH key: give the private key whose public key is in the user's "
                "authorized_keys on the host, in %s" % (host, _either(path, "ssh_key_file")))
    return None


def _either(path, key):
    """Where setting ``key`` can be given: the place it came from, else both places."""
    where = path(key)
    return where if where == ENV[key] else "%s or the environment variable %s" % (where, ENV[key])
