#!/usr/bin/env python
"""Local lab of real libvirt hypervisors: virtlogd + libvirtd pairs in private mount namespaces.

Every hypervisor ``hvN`` lives in ``<run-dir>/hvN`` with its own ``run``, ``etc``, ``lib``, ``log``
and ``cache`` directories, bind-mounted over ``/run``, ``/etc/libvirt``, ``/var/lib/libvirt``,
``/var/log/libvirt`` and ``/var/cache/libvirt`` inside a private mount namespace. From outside it
answers at ``qemu+unix:///system?socket=<run-dir>/hvN/run/libvirt/libvirt-sock``. Each has the
storage pools of :data:`POOLS` (directory pools, active and autostarted), among them ``shared``:
``<run-dir>/shared``, mounted at :data:`SHARED_TARGET` in every hypervisor, the lab's shared
storage (a disk there has the same path everywhere, so its VM can run on any hypervisor).

Use it from Python (``Lab(run_dir).up(3)``) or from the command line (``lab.py up``).
Needs root and the Debian packages that ``lab/install-deps.sh`` installs.
"""
import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
import zlib

import pvesim  # lab/pvesim.py and lab/vcsim.py: this directory is on sys.path for the script
import vcsim  # and for its importers
from runstate import process_state  # lab/runstate.py

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_RUN_DIR = os.path.join(REPO_ROOT, "lab", "run")
RUN_DIR_ENV = "RESILIENT_VIRT_LAB_DIR"
DEFAULT_COUNT = 3
AZ_COUNT = 2
CPU_ALLOCATION_RATIO = 8  # lab hypervisors share this machine's few cores; guests are tiny
# QEMU in TCG: /dev/kvm may exist on such a machine without QEMU being able to use it, so the lab
# chooses emulation itself rather than take the kvm its hypervisors' capabilities may offer
DOMAIN_TYPE = "qemu"
UP_TIMEOUT = 120.0
KILL_GRACE = 5.0
DAEMON_GRACE = 10.0  # seconds for a just-started daemon to write its pid file
SOCKET_PATH_MAX = 107
NAME_RE = re.compile(r"^hv([1-9][0-9]*)$")
COMMANDS = ("unshare", "nsenter", "mount", "virtlogd", "libvirtd", "qemu-system-x86_64")
# (host path bound over inside the namespace, sub-directory of the hypervisor dir)
MOUNTS = (
    ("/run", "run"),
    ("/etc/libvirt", "etc"),
    ("/var/lib/libvirt", "lib"),
    ("/var/log/libvirt", "log"),
    ("/var/cache/libvirt", "cache"),
)
# Settings written into the hypervisor's copy of /etc/libvirt (file -> key -> value).
CONF_SETTINGS = {
    "qemu.conf": {
        "user": '"root"',
        "group": '"root"',
        "dynamic_ownership": "0",
        "remember_owner": "0",
        "security_driver": '"none"',
    },
    "libvirtd.conf": {"log_outputs": '"3:file:/var/log/libvirt/libvirtd.log"'},
    "virtlogd.conf": {"log_outputs": '"3:file:/var/log/libvirt/virtlogd.log"'},
}
# Incoming migration ports (first, end, ports per hypervisor). The lab's hypervisors share this
# machine's network: with libvirt's one default range they would all hand QEMU the same ports,
# and migrations into several hypervisors (of one lab, or of labs side by side) race for them
# (QEMU: "Failed to find an available port"). Each takes a range of its own, chosen from its
# lab's directory and its number, below the kernel's ephemeral ports (32768 and up).
MIGRATION_PORTS = (10240, 32768, 64)
# Directory pools of every hypervisor (name, target inside its namespace): ``default`` as on a
# normal host, ``backups`` where the libvirt backend stores backups (provider.backup_pool),
# ``shared`` on the lab's shared storage (SHARED_TARGET).
SHARED_TARGET = "/var/lib/libvirt/shared"
POOLS = (("default", "/var/lib/libvirt/images"), ("backups", "/var/lib/libvirt/backups"),
         ("shared", SHARED_TARGET))
HVINIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hvinit.py")
# Mount the private directories and the lab's shared storage (the same directory at the same path
# in every hypervisor, as NFS or a cluster filesystem gives a real fleet), then hand over to
# hvinit.py, which starts virtlogd and libvirtd.
NEW_NAMESPACE_SCRIPT = (
    "set -e\n"
    'mount --bind "$1" /run\n'
    'mount --bind "$2" /etc/libvirt\n'
    'mount --bind "$3" /var/lib/libvirt\n'
    'mount --bind "$4" /var/log/libvirt\n'
    'mount --bind "$5" /var/cache/libvirt\n'
    'mkdir -p "$6"\n'
    'mount --bind "$7" "$6"\n'
    "mkdir -p /run/libvirt\n"
    'exec "$8" "$9"\n'
)


class LabError(Exception):
    """A lab operation failed; the message says what to do about it."""


# ---------------------------------------------------------------- processes

def _alive(pid):
    """True if ``pid`` exists and is not a zombie."""
    return process_state(pid) not in (None, "Z")


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def _same_file(a, b):
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _wait_gone(pids, timeout):
    """Wait until none of ``pids`` is alive; return the ones still alive after ``timeout``."""
    end = time.monotonic() + timeout
    while True:
        left = [p for p in pids if _alive(p)]
        if not left or time.monotonic() >= end:
            return left
        time.sleep(0.05)


def _signal(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _probe(uri, timeout):
    """Open ``uri``, call getVersion() within ``timeout`` s; None if it answered, else why not."""
    import libvirt  # only the probes need libvirt-python

    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # no libvirt chatter on stderr
    outcome = {}

    def call():
        try:
            conn = libvirt.open(uri)
            try:
                conn.getVersion()
            finally:
                conn.close()
            outcome["error"] = None
        except libvirt.libvirtError as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(timeout)
    return outcome.get("error", "no answer within %.0f s" % timeout)


# ---------------------------------------------------------------- one hypervisor

class Hypervisor:
    """Paths, configuration and processes of one lab hypervisor ``hvN``."""

    def __init__(self, run_dir, name):
        match = NAME_RE.match(name)
        if not match:
            raise LabError("bad hypervisor name %r: expected hv1, hv2, ..." % name)
        self.name = name
        self.index = int(match.group(1))
        self.dir = os.path.join(run_dir, name)
        self.shared = os.path.join(run_dir, "shared")  # at SHARED_TARGET in every hypervisor
        self.az = "az%d" % ((self.index - 1) % AZ_COUNT + 1)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    @property
    def socket(self):
        return self.path("run", "libvirt", "libvirt-sock")

    @property
    def uri(self):
        return "qemu+unix:///system?socket=" + self.socket

    def pid_file(self, daemon):
        return self.path("run", daemon + ".pid")

    def log_file(self, what):
        """Log of ``libvirtd``, ``virtlogd`` or ``start`` (output of the start commands)."""
        return self.path("log", what + ".log")

    def describe(self):
        """The hypervisor's entry in lab.json."""
        return {
            "name": self.name,
            "az": self.az,
            "uri": self.uri,
            "socket": self.socket,
            "dir": self.dir,
            "shared": self.shared,
            "pid_files": {d: self.pid_file(d) for d in ("libvirtd", "virtlogd", "hvinit")},
            "logs": {
                "libvirtd": self.log_file("libvirtd"),
                "virtlogd": self.log_file("virtlogd"),
                "start": self.log_file("start"),
                "qemu": self.path("log", "qemu"),
            },
        }

    # -- processes

    def in_namespace(self, pid):
        """True if ``pid`` runs in a mount namespace where /run is this hypervisor's run dir."""
        return _same_file("/proc/%d/root/run" % pid, self.path("run"))

    def daemon_pid(self, daemon):
        """PID of the live ``daemon`` (libvirtd|virtlogd|hvinit) of this hypervisor, or None.

        The pid file is trusted only if the process has that name, is not a zombie and runs in
        this hypervisor's namespace (so a stale file or a reused PID is never signalled).
        """
        try:
            with open(self.pid_file(daemon)) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return None
        if _comm(pid) != daemon or not _alive(pid) or not self.in_namespace(pid):
            return None
        return pid

    def processes(self):
        """PIDs of every live process in this hypervisor's namespace (daemons and QEMU)."""
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                pid = int(entry)
                if pid != os.getpid() and _alive(pid) and self.in_namespace(pid):
                    found.append(pid)
        return found

    def qemu_pids(self):
        return [p for p in self.processes() if (_comm(p) or "").startswith("qemu-system")]

    def qemu_pid(self, name):
        """The pid of the QEMU process that runs domain ``name``, or None."""
        for pid in self.qemu_pids():
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as handle:
                    words = handle.read().split(b"\0")
            except OSError:
                continue
            if any(w.split(b",", 1)[0] == b"guest=" + name.encode() for w in words):
                return pid
        return None

    def state(self):
        """``running``, ``frozen`` (libvirtd stopped by SIGSTOP) or ``stopped``."""
        pid = self.daemon_pid("libvirtd")
        if pid is None:
            return "stopped"
        return "frozen" if process_state(pid) in ("T", "t") else "running"

    # -- setup and start

    def prepare(self):
        """Create the private directories and this hypervisor's configuration (idempotent)."""
        if len(self.socket) > SOCKET_PATH_MAX:
            raise LabError(
                "socket path %s is %d characters, above the %d that Unix sockets allow: "
                "choose a shorter --run-dir" % (self.socket, len(self.socket), SOCKET_PATH_MAX))
        for _mount_point, sub in MOUNTS:
            os.makedirs(self.path(sub), exist_ok=True)
        os.makedirs(self.path("log", "qemu"), exist_ok=True)
        etc = self.path("etc")
        if not os.path.exists(os.path.join(etc, "qemu.conf")):
            # configuration files only: no domain, network or hook definitions of the host
            for entry in os.listdir("/etc/libvirt"):
                src = os.path.join("/etc/libvirt", entry)
                if os.path.isfile(src):
                    shutil.copy2(src, etc)
        for filename, settings in CONF_SETTINGS.items():
            _set_conf(os.path.join(etc, filename), settings)
        _set_conf(os.path.join(etc, "qemu.conf"), self.migration_ports())

    def migration_ports(self):
        """qemu.conf's incoming migration port range of this hypervisor (MIGRATION_PORTS)."""
        first, end, size = MIGRATION_PORTS
        run_dir = os.path.dirname(os.path.abspath(self.dir))  # one lab's hypervisors: neighbours
        slot = (zlib.crc32(run_dir.encode()) + self.index) % ((end - first) // size)
        low = first + slot * size
        return {"migration_port_min": str(low), "migration_port_max": str(low + size - 1)}

    def launch(self):
        """Start whichever of virtlogd/libvirtd is not running; return the daemons started.

        A new namespace (mounts + hvinit) when none of the hypervisor's processes lives;
        otherwise hvinit is asked (SIGUSR1) to start the missing daemons.
        """
        pids = {d: self.daemon_pid(d) for d in ("virtlogd", "libvirtd")}
        missing = [d for d, pid in pids.items() if pid is None]
        if not missing:
            return []
        self.prepare()
        init = self.daemon_pid("hvinit")
        if init is not None:
            _signal([init], signal.SIGUSR1)
            return missing
        holder = pids["libvirtd"] or pids["virtlogd"]
        if holder is None:
            _clear_dir(self.path("run"))  # like /run after a reboot: no stale sockets or pids
            os.makedirs(self.shared, exist_ok=True)
            args = [self.path(sub) for mount_point, sub in MOUNTS] + [
                SHARED_TARGET, self.shared, sys.executable, HVINIT]
            cmds = [["unshare", "-m", "--propagation", "private",
                     "sh", "-c", NEW_NAMESPACE_SCRIPT, "sh"] + args]
        else:  # hvinit was killed but a daemon lives on: start the other one in its namespace
            cmds = [["nsenter", "-t", str(holder), "-m", "--", d, "-d"] for d in missing]
        with open(self.log_file("start"), "a") as log:
            now = time.strftime("%Y-%m-%dT%H:%M:%S")
            log.write("--- %s starting %s\n" % (now, ", ".join(missing)))
            log.flush()
            for cmd in cmds:
                try:
                    rc = subprocess.call(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd="/", timeout=UP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    rc = "timeout"
                if rc != 0:
                    raise LabError("%s: %s did not start (%s exited with %s); read %s and %s"
                                   % (self.name, " and ".join(missing), cmd[0], rc,
                                      self.log_file("start"), self.log_file("libvirtd")))
        return missing

    def wait_ready(self, deadline):
        """Wait until libvirtd answers (open + getVersion) or raise LabError naming the log."""
        began = time.monotonic()
        last = "no answer yet"
        while time.monotonic() < deadline:
            if self.daemon_pid("libvirtd") is None:
                last = "libvirtd is not running"
                if time.monotonic() - began > DAEMON_GRACE:
                    break
            elif not os.path.exists(self.socket):
                last = "socket %s not created" % self.socket
            else:
                last = _probe(self.uri, deadline - time.monotonic())
                if last is None:
                    return
            time.sleep(0.1)
        raise LabError("%s did not answer at %s (%s); read %s and %s"
                       % (self.name, self.uri, last, self.log_file("libvirtd"),
                          self.log_file("start")))

    def shared_mounted(self):
        """True when libvirtd's namespace has the lab's shared storage at SHARED_TARGET."""
        pid = self.daemon_pid("libvirtd")
        try:
            with open("/proc/%d/mountinfo" % pid) as handle:
                return any(line.split()[4] == SHARED_TARGET for line in handle)
        except (OSError, TypeError):
            return False

    def ensure_pools(self):
        """Define, build, start and autostart the pools of :data:`POOLS` that need it
        (idempotent: a pool already active and autostarted is left alone)."""
        import libvirt

        if not self.shared_mounted():
            raise LabError("%s has no shared storage at %s: it was started by an older lab.py; "
                           "restart it (lab.py down, then lab.py up)" % (self.name, SHARED_TARGET))

        libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
        try:
            conn = libvirt.open(self.uri)
            try:
                for name, target in POOLS:
                    try:
                        pool = conn.storagePoolLookupByName(name)
                    except libvirt.libvirtError as exc:
                        if exc.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_POOL:
                            raise
                        pool = conn.storagePoolDefineXML(_pool_xml(name, target), 0)
                    if not pool.isActive():
                        pool.build(0)  # makes the directory when missing
                        pool.create(0)
                    if not pool.autostart():
                        pool.setAutostart(1)
            finally:
                conn.close()
        except libvirt.libvirtError as exc:
            raise LabError("%s: storage pools %s not ready (%s); read %s"
                           % (self.name, ", ".join(n for n, _t in POOLS), exc,
                              self.log_file("libvirtd"))) from exc


def _pool_xml(name, target):
    pool = ET.Element("pool", type="dir")
    ET.SubElement(pool, "name").text = name
    ET.SubElement(ET.SubElement(pool, "target"), "path").text = target
    return ET.tostring(pool, encoding="unicode")


def _set_conf(path, settings):
    """Set ``key = value`` lines in a libvirt config file, dropping other settings of those keys."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    key_re = re.compile(r"^\s*(%s)\s*=" % "|".join(map(re.escape, settings)))
    kept = [line for line in lines if not key_re.match(line)]
    kept += ["%s = %s" % item for item in settings.items()]
    text = "\n".join(kept) + "\n"
    if text != "\n".join(lines) + "\n":
        with open(path, "w") as f:
            f.write(text)


def _clear_dir(path):
    for entry in os.listdir(path):
        full = os.path.join(path, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        else:
            os.unlink(full)


# ---------------------------------------------------------------- inventory

def _yaml_lines(mapping, indent=0):
    """Block-style YAML for nested dicts; scalars as JSON strings/numbers (valid YAML)."""
    lines = []
    pad = "  " * indent
    for key, value in mapping.items():
        if isinstance(value, dict) and value:
            lines.append("%s%s:" % (pad, key))
            lines.extend(_yaml_lines(value, indent + 1))
        else:
            lines.append("%s%s: %s" % (pad, key, json.dumps(value)))
    return lines


def provider_config(hv):
    """The ``provider`` dict modules take for this hypervisor."""
    return {"type": "libvirt", "name": hv.name, "uri": hv.uri, "az": hv.az,
            "cpu_allocation_ratio": CPU_ALLOCATION_RATIO, "domain_type": DOMAIN_TYPE}


def inventory(hypervisors, run_dir, python=None, vsphere=None, proxmox=None):
    """Ansible inventory (as a dict): one local host per hypervisor, AZ groups, provider vars.

    ``vsphere`` and ``proxmox``, the simulators' provider dicts, join
    ``resilient_virt_providers`` when given.
    """
    python = python or sys.executable
    hosts = {}
    azs = {}
    for hv in hypervisors:
        hosts[hv.name] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": python,
            "resilient_virt_provider": provider_config(hv),
            "resilient_virt_az": hv.az,
        }
        azs.setdefault(hv.az, {"hosts": {}})["hosts"][hv.name] = {}
    children = {"hypervisors": {"hosts": hosts}}
    children.update(sorted(azs.items()))
    providers = {hv.name: provider_config(hv) for hv in hypervisors}
    for simulator in (vsphere, proxmox):
        if simulator:
            providers[simulator["name"]] = simulator
    return {"all": {
        "vars": {
            "resilient_virt_lab_dir": run_dir,
            "resilient_virt_providers": providers,
        },
        "children": children,
    }}


def inventory_source(hypervisors, simulators=()):
    """A resilient.virt.hypervisors inventory source (as a dict) for the lab's providers, VMs
    included. ``simulators``: (provider dict, file of its password) pairs; each password is read
    from its file by a lookup, so the source holds no secret."""
    providers = {hv.name: provider_config(hv) for hv in hypervisors}
    for settings, password_file in simulators:
        providers[settings["name"]] = dict(
            settings, password="{{ lookup('ansible.builtin.file', '%s') }}" % password_file)
    return {"plugin": "resilient.virt.hypervisors", "providers": providers,
            "include_vms": True, "timeout": "10s"}


def _write(path, text):
    """Replace ``path`` atomically; mode 0600 (the inventory holds the simulator's password)."""
    tmp = path + ".tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(text)
    os.replace(tmp, path)


# ---------------------------------------------------------------- the lab

class Lab:
    """All hypervisors under one run directory."""

    def __init__(self, run_dir=None):
        self.run_dir = os.path.abspath(run_dir or os.environ.get(RUN_DIR_ENV) or DEFAULT_RUN_DIR)
        self.state_file = os.path.join(self.run_dir, "lab.json")
        self.inventory_file = os.path.join(self.run_dir, "inventory.yml")
        self.source_file = os.path.join(self.run_dir, "lab.hypervisors.yml")

    @contextlib.contextmanager
    def _locked(self):
        """Serialise up/down/start/stop of this run dir across processes (e.g. pytest workers)."""
        os.makedirs(self.run_dir, mode=0o700, exist_ok=True)
        with open(os.path.join(self.run_dir, ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def hypervisor(self, name):
        hv = Hypervisor(self.run_dir, name)
        if not os.path.isdir(hv.dir):
            raise LabError("unknown hypervisor %r in %s: the lab has %s (run `lab.py up`)"
                           % (name, self.run_dir, ", ".join(self.names()) or "none"))
        return hv

    def names(self):
        """Names of the hypervisors that have a directory in the run dir, in order."""
        if not os.path.isdir(self.run_dir):
            return []
        found = [e for e in os.listdir(self.run_dir) if NAME_RE.match(e)
                 and os.path.isdir(os.path.join(self.run_dir, e))]
        return sorted(found, key=lambda n: int(n[2:]))

    def up(self, count=DEFAULT_COUNT, timeout=UP_TIMEOUT, vsphere=True, proxmox=True):
        """Bring hv1..hv<count> up and answering, with their storage pools, and the simulators
        (vSphere, and a three-node Proxmox VE cluster) unless told not to; return the names of
        the hypervisors it had to start.

        Running hypervisors and simulators are left alone (a frozen one is thawed; missing
        pools are made). Writes lab.json, inventory.yml and lab.hypervisors.yml (an inventory
        source of the providers). Raises LabError naming the hypervisor and its log if one does
        not answer.
        """
        if count < 1:
            raise LabError("--count must be at least 1, got %d" % count)
        _check_host()
        with self._locked():
            return self._up(count, timeout, vsphere, proxmox)

    def _up(self, count, timeout, vsphere, proxmox):
        for mount_point, _sub in MOUNTS:
            os.makedirs(mount_point, exist_ok=True)  # bind targets (normally made by the packages)
        wanted = [Hypervisor(self.run_dir, "hv%d" % i) for i in range(1, count + 1)]
        started, errors = [], {}
        for hv in wanted:
            try:
                if hv.state() == "frozen":
                    self.thaw(hv.name)
                if hv.launch():
                    started.append(hv.name)
            except LabError as exc:
                errors[hv.name] = exc
        deadline = time.monotonic() + timeout
        errors.update(_in_threads([hv for hv in wanted if hv.name not in errors],
                                  lambda hv: hv.wait_ready(deadline)))
        errors.update(_in_threads([hv for hv in wanted if hv.name not in errors],
                                  lambda hv: hv.ensure_pools()))
        if errors:
            raise LabError("; ".join(str(errors[n]) for n in sorted(errors)))
        simulator = vcsim.start(self.run_dir) if vsphere else None
        try:
            cluster = pvesim.start(self.run_dir) if proxmox else None
        except RuntimeError as exc:
            raise LabError(str(exc)) from exc
        self._write_state(wanted, simulator, cluster)
        return started

    def _write_state(self, wanted, vsphere=None, proxmox=None):
        names = {hv.name for hv in wanted}
        others = [Hypervisor(self.run_dir, n) for n in self.names() if n not in names]
        extra = [hv for hv in others if hv.state() != "stopped"]
        hypervisors = sorted(wanted + extra, key=lambda hv: hv.index)
        state = {
            "run_dir": self.run_dir,
            "inventory": self.inventory_file,
            "azs": sorted({hv.az for hv in hypervisors}),
            "hypervisors": [hv.describe() for hv in hypervisors],
            "vsphere": dict(vsphere, password="(in inventory.yml)") if vsphere else None,
            "proxmox": dict(proxmox, password="(in inventory.yml)",
                            nodes=list(pvesim.NODES)) if proxmox else None,
        }
        _write(self.state_file, json.dumps(state, indent=2) + "\n")
        _write(self.inventory_file, "\n".join(_yaml_lines(inventory(
            hypervisors, self.run_dir, vsphere=vsphere, proxmox=proxmox))) + "\n")
        simulators = [(vsphere, os.path.join(self.run_dir, "vcsim", "password")),
                      (proxmox, os.path.join(self.run_dir, pvesim.NAME, "password"))]
        source = inventory_source(hypervisors, [s for s in simulators if s[0]])
        _write(self.source_file, "\n".join(_yaml_lines(source)) + "\n")

    def stop(self, name):
        """Kill libvirtd of ``name`` (SIGKILL: a crash-like outage). virtlogd and QEMU stay."""
        hv = self.hypervisor(name)
        with self._locked():
            pid = hv.daemon_pid("libvirtd")
            if pid is None:
                return False
            _signal([pid], signal.SIGKILL)
        if _wait_gone([pid], KILL_GRACE):
            raise LabError("%s: libvirtd (pid %d) survived SIGKILL" % (name, pid))
        return True

    def start(self, name, timeout=UP_TIMEOUT):
        """Start the stopped daemons of ``name`` and wait until it answers."""
        _check_host()
        hv = self.hypervisor(name)
        with self._locked():
            if hv.state() == "frozen":
                raise LabError("%s is frozen, not stopped: run `lab.py thaw %s`" % (name, name))
            started = hv.launch()
        hv.wait_ready(time.monotonic() + timeout)
        return bool(started)

    def freeze(self, name):
        """SIGSTOP libvirtd of ``name``: it keeps its socket but answers nothing."""
        hv = self.hypervisor(name)
        pid = hv.daemon_pid("libvirtd")
        if pid is None:
            raise LabError("%s is stopped, there is nothing to freeze: run `lab.py start %s`"
                           % (name, name))
        _signal([pid], signal.SIGSTOP)
        end = time.monotonic() + KILL_GRACE
        while process_state(pid) not in ("T", "t"):
            if time.monotonic() > end:
                raise LabError("%s: libvirtd (pid %d) did not stop on SIGSTOP" % (name, pid))
            time.sleep(0.01)

    def thaw(self, name):
        """SIGCONT libvirtd of ``name``."""
        hv = self.hypervisor(name)
        pid = hv.daemon_pid("libvirtd")
        if pid is not None:
            _signal([pid], signal.SIGCONT)

    def down(self, names=None):
        """Stop the daemons and QEMU processes of the lab (or of ``names``); keep the run dir.

        Raises LabError listing any process of the lab still alive afterwards.
        """
        hypervisors = [self.hypervisor(n) for n in (names or self.names())]
        with self._locked():
            self._down(hypervisors)
            if names is None:
                vcsim.stop(self.run_dir)
                pvesim.stop(self.run_dir)

    @staticmethod
    def _down(hypervisors):
        procs = [p for hv in hypervisors for p in hv.processes()]
        inits = [p for p in (hv.daemon_pid("hvinit") for hv in hypervisors) if p]
        daemons = [p for p in (hv.daemon_pid("libvirtd") for hv in hypervisors) if p]
        others = [p for p in procs if p not in daemons and p not in inits]
        _signal(daemons, signal.SIGKILL)  # first, so nothing reacts to its QEMUs going away
        _signal(others, signal.SIGCONT)
        _signal(others, signal.SIGTERM)
        _signal(_wait_gone(daemons + others, KILL_GRACE), signal.SIGKILL)
        _wait_gone(daemons + others, KILL_GRACE)
        # each hvinit exits by itself once it has reaped its last child
        _signal(_wait_gone(inits, KILL_GRACE), signal.SIGKILL)
        _wait_gone(inits, KILL_GRACE)
        stray = {hv.name: hv.processes() for hv in hypervisors}
        stray = {n: pids for n, pids in stray.items() if pids}
        if stray:
            raise LabError("processes of the lab still alive after down: %s" % stray)

    def status(self, probe_timeout=2.0):
        """One dict per hypervisor: name, az, state, answering, pids, qemu count, uri."""
        rows = []
        for name in self.names():
            hv = Hypervisor(self.run_dir, name)
            state = hv.state()
            error = _probe(hv.uri, probe_timeout) if state == "running" else state
            rows.append({
                "name": name,
                "az": hv.az,
                "state": state,
                "answering": error is None,
                "libvirtd_pid": hv.daemon_pid("libvirtd"),
                "virtlogd_pid": hv.daemon_pid("virtlogd"),
                "qemu_processes": len(hv.qemu_pids()),
                "uri": hv.uri,
            })
        return rows


def _in_threads(hypervisors, fn):
    """Run fn(hv) for each hypervisor in parallel; return {name: LabError} for those that failed."""
    errors = {}

    def run(hv):
        try:
            fn(hv)
        except LabError as exc:
            errors[hv.name] = exc

    threads = [threading.Thread(target=run, args=(hv,), daemon=True) for hv in hypervisors]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def _check_host():
    if os.geteuid() != 0:
        raise LabError("the lab needs root (it creates mount namespaces): run it as root")
    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing:
        raise LabError("missing commands: %s; run lab/install-deps.sh as root" % ", ".join(missing))


# ---------------------------------------------------------------- command line

def _print_status(rows):
    if not rows:
        print("no hypervisors in this run dir (run `lab.py up`)")
    for r in rows:
        print("%-5s %-4s %-8s answering=%-5s libvirtd=%-7s virtlogd=%-7s qemu=%d %s" % (
            r["name"], r["az"], r["state"], r["answering"], r["libvirtd_pid"],
            r["virtlogd_pid"], r["qemu_processes"], r["uri"]))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--run-dir", help="lab directory (default: $%s or %s)"
                        % (RUN_DIR_ENV, os.path.relpath(DEFAULT_RUN_DIR, REPO_ROOT)))
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the hypervisors (idempotent)")
    up.add_argument("--count", type=int, default=DEFAULT_COUNT)
    up.add_argument("--timeout", type=float, default=UP_TIMEOUT, help="seconds to wait for answers")
    up.add_argument("--no-vsphere", dest="vsphere", action="store_false",
                    help="do not start the vSphere API simulator")
    up.add_argument("--no-proxmox", dest="proxmox", action="store_false",
                    help="do not start the Proxmox VE API simulator")
    sub.add_parser("down", help="stop every daemon and QEMU process of the lab, and the "
                   "simulators")
    status = sub.add_parser("status", help="show each hypervisor")
    status.add_argument("--json", action="store_true")
    for cmd, text in (("stop", "kill libvirtd (outage)"), ("start", "restart a stopped one"),
                      ("freeze", "SIGSTOP libvirtd (hang)"), ("thaw", "SIGCONT libvirtd")):
        sub.add_parser(cmd, help=text).add_argument("name")
    # `--run-dir` is accepted after the subcommand too
    for p in sub.choices.values():
        p.add_argument("--run-dir", dest="sub_run_dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    lab = Lab(getattr(args, "sub_run_dir", None) or args.run_dir)
    try:
        if args.command == "up":
            began = time.monotonic()
            started = lab.up(args.count, args.timeout, args.vsphere, args.proxmox)
            print("lab up in %.1f s (started: %s); inventory: %s"
                  % (time.monotonic() - began, ", ".join(started) or "none", lab.inventory_file))
        elif args.command == "down":
            lab.down()
            print("lab down: no daemon or QEMU process left in %s" % lab.run_dir)
        elif args.command == "status":
            rows = lab.status()
            if args.json:
                print(json.dumps(rows, indent=2))
            else:
                _print_status(rows)
        else:
            getattr(lab, args.command)(args.name)
            print("%s: %s" % (args.name, lab.hypervisor(args.name).state()))
    except LabError as exc:
        print("lab.py %s: %s" % (args.command, exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
