"""Init of one lab hypervisor: starts virtlogd and libvirtd inside its mount namespace and reaps.

Run by lab.py inside the hypervisor's private mount namespace, after the bind mounts. It forks:
the parent exits 0 once both daemons run (1 if they do not), the child stays as the
hypervisor's "init". The child is a child subreaper, so the daemons and the QEMU processes they
start are reaped at once when they exit (libvirt waits for a destroyed QEMU to disappear). On
SIGUSR1 it starts whichever daemon is missing (lab.py start). It exits when it has no child left.
"""
import ctypes
import os
import signal
import subprocess
import sys

PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36
DAEMONS = ("virtlogd", "libvirtd")  # virtlogd first: libvirtd needs its socket


def daemon_pid(daemon):
    """PID from /run/<daemon>.pid if it names a live process called ``daemon``, else None."""
    try:
        with open("/run/%s.pid" % daemon) as f:
            pid = int(f.read().strip())
        with open("/proc/%d/comm" % pid) as f:
            if f.read().strip() != daemon:
                return None
        with open("/proc/%d/stat" % pid) as f:
            return pid if f.read().rsplit(")", 1)[1].split()[0] != "Z" else None
    except (OSError, ValueError, IndexError):
        return None


def ensure_daemons():
    """Start each daemon that is not running; return True if all run afterwards."""
    for daemon in DAEMONS:
        if daemon_pid(daemon) is None:
            subprocess.call([daemon, "-d"], stdin=subprocess.DEVNULL)
    return all(daemon_pid(d) for d in DAEMONS)


def reap():
    """Reap every exited child; return False once no child is left."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def stop_daemons():
    for daemon in DAEMONS:
        pid = daemon_pid(daemon)
        if pid:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)


def serve(ready_fd):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_NAME, b"hvinit", 0, 0, 0)
    os.setsid()
    # signals only set flags and wake the loop through a pipe: no work inside handlers
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    requested = []
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)
    signal.signal(signal.SIGUSR1, lambda _s, _f: requested.append(True))
    with open("/run/hvinit.pid", "w") as f:
        f.write("%d\n" % os.getpid())
    ok = ensure_daemons()
    if not ok:  # leave no half-started hypervisor behind
        stop_daemons()
    os.write(ready_fd, b"ok" if ok else b"failed")
    os.close(ready_fd)
    while ok:
        if requested:
            del requested[:]
            ensure_daemons()
        if not reap():
            return
        os.read(wake_r, 512)


def main():
    read_fd, write_fd = os.pipe()
    if os.fork() == 0:
        os.close(read_fd)
        serve(write_fd)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as ready:
        answer = ready.read()
    if answer != b"ok":
        print("hvinit: virtlogd/libvirtd did not start (%s)" % (answer.decode() or "init died"),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
