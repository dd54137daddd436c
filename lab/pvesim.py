"""Start, stop and describe the lab's Proxmox VE API simulator: a three-node cluster.

The simulator is fakepve (PyPI, a test tool under AGPL-3.0, installed by tests/requirements.txt
and never shipped with the collection). It answers the PVE 9 API with PVE's status codes and
wording and keeps VM power, config, tasks with their UPIDs and locks, storage and the guest
agent in memory: VMs made on it are gone when it stops, as a transient libvirt domain is.

The cluster: the nodes :data:`NODES`, a storage ``vmdata`` (type dir, for disks, linked clones
and cloud-init drives) and a template ``tpl`` (vmid :data:`TEMPLATE_ID`, a disk and a NIC) on
the first node; every new VM runs a simulated QEMU guest agent; nodes can be put in HA
maintenance (:func:`with_node_maintenance`), vzdump stores its archives
(:func:`with_vzdump_archives`), PVE restores one (:func:`with_qmrestore`) and a VM migrates to
another node (:func:`with_qemu_migration`): fakepve itself has none of them. It serves HTTPS
on 127.0.0.1 with a certificate of the lab CA (the one the vSphere simulator's certificate
comes from), so
the provider settings keep ``validate_certs`` on and name the CA in ``ca_path``; the login is
``root@pam`` with a password generated once per run directory (``pve/password``, mode 0600).

Everything lives under ``<run_dir>/pve/``: pid file, log, URL, password and certificate.
Functions for the lab: ``start(run_dir) -> provider dict``, ``stop(run_dir)``,
``status(run_dir)``. Command line: ``python3 lab/pvesim.py up|down|status [--run-dir DIR]
[--port N]`` prints the status as JSON with the password masked; ``serve`` is the simulator's
own process, which ``up`` starts.
"""
import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import vcsim  # lab/vcsim.py: the lab CA
from pvesim_ha import with_ha_recovery
from runstate import process_state, read_text, write_private

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RUN_DIR = os.path.join(HERE, "run")
HOST = "127.0.0.1"
NAME = "pve"
USERNAME = "root@pam"
NODES = ("pve1", "pve2", "pve3")
STORAGE = "vmdata"
TEMPLATE_ID = 9000
TEMPLATE_NAME = "tpl"


def _paths(run_dir):
    base = os.path.join(os.path.abspath(run_dir or DEFAULT_RUN_DIR), NAME)
    names = ("pid", "log", "url", "password", "tls", "lock")
    return {name: os.path.join(base, name) for name in names} | {"base": base}


def _password(paths):
    """The simulator's root@pam password: generated once, kept in a 0600 file."""
    password = read_text(paths["password"])
    if not password:
        password = secrets.token_urlsafe(18)
        write_private(paths["password"], password + "\n")
    return password


# ---------------------------------------------------------------- the simulator's process

def with_node_maintenance(pve):
    """Give a fakepve cluster the node maintenance it does not model: ``pve.maintenance``, a set
    of node names that the HA manager's status (``/cluster/ha/status/manager_status``) reports in
    ``maintenance`` (PVE's word, set by ``ha-manager crm-command node-maintenance enable``), the
    other nodes ``online``. Nothing else changes: a node in maintenance keeps answering, as on
    PVE; one shut down for its maintenance is also ``set_node_offline``."""
    synthesise = pve.synthesise
    pve.maintenance = set()

    async def with_node_status(match, method, info, user, values):
        data = await synthesise(match, method, info, user, values)
        if method == "GET" and match.template == "/cluster/ha/status/manager_status":
            status = {node: "maintenance" if node in pve.maintenance else "online"
                      for node in sorted(pve.nodes)}
            data = dict(data, manager_status={"node_status": status})
        return data

    pve.synthesise = with_node_status
    return pve


def with_vzdump_archives(pve):
    """Give a fakepve cluster the archives vzdump writes, which it does not model (its vzdump
    task ends and stores nothing): ``POST /nodes/<node>/vzdump`` of one VM runs a ``vzdump``
    task that holds the VM's ``backup`` lock for ``pve.vzdump_secs`` PVE seconds (default 0),
    then stores ``backup/vzdump-qemu-<vmid>-<time>.vma.zst`` on the storage it names (default
    ``local``) with the notes of its ``notes-template`` (``{{guestname}}``, ``{{vmid}}``,
    ``{{node}}``, ``{{cluster}}`` filled in), as PVE lists them in the storage's content. What
    the archive holds is kept in ``pve.archives`` by volume id: the VM's config, its name and
    the size in bytes of each disk (what :func:`with_qmrestore` restores)."""
    from fakepve.lxc import parse_size
    from fakepve.qemu import drives_of

    synthesise = pve.synthesise
    pve.vzdump_secs = 0
    pve.archives = {}

    def contents(vm):
        config = {k: v for k, v in vm.config.items() if k != "lock"}
        disks = {}
        for key, volume, props in drives_of(config, skip_cdrom=True):
            stored = pve._qm_volume(volume) or {}
            disks[key] = int(stored.get("size") or parse_size(props.get("size", "")) or 0)
        return {"config": config, "name": vm.name, "disks": disks}

    async def with_archive(match, method, info, user, values):
        if method != "POST" or match.template != "/nodes/{node}/vzdump" or \
                not str(values.get("vmid") or "").isdigit():
            return await synthesise(match, method, info, user, values)
        vm = pve.find(values["node"], values["vmid"])
        storage = values.get("storage") or "local"

        async def body():
            from fakepve.model import TaskError

            if storage not in pve.storages or "backup" not in pve.storages[storage].get(
                    "content", ""):
                raise TaskError("storage '%s' does not support backups" % storage)
            if vm.lock:
                raise TaskError("VM is locked (%s)" % vm.lock)
            vm.lock = vm.config["lock"] = "backup"
            try:
                await pve.pause(pve.vzdump_secs)
            finally:
                vm.lock = None
                vm.config.pop("lock", None)
            now = time.time()
            notes = str(values.get("notes-template") or "{{guestname}}")
            for key, value in (("guestname", vm.name), ("vmid", vm.vmid),
                               ("node", vm.node), ("cluster", pve.cluster_name)):
                notes = notes.replace("{{%s}}" % key, str(value))
            volname = "backup/vzdump-qemu-%d-%s.vma.zst" % (
                vm.vmid, time.strftime("%Y_%m_%d-%H_%M_%S", time.gmtime(now)))
            pve.storages[storage].setdefault("volumes", {})[volname] = {
                "content": "backup", "format": "vma.zst", "size": 64 * 1024 ** 2,
                "ctime": int(now), "vmid": vm.vmid, "notes": notes}
            pve.archives["%s:%s" % (storage, volname)] = contents(vm)
            return "INFO: Finished Backup of VM %d" % vm.vmid
        return await pve.task(vm.node, "vzdump", vm.vmid, user or USERNAME, body, lock=False,
                              log=["INFO: starting new backup job: vzdump %d" % vm.vmid])

    pve.synthesise = with_archive
    return pve


def with_qemu_migration(pve):
    """Give a fakepve cluster the QEMU migration it does not model (it answers with a task that
    moves nothing): ``POST /nodes/<node>/qemu/<vmid>/migrate`` runs a ``qmigrate`` task on the
    VM's node that holds its ``migrate`` lock for ``pve.migrate_secs`` PVE seconds (default 0),
    then the VM is on ``target``, in the state it had. Refused as PVE refuses, with its words: the
    VM's own node as target (400), a running VM without ``online=1`` and a locked VM (500); a
    target that is not an online node of the cluster fails the task (``migration aborted``)."""
    from fakepve.model import PveError, TaskError

    synthesise = pve.synthesise
    pve.migrate_secs = 0

    async def with_migration(match, method, info, user, values):
        if method != "POST" or match.template != "/nodes/{node}/qemu/{vmid}/migrate":
            return await synthesise(match, method, info, user, values)
        vm = pve.find(values["node"], values["vmid"])
        target = str(values.get("target") or "")
        if target == vm.node:
            raise PveError(400, "Parameter verification failed.", {"target": "target is local node."})
        if vm.status == "running" and str(values.get("online") or "0") not in ("1", "true"):
            raise PveError(500, "can't migrate running VM without --online")
        if vm.lock:
            raise PveError(500, "VM is locked (%s)" % vm.lock)

        async def body():
            if not pve.nodes.get(target, {}).get("online"):
                raise TaskError("migration aborted")
            vm.lock = vm.config["lock"] = "migrate"
            try:
                await pve.pause(pve.migrate_secs)
                vm.node = target
            finally:
                vm.lock = None
                vm.config.pop("lock", None)
            return "migration finished successfully"
        return await pve.task(vm.node, "qmigrate", vm.vmid, user or USERNAME, body, vm=vm,
                              log=["starting migration of VM %d to node '%s'" % (vm.vmid, target)])

    pve.synthesise = with_migration
    return pve


def with_qmrestore(pve):
    """Give a fakepve cluster PVE's restore of a vzdump archive, which it refuses (it answers
    "restoring an archive is not supported"): ``POST /nodes/<node>/qemu`` with ``archive`` (the
    volume id of an archive :func:`with_vzdump_archives` stored) answers at once with the UPID
    of a ``qmrestore`` task, as PVE's qmrestore through the API does. Like PVE, the request
    first puts the ``create`` lock on the VM (a new one, or the existing one with ``force``);
    the task holds it for ``pve.restore_secs`` PVE seconds (default 0), then the VM has the
    archive's config with a new disk of the archive's size for each of its disks, on
    ``storage`` when given (else the storage each disk was on), the request's other options
    (``name``...) over it; ``unique`` gives new MAC addresses, ``start`` starts it. A
    restore onto an existing VM frees its old disks when the task begins. A task that fails
    frees the disks it made; a new VM is removed, an existing one stays locked (``create``)
    with an empty config, as PVE leaves it. Refused as PVE refuses, with its words: an archive
    on a storage that does not exist or that the node cannot see, an archive that is not
    there, a drive option next to ``archive`` (400), an existing VM without ``force``, a
    running or locked one. The restore through ``qmrestore`` on a node's shell, and archives
    on a Proxmox Backup Server, are not modelled. It is a simulator: no disk data is copied."""
    from fakepve.model import FakeVm, PveError, TaskError
    from fakepve.qemu import DRIVE_KEY, drives_of, join_drive, volume_ref, with_mac

    answer = pve.answer
    pve.restore_secs = 0

    def archive_of(volid, node):
        sid, volname = volume_ref(str(volid))
        if sid not in pve.storages:
            raise PveError(500, "storage '%s' does not exist" % sid)
        pve._check_enabled(sid, node)
        if volname not in pve.storages[sid].get("volumes", {}) or volid not in pve.archives:
            raise PveError(500, "can't find file '%s'" % volid)
        return pve.archives[volid]

    def restored_config(archive, values, vmid, made):
        config = dict(archive["config"])
        for key, volume, props in drives_of(archive["config"], skip_cdrom=True):
            if volume in ("none", "cdrom") or volume.endswith(":cloudinit"):
                continue
            sid = values.get("storage") or volume_ref(volume)[0]
            store = pve.storages.get(sid)
            if store is None or "images" not in str(store.get("content", "")):
                raise TaskError("storage '%s' does not support vm images" % sid)
            extension = volume.rsplit(".", 1)[-1]
            fmt = props.pop("format", None) or (extension if extension in ("qcow2", "raw", "vmdk") else None)
            volid, _fmt = pve._qm_alloc(sid, vmid, fmt, archive["disks"][key])
            made.append(volid)
            config[key] = join_drive(volid, props)
        for key, value in values.items():
            if key not in ("node", "vmid", "archive", "storage", "force", "unique", "start",
                           "pool", "bwlimit", "live-restore"):
                config[key] = value
        if str(values.get("unique") or "0") in ("1", "true"):
            for key in [k for k in config if k.startswith("net") and k[3:].isdigit()]:
                config[key] = with_mac(config[key], fresh=True)
        return config

    async def restore(values, user):
        node, vmid = values["node"], int(values["vmid"])
        archive = archive_of(values["archive"], node)
        for key in values:
            if DRIVE_KEY.match(key):
                raise PveError(400, "Parameter verification failed.",
                               {key: "option conflicts with option 'archive'"})
        emsg = "unable to restore VM %d -" % vmid
        vm = pve.vm(vmid)
        existing = vm is not None
        if existing and str(values.get("force") or "0") not in ("1", "true"):
            raise PveError(500, "%s VM %d already exists on node '%s'" % (emsg, vmid, vm.node))
        if existing and vm.status == "running":
            raise PveError(500, "%s vm is running" % emsg)
        if existing and vm.lock:
            raise PveError(500, "%s VM is locked (%s)" % (emsg, vm.lock))
        if not existing:
            vm = FakeVm(vmid, values.get("name") or archive["name"], node=node)
            vm.config = {}
            pve.vms.append(vm)
        vm.lock = vm.config["lock"] = "create"

        async def body():
            made = []
            try:
                await pve.pause(pve.restore_secs)
                for _key, volume, _props in drives_of(vm.config, skip_cdrom=True):
                    pve._qm_free(volume)
                vm.config = {"lock": "create"}
                config = restored_config(archive, values, vmid, made)
            except (PveError, TaskError) as err:
                for volid in made:
                    pve._qm_free(volid)
                if not existing and vm in pve.vms:
                    pve.vms.remove(vm)
                raise TaskError("%s %s" % (emsg, getattr(err, "message", None) or err)) from err
            vm.config = config
            vm.name = config.get("name") or archive["name"]
            vm.lock = None
            if str(values.get("start") or "0") in ("1", "true"):
                vm.status = vm.qmpstatus = "running"
                vm.started_at = time.time()
            return "restore vma archive: %s" % values["archive"]
        return await pve.task(node, "qmrestore", vmid, user or USERNAME, body, vm=vm,
                              log=["restore vma archive: %s" % values["archive"]])

    async def with_restore(request, match, params, user, call=None):
        if request.method == "POST" and match is not None and \
                match.template == "/nodes/{node}/qemu" and params.get("archive"):
            return await answer(request, match, params, user,
                                lambda _match, values: restore(values, user))
        return await answer(request, match, params, user, call)

    pve.answer = with_restore
    return pve


def build_cluster(password, port):
    """The simulated cluster (a fakepve FakePve, not started): nodes, storage, template."""
    import fakepve
    from fakepve.model import FakeVm

    original = FakeVm.__init__

    def with_agent(vm, *args, **kwargs):  # every new VM's guest runs the QEMU guest agent
        original(vm, *args, **kwargs)
        vm.agent = {}

    FakeVm.__init__ = with_agent
    pve = fakepve.FakePve(user=USERNAME, password=password, host=HOST, port=port)
    pve.time_scale = 0  # PVE's task durations pass at once; injected delays are the tests' own
    pve.storages[STORAGE] = {"type": "dir", "active": 1, "content": "images", "files": set(),
                             "path": "/var/lib/" + STORAGE}
    for node in NODES:
        pve.add_node(node)
    disk = "%d/base-%d-disk-0.qcow2" % (TEMPLATE_ID, TEMPLATE_ID)
    pve.add_vm(TEMPLATE_ID, TEMPLATE_NAME, node=NODES[0], template=True, config={
        "memory": 512, "cores": 1, "scsi0": "%s:%s,size=2G" % (STORAGE, disk),
        "net0": "virtio=BC:24:11:AA:00:01,bridge=vmbr0", "agent": "1"})
    pve.storages[STORAGE]["volumes"] = {disk: {
        "content": "images", "format": "qcow2", "size": 2 * 1024 ** 3, "vmid": TEMPLATE_ID}}
    return with_ha_recovery(with_qmrestore(with_qemu_migration(with_vzdump_archives(with_node_maintenance(pve)))))


async def _serve(paths, port, cert, key):
    pve = build_cluster(_password(paths), port)
    await pve.start(cert, key)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopped.set)
    write_private(paths["url"], pve.url + "\n")
    await stopped.wait()
    await pve.stop()


# ---------------------------------------------------------------- start, stop, status

def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read().split(b"\0")
    except OSError:
        return []


def _running(paths):
    """The pid of this run directory's simulator process, or None (a stale pid file or a
    reused pid is never trusted: the process must be ``pvesim.py serve`` of this directory)."""
    text = read_text(paths["pid"]) or ""
    if not text.isdigit():
        return None
    pid = int(text)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # reap our own child
    args = [a.decode(errors="replace") for a in _cmdline(pid)]
    ours = (any(a.endswith("pvesim.py") for a in args) and "serve" in args
            and os.path.dirname(paths["base"]) in args)
    return pid if ours and process_state(pid) not in (None, "Z") else None


def _answers(url, ca, timeout=2.0):
    """True when the simulator answers HTTPS at ``url`` (any status but 5xx), its certificate
    verified with the lab CA ``ca``."""
    context = ssl.create_default_context(cafile=ca)
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))
    try:
        with direct.open(url + "/api2/json/version", timeout=timeout) as response:
            return response.status < 500
    except urllib.error.HTTPError as err:
        return err.code < 500
    except OSError:
        return False


def _lab_ca(paths):
    """The lab CA's certificate file (made by :func:`vcsim.lab_certificate`)."""
    return os.path.join(vcsim._paths(os.path.dirname(paths["base"]))["tls"], "ca.pem")


def _settings(paths, url):
    return {"type": "proxmox", "name": NAME, "host": HOST, "port": int(url.rsplit(":", 1)[1]),
            "username": USERNAME, "password": _password(paths), "ca_path": _lab_ca(paths),
            "storage": STORAGE}


def _log_tail(paths, lines=20):
    return "\n".join((read_text(paths["log"]) or "").splitlines()[-lines:])


def _launch(paths, run_dir, port, timeout):
    """Start the simulator's process on ``port``; its URL, or None if it exited at start."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths["url"])
    ca, _cert, _key = vcsim.lab_certificate(run_dir, paths["tls"], (HOST,))
    argv = [sys.executable, os.path.abspath(__file__), "serve", "--run-dir",
            os.path.dirname(paths["base"]), "--port", str(port)]
    log_fd = os.open(paths["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
                                start_new_session=True, close_fds=True, cwd="/")
    finally:
        os.close(log_fd)
    write_private(paths["pid"], "%d\n" % proc.pid)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return None
        url = read_text(paths["url"])
        if url and _answers(url, ca):
            return url
        time.sleep(0.05)
    _terminate(proc.pid, 5.0)
    raise RuntimeError("the Proxmox VE simulator did not answer within %gs; log %s:\n%s"
                       % (timeout, paths["log"], _log_tail(paths)))


def start(run_dir=None, port=None, timeout=60.0):
    """Start the simulated cluster and return its provider settings.

    Idempotent: a running simulator is left alone. ``port`` None reuses the previous port when
    it is free (so provider settings survive a restart), else any free port.
    """
    paths = _paths(run_dir)
    os.makedirs(paths["base"], mode=0o700, exist_ok=True)
    with vcsim._locked(paths["lock"]):
        url = read_text(paths["url"])
        if _running(paths) and url and _answers(url, _lab_ca(paths)):
            return _settings(paths, url)
        stop(run_dir)
        previous = int(url.rsplit(":", 1)[1]) if url else None
        tries = [port] if port is not None else ([previous, 0] if previous else [0])
        for candidate in tries:
            url = _launch(paths, run_dir, candidate, timeout)
            if url:
                return _settings(paths, url)
        raise RuntimeError("the Proxmox VE simulator exited at start; log %s:\n%s"
                           % (paths["log"], _log_tail(paths)))


def _terminate(pid, timeout):
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + timeout
    while time.monotonic() < end and process_state(pid) not in (None, "Z"):
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    if process_state(pid) not in (None, "Z"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)


def stop(run_dir=None, timeout=10.0):
    """Stop the simulator (SIGTERM, then SIGKILL after ``timeout``); True if one was running."""
    paths = _paths(run_dir)
    pid = _running(paths)
    if pid is not None:
        _terminate(pid, timeout)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(paths["pid"])
    return pid is not None


def status(run_dir=None):
    """Describe the simulator: running, pid, url, log path and provider settings (or None)."""
    paths = _paths(run_dir)
    pid = _running(paths)
    url = read_text(paths["url"]) if pid else None
    return {"running": pid is not None, "pid": pid, "url": url, "log": paths["log"],
            "nodes": list(NODES), "provider": _settings(paths, url) if url else None}


def main(argv=None):
    parser = argparse.ArgumentParser(description="Proxmox VE API simulator of the local lab")
    parser.add_argument("action", choices=["up", "down", "status", "serve"])
    parser.add_argument("--run-dir", default=DEFAULT_RUN_DIR)
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    if args.action == "serve":
        paths = _paths(args.run_dir)
        tls = paths["tls"]
        asyncio.run(_serve(paths, args.port or 0, os.path.join(tls, "server.pem"),
                           os.path.join(tls, "server.key")))
        return 0
    try:
        if args.action == "up":
            start(args.run_dir, port=args.port)
        elif args.action == "down":
            stop(args.run_dir)
    except RuntimeError as exc:
        print("pvesim.py %s: %s" % (args.action, exc), file=sys.stderr)
        return 1
    info = status(args.run_dir)
    if info["provider"]:
        info["provider"]["password"] = "***"
        info["password_file"] = _paths(args.run_dir)["password"]
    print(json.dumps(info, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
