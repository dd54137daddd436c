"""Build, start, stop and describe the lab's vSphere API simulator (standard library only).

The simulator is ``lab/vcsim/main.go`` built against the Debian packages ``golang-go`` and
``golang-github-vmware-govmomi-dev`` in GOPATH mode (offline), with govmomi's ``simulator``
package taken from a copy patched by ``lab/vcsim/*.patch`` (where it crashes on the property
reads of community.vmware's modules; see :func:`build`). Everything lives under
``<run_dir>/vcsim/``: the binary (``bin/``, rebuilt only when ``main.go`` or a patch changes),
the pid file, the log, the service URL and a generated password (``password``, mode 0600).

The simulator serves the vSphere SOAP API (``/sdk``) and the vSphere Automation REST API with
tagging (``/rest``) on 127.0.0.1 only. By default (``tls="ca"``) it serves HTTPS with a server
certificate signed by a lab CA, as a vCenter behind a private CA: the provider settings say
``protocol: https``, keep ``validate_certs`` on and name the CA in ``ca_path``.
The CA (``tls/ca.pem``; its key ``tls/ca.key``, mode 0600) is made with the ``openssl`` command
once per run directory (again only when it expires within a day), so ``ca_path`` stays valid
across restarts; the server certificate is made at each start for ``tls_names`` (default
127.0.0.1 and localhost). ``start(..., tls=True)`` serves HTTPS with a self-signed certificate
instead (the settings then say ``validate_certs: false``), and ``start(..., tls=False)`` plain
HTTP (``protocol: http``), for tests of what plain HTTP means.

Functions for the lab: ``start(run_dir) -> provider dict``, ``stop(run_dir)``,
``status(run_dir)``, ``pause``/``resume`` (SIGSTOP/SIGCONT: a provider that hangs), and
``set_host_connection(settings, host, state)`` (a host that stops responding to its vCenter,
its VMs disconnected, and comes back: ``/lab/host-connection`` of ``main.go``).
Command line: ``python3 lab/vcsim.py up|down|status|pause|resume|build [--run-dir DIR]
[--port N] [--tls ca|self-signed|off]``; it prints the status as JSON with the password masked.
"""
import argparse
import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from runstate import process_state, read_text, write_private  # lab/runstate.py

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.join(HERE, "vcsim")
DEFAULT_RUN_DIR = os.path.join(HERE, "run")
GOCODE = "/usr/share/gocode"
GOVMOMI = "src/github.com/vmware/govmomi"  # in a GOPATH directory
PATCHED_PACKAGE = "simulator"  # the govmomi package the patches apply to
HOST = "127.0.0.1"
TLS_NAMES = ("127.0.0.1", "localhost")
CERT_DAYS = 30
USERNAME = "lab"
NAME = "vcsim"
# Keyword arguments of start() -> flags of the simulator.
MODEL_FLAGS = {"datacenters": "-dc", "clusters": "-cluster", "hosts_per_cluster": "-host",
               "vms": "-vm", "datastores": "-ds", "delay_ms": "-delay",
               "method_delay": "-method-delay", "tls": "-tls", "rest": "-rest"}
TLS_MODES = {"ca": "ca", "self-signed": True, "off": False}  # --tls of the command line


def _paths(run_dir, bin_dir=None):
    base = os.path.join(os.path.abspath(run_dir or DEFAULT_RUN_DIR), "vcsim")
    bin_dir = os.path.abspath(bin_dir) if bin_dir else os.path.join(base, "bin")
    return {
        "base": base,
        "bin_dir": bin_dir,
        "bin": os.path.join(bin_dir, "vcsim"),
        "stamp": os.path.join(bin_dir, "source.sha256"),
        "gopath": os.path.join(bin_dir, "gopath"),
        "tmp": os.path.join(base, "tmp"),
        "pid": os.path.join(base, "vcsim.pid"),
        "log": os.path.join(base, "vcsim.log"),
        "url": os.path.join(base, "url"),
        "password": os.path.join(base, "password"),
        "lock": os.path.join(base, "lock"),
        "tls": os.path.join(base, "tls"),
        "trust": os.path.join(base, "trust"),
    }


def _mkdirs(paths):
    for key in ("base", "bin_dir", "tmp"):
        os.makedirs(paths[key], mode=0o700, exist_ok=True)


@contextlib.contextmanager
def _locked(path):
    """Hold an exclusive lock on file ``path`` (serialises start/stop and builds)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _patches():
    """The patch files of govmomi's simulator package, in the order they apply."""
    return sorted(os.path.join(SOURCE_DIR, name) for name in os.listdir(SOURCE_DIR)
                  if name.endswith(".patch"))


def _source_digest():
    """The digest of what the binary is built from: ``main.go`` and the patches."""
    digest = hashlib.sha256()
    for path in [os.path.join(SOURCE_DIR, n) for n in sorted(os.listdir(SOURCE_DIR)) if n.endswith(".go")] + _patches():
        with open(path, "rb") as handle:
            digest.update(os.path.basename(path).encode() + b"\0" + handle.read() + b"\0")
    return digest.hexdigest()


def build(run_dir=None, bin_dir=None):
    """Build the simulator unless the cached binary matches ``main.go`` and the patches; return
    its path.

    The binary is cached in ``bin_dir`` (default ``<run_dir>/vcsim/bin``). It is built with
    govmomi from a GOPATH directory of its own (``<bin_dir>/gopath``, made again at each build)
    whose govmomi entries are symbolic links to Debian's, except the ``simulator`` package: a
    copy with ``lab/vcsim/*.patch`` applied (``patch -p1`` in the package). Debian's files are
    never changed.
    """
    paths = _paths(run_dir, bin_dir)
    _mkdirs(paths)
    with _locked(os.path.join(paths["bin_dir"], "build.lock")):
        return _build(paths)


def _build(paths):
    digest = _source_digest()
    if os.path.exists(paths["bin"]) and read_text(paths["stamp"]) == digest:
        return paths["bin"]
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the Go compiler is missing: apt-get install golang-go "
                           "golang-github-vmware-govmomi-dev")
    _patched_gopath(paths["gopath"])
    env = dict(os.environ, GOPATH=paths["gopath"] + os.pathsep + GOCODE, GO111MODULE="off",
               GOFLAGS="")
    partial = paths["bin"] + ".partial"
    proc = subprocess.run([go, "build", "-o", partial, "."], cwd=SOURCE_DIR, env=env, check=False,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError("building the simulator failed (is golang-github-vmware-govmomi-dev "
                           "installed?):\n" + proc.stdout)
    os.replace(partial, paths["bin"])
    write_private(paths["stamp"], digest + "\n")
    return paths["bin"]


def _patched_gopath(gopath):
    """Make ``gopath`` a GOPATH directory of govmomi with the simulator package patched."""
    source = os.path.join(GOCODE, GOVMOMI)
    if not os.path.isdir(os.path.join(source, PATCHED_PACKAGE)):
        raise RuntimeError("govmomi's simulator package is missing from %s: apt-get install "
                           "golang-github-vmware-govmomi-dev" % source)
    patch = shutil.which("patch")
    if patch is None:
        raise RuntimeError("the patch command is missing: apt-get install patch")
    shutil.rmtree(gopath, ignore_errors=True)
    target = os.path.join(gopath, GOVMOMI)
    os.makedirs(target, mode=0o700)
    for name in os.listdir(source):
        if name != PATCHED_PACKAGE:
            os.symlink(os.path.join(source, name), os.path.join(target, name))
    package = os.path.join(target, PATCHED_PACKAGE)
    shutil.copytree(os.path.join(source, PATCHED_PACKAGE), package, symlinks=True)
    for path in _patches():
        proc = subprocess.run([patch, "-p1", "--batch", "--forward", "--fuzz=0",
                               "--no-backup-if-mismatch", "-i", path], cwd=package, check=False,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise RuntimeError("%s does not apply to govmomi's simulator package in %s (another "
                               "govmomi version?):\n%s"
                               % (os.path.basename(path), source, proc.stdout))


def _password(paths):
    """The lab password: generated once, kept in a 0600 file."""
    password = read_text(paths["password"])
    if not password:
        password = secrets.token_urlsafe(18)
        write_private(paths["password"], password + "\n")
    return password


def _alive(pid, binary):
    """True if ``pid`` runs ``binary`` and is not a zombie (pids get reused)."""
    try:
        exe = os.readlink("/proc/%d/exe" % pid)
    except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
        return False
    exe = os.path.realpath(exe.replace(" (deleted)", ""))
    return process_state(pid) not in (None, "Z") and exe == os.path.realpath(binary)


def _reap(pid):
    """Collect ``pid`` if it is our child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _running(paths):
    """(pid, binary) of the running simulator from the pid file, or (None, None)."""
    lines = (read_text(paths["pid"]) or "").splitlines()
    if len(lines) != 2 or not lines[0].isdigit():
        return None, None
    pid, binary = int(lines[0]), lines[1]
    _reap(pid)
    return (pid, binary) if _alive(pid, binary) else (None, None)


def _port(url):
    return int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


def _answers(url, timeout=2.0):
    """True when the SOAP endpoint answers HTTP (any status but 5xx) at ``url``."""
    import ssl

    unverified = ssl._create_unverified_context()  # self-signed, or of the lab CA: only a probe
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}),  # never via a proxy
                                         urllib.request.HTTPSHandler(context=unverified))
    try:
        with direct.open(url + "/vimServiceVersions.xml", timeout=timeout) as response:
            return response.status < 500
    except urllib.error.HTTPError as err:
        return err.code < 500
    except OSError:
        return False


def _openssl(args):
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the openssl command is missing: apt-get install openssl")
    proc = subprocess.run([openssl] + args, check=False, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError("openssl %s failed:\n%s" % (args[0], proc.stdout))


def _valid_a_day(cert):
    """True when the certificate file ``cert`` exists and is valid for a day more."""
    return os.path.exists(cert) and subprocess.run(
        [shutil.which("openssl") or "openssl", "x509", "-noout", "-checkend", "86400", "-in", cert],
        check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def _is_address(name):
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _new_key_args(key_file):
    return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key_file,
            "-days", str(CERT_DAYS)]


def lab_certificate(run_dir, out_dir, names=TLS_NAMES):
    """Make the lab CA of ``run_dir`` (once) and a server certificate it signs for ``names`` in
    ``out_dir``; return (CA file, certificate file, key file). Every simulator of the lab
    serves a certificate of this one CA."""
    return _certificates(_paths(run_dir), names, out_dir)


def _certificates(paths, names, out_dir=None):
    """Make the lab CA (once) and a server certificate it signs for ``names`` (IP addresses
    or DNS names) in ``out_dir`` (default: beside the CA); return (CA file, certificate file,
    key file)."""
    out_dir = out_dir or paths["tls"]
    for directory in (paths["tls"], out_dir):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    ca, ca_key = os.path.join(paths["tls"], "ca.pem"), os.path.join(paths["tls"], "ca.key")
    cert, key = os.path.join(out_dir, "server.pem"), os.path.join(out_dir, "server.key")
    if not (os.path.exists(ca_key) and _valid_a_day(ca)):
        _openssl(["req", "-x509", "-subj", "/CN=resilient.virt lab CA"] + _new_key_args(ca_key + ".new")
                 + ["-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", ca + ".new"])
        os.replace(ca_key + ".new", ca_key)
        os.replace(ca + ".new", ca)
    alt = ",".join(("IP:%s" if _is_address(name) else "DNS:%s") % name for name in names)
    _openssl(["req", "-x509", "-subj", "/CN=%s" % names[0], "-CA", ca, "-CAkey", ca_key]
             + _new_key_args(key) + ["-addext", "subjectAltName=" + alt,
                                     "-addext", "basicConstraints=critical,CA:FALSE",
                                     "-addext", "keyUsage=critical,digitalSignature",
                                     "-addext", "extendedKeyUsage=serverAuth", "-out", cert])
    return ca, cert, key


def _settings(paths, url):
    settings = {"type": "vsphere", "name": NAME, "host": HOST, "port": _port(url),
                "protocol": url.split("://", 1)[0], "username": USERNAME,
                "password": _password(paths)}
    trust = read_text(paths["trust"])
    if settings["protocol"] == "https" and trust:  # tls="ca": verified with the lab CA
        settings["ca_path"] = trust
    elif settings["protocol"] == "https":  # tls=True: a self-signed certificate
        settings["validate_certs"] = False
    return settings


def _mode(paths, url):
    """What the simulator at ``url`` serves, as start()'s ``tls``: "ca", True or False."""
    if not url.startswith("https://"):
        return False
    return "ca" if read_text(paths["trust"]) else True


def _log_tail(paths, lines=20):
    text = read_text(paths["log"]) or ""
    return "\n".join(text.splitlines()[-lines:])


def _launch(paths, port, flags, timeout):
    """Start the binary on ``port``; return its URL, or None if it exited early."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths["url"])
    env = dict(os.environ, VCSIM_PASSWORD=_password(paths), TMPDIR=paths["tmp"])
    argv = [paths["bin"], "-listen", "%s:%d" % (HOST, port), "-url-file", paths["url"],
            "-username", USERNAME] + flags
    log_fd = os.open(paths["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=log_fd,
                                stderr=log_fd, start_new_session=True, close_fds=True)
    finally:
        os.close(log_fd)
    write_private(paths["pid"], "%d\n%s\n" % (proc.pid, paths["bin"]))
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return None
        url = read_text(paths["url"])
        if url and _answers(url):
            return url
        time.sleep(0.05)
    _terminate(proc.pid, paths["bin"], 5.0)
    raise RuntimeError("the simulator did not answer within %gs; log %s:\n%s"
                       % (timeout, paths["log"], _log_tail(paths)))


def start(run_dir=None, port=None, timeout=60.0, bin_dir=None, tls="ca", **model):
    """Start the simulator (building it if needed) and return its provider settings.

    Idempotent: a running simulator is reused as it is when it serves what ``tls`` asks for,
    else it is restarted. ``port`` None reuses the previous port when it is free (so provider
    settings survive a restart), else any free port.
    ``bin_dir`` shares one cached binary between run directories (see :func:`build`).
    ``tls``: ``"ca"`` (the default) is HTTPS with a certificate of the lab CA for ``tls_names``
    (the settings then name the CA in ``ca_path``), True HTTPS with a self-signed certificate
    (the settings then say ``validate_certs: false``), False plain HTTP.
    ``model`` may set datacenters, clusters, hosts_per_cluster, vms, datastores, delay_ms,
    method_delay (``"ReconfigVM_Task=3000"``: SOAP methods slowed by milliseconds) and rest
    (False: no REST API, as an ESXi host).
    """
    paths = _paths(run_dir, bin_dir)
    tls_names = tuple(model.pop("tls_names", None) or TLS_NAMES)
    if tls not in (False, True, "ca"):
        raise ValueError("tls must be \"ca\" (lab CA), True (self-signed) or False (plain "
                         "HTTP), not %r" % (tls,))
    if tls_names != TLS_NAMES and tls != "ca":
        raise ValueError("tls_names needs tls=\"ca\" (the names of the lab CA's certificate)")
    unknown = sorted(set(model) - set(MODEL_FLAGS))
    if unknown:
        raise TypeError("unknown simulator option(s) %s; known: %s"
                        % (", ".join(unknown), ", ".join(sorted(MODEL_FLAGS))))
    _mkdirs(paths)
    with _locked(paths["lock"]):
        url = read_text(paths["url"])
        pid, binary = _running(paths)
        if pid and url and _answers(url):
            if _mode(paths, url) == tls:
                return _settings(paths, url)
            _terminate(pid, binary, 10.0)  # serves another protocol or trust: restart it
        build(run_dir, bin_dir)
        flags = []
        with contextlib.suppress(FileNotFoundError):
            os.unlink(paths["trust"])
        if tls == "ca":
            ca, cert, key = _certificates(paths, tls_names)
            flags += ["-tls-cert", cert, "-tls-key", key]
            write_private(paths["trust"], ca + "\n")
        else:
            model["tls"] = tls
        for key, value in sorted(model.items()):
            if isinstance(value, bool):
                flags.append("%s=%s" % (MODEL_FLAGS[key], "true" if value else "false"))
            elif isinstance(value, str):
                flags += [MODEL_FLAGS[key], value]
            elif value is not None:
                flags += [MODEL_FLAGS[key], str(int(value))]
        tries = [port] if port is not None else ([_port(url), 0] if url else [0])
        for candidate in tries:
            url = _launch(paths, candidate, flags, timeout)
            if url:
                return _settings(paths, url)
        raise RuntimeError("the simulator exited at start; log %s:\n%s"
                           % (paths["log"], _log_tail(paths)))


def _terminate(pid, binary, timeout):
    if not _alive(pid, binary):
        return
    os.kill(pid, signal.SIGCONT)  # a paused process cannot handle SIGTERM
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        _reap(pid)
        if not _alive(pid, binary):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.05)
    _reap(pid)


def stop(run_dir=None, timeout=10.0):
    """Stop the simulator (SIGTERM, then SIGKILL after ``timeout``); True if one was running."""
    paths = _paths(run_dir)
    _mkdirs(paths)
    with _locked(paths["lock"]):
        pid, binary = _running(paths)
        if pid is not None:
            _terminate(pid, binary, timeout)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(paths["pid"])
        return pid is not None


def _signal(run_dir, sig):
    pid, _binary = _running(_paths(run_dir))
    if pid is None:
        raise RuntimeError("the simulator is not running (start it with: vcsim.py up)")
    os.kill(pid, sig)
    return pid


def _thread_states(pid):
    """The state letter of every thread of ``pid`` (R, S, T...)."""
    states = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with contextlib.suppress(FileNotFoundError, IndexError), \
                open("/proc/%d/task/%s/stat" % (pid, tid)) as handle:
            states.append(handle.read().rsplit(")", 1)[1].split()[0])
    return states


def pause(run_dir=None, timeout=5.0):
    """Freeze the simulator (SIGSTOP): connections are accepted but never answered. Returns once
    every thread has stopped (SIGSTOP is delivered asynchronously: a thread still running could
    answer one more request)."""
    pid = _signal(run_dir, signal.SIGSTOP)
    end = time.monotonic() + timeout
    while not all(state in ("T", "t") for state in _thread_states(pid)):
        if time.monotonic() > end:
            raise RuntimeError("the simulator (pid %s) did not stop on SIGSTOP within %gs"
                               % (pid, timeout))
        time.sleep(0.01)


def resume(run_dir=None):
    """Thaw a paused simulator (SIGCONT)."""
    _signal(run_dir, signal.SIGCONT)


def set_host_connection(settings, host, state):
    """Set the ``runtime.connectionState`` of the simulated host named ``host`` (``connected``,
    ``disconnected`` or ``notResponding``) through the simulator of ``settings`` (as
    :func:`start` returns them). Its VMs read ``disconnected`` while it is not connected, their
    power state the last one known, and may then be unregistered (lab-only: see ``main.go``)."""
    import base64
    import ssl
    import urllib.parse

    if settings["protocol"] == "https" and settings.get("ca_path"):
        context = ssl.create_default_context(cafile=settings["ca_path"])
    else:
        context = ssl._create_unverified_context()  # plain HTTP, or self-signed: a lab call
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))
    token = base64.b64encode(("%s:%s" % (settings["username"], settings["password"])).encode())
    request = urllib.request.Request(
        "%s://%s:%s/lab/host-connection" % (settings["protocol"], settings["host"], settings["port"]),
        data=urllib.parse.urlencode({"host": host, "state": state}).encode(),
        headers={"Authorization": "Basic " + token.decode()}, method="POST")
    with opener.open(request, timeout=10) as response:
        return response.status


def status(run_dir=None):
    """Describe the simulator: running, pid, url, log path and provider settings (or None)."""
    paths = _paths(run_dir)
    pid, _binary = _running(paths)
    url = read_text(paths["url"]) if pid else None
    return {"running": pid is not None, "pid": pid, "url": url, "log": paths["log"],
            "provider": _settings(paths, url) if url else None}


def _masked(info, run_dir):
    """``info`` for printing: the password replaced by the path of the file holding it."""
    provider = info.get("provider")
    if provider:
        info = dict(info, provider=dict(provider, password="***"),
                    password_file=_paths(run_dir)["password"])
    return info


def main(argv=None):
    parser = argparse.ArgumentParser(description="vSphere API simulator of the local lab")
    parser.add_argument("action", choices=["up", "down", "status", "pause", "resume", "build"])
    parser.add_argument("--run-dir", default=DEFAULT_RUN_DIR)
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--tls", choices=sorted(TLS_MODES), default="ca",
                        help="ca: HTTPS with a certificate of the lab CA (default); self-signed: "
                        "HTTPS with a self-signed certificate; off: plain HTTP")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except RuntimeError as exc:
        print("vcsim.py %s: %s" % (args.action, exc), file=sys.stderr)
        return 1


def _run(args):
    if args.action == "build":
        started = time.monotonic()
        path = build(args.run_dir)
        print(json.dumps({"binary": path, "seconds": round(time.monotonic() - started, 2)}))
        return 0
    if args.action == "up":
        start(args.run_dir, port=args.port, tls=TLS_MODES[args.tls])
    elif args.action == "down":
        stop(args.run_dir)
    elif args.action == "pause":
        pause(args.run_dir)
    elif args.action == "resume":
        resume(args.run_dir)
    print(json.dumps(_masked(status(args.run_dir), args.run_dir), indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
