"""Build the lab's guest: a Linux kernel and a small initramfs that boots in a few seconds under
QEMU's emulation and has what a real guest shows a hypervisor (standard library only).

The guest runs Debian's cloud kernel (``linux-image-cloud-amd64``) with an initramfs holding
busybox (``busybox-static``) and the QEMU guest agent (``qemu-guest-agent``, with the shared
libraries it needs, copied from this machine). Its ``/init`` loads the virtio drivers, takes an
address by DHCP on every interface, starts the guest agent on its virtio-serial channel, and
powers off when the agent is asked to shut down. It has no disk: a domain boots it directly
(``<os><kernel>``, ``<initrd>``), so a test defines such domains itself, with libvirt.

The packages are fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x`` (nothing is
installed on this machine); the build lives in ``<run_dir>/guest/`` (``vmlinuz``,
``initrd.img``) and is redone only when this file changes.

Command line: ``python3 lab/guest.py build [--run-dir DIR]`` prints the two paths as JSON.
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_RUN_DIR = os.path.join(HERE, "run")
PACKAGES = ("linux-image-cloud-amd64", "busybox-static", "qemu-guest-agent")
MODULES = ("virtio_ring", "virtio", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci",
           "failover", "net_failover", "virtio_net", "virtio_console")
HOSTNAME = "rv-guest"
OS_RELEASE = 'NAME="resilient.virt lab guest"\nID=rvguest\nVERSION_ID="1"\n' \
             'PRETTY_NAME="resilient.virt lab guest 1"\n'
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /run /tmp /var/run /dev/virtio-ports
for m in %(modules)s; do insmod /lib/modules/$m.ko 2>&1 | sed "s/^/rv-guest: /" > /dev/console; done
hostname %(hostname)s
ip link set lo up
for port in /sys/class/virtio-ports/vport*; do
    [ -e "$port/name" ] && ln -sf /dev/$(basename $port) /dev/virtio-ports/$(cat $port/name)
done
for dev in /sys/class/net/eth*; do
    name=$(basename $dev)
    ip link set $name up
    udhcpc -b -i $name -s /etc/udhcpc.sh >/dev/null 2>&1
done
if [ -e /dev/virtio-ports/org.qemu.guest_agent.0 ]; then
    qemu-ga -m virtio-serial -p /dev/virtio-ports/org.qemu.guest_agent.0 -f /run/qemu-ga.pid &
fi
echo "rv-guest: up" > /dev/console
while true; do sleep 3600; done
"""
UDHCPC = """#!/bin/sh
case "$1" in
  bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/${mask:-24}" dev "$interface"
    ;;
esac
"""
SHUTDOWN = "#!/bin/sh\nsync\npoweroff -f\n"


def _paths(run_dir):
    base = os.path.join(os.path.abspath(run_dir or DEFAULT_RUN_DIR), "guest")
    return {"base": base, "kernel": os.path.join(base, "vmlinuz"),
            "initrd": os.path.join(base, "initrd.img"), "stamp": os.path.join(base, "stamp"),
            "debs": os.path.join(base, "debs")}


def _stamp():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _fetch(debs):
    """Download the packages (and the kernel package the metapackage names) into ``debs``."""
    os.makedirs(debs, exist_ok=True)
    os.chmod(debs, 0o777)  # apt's sandbox user writes here
    wanted = list(PACKAGES)
    depends = subprocess.run(["apt-cache", "depends", "linux-image-cloud-amd64"], check=True,
                             capture_output=True, text=True).stdout
    wanted += [line.split()[-1] for line in depends.splitlines()
               if line.strip().startswith("Depends: linux-image-")]
    subprocess.run(["apt-get", "download", "-q"] + wanted, cwd=debs, check=True,
                   capture_output=True)
    return glob.glob(os.path.join(debs, "*.deb"))


def _copy_libraries(binary, root):
    """The shared libraries ``binary`` loads, copied from this machine into ``root``."""
    listing = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    for line in listing.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if path.startswith("/"):
            target = os.path.join(root, path.lstrip("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(os.path.realpath(path), target)


def _write(path, text, mode=0o755):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def _current(paths):
    if not (os.path.exists(paths["stamp"]) and os.path.exists(paths["initrd"])):
        return False
    with open(paths["stamp"]) as f:
        return f.read() == _stamp()


def build(run_dir=None):
    """Build the guest unless it is current; return {"kernel": path, "initrd": path}."""
    paths = _paths(run_dir)
    if _current(paths):
        return {"kernel": paths["kernel"], "initrd": paths["initrd"]}
    debs = _fetch(paths["debs"])
    with tempfile.TemporaryDirectory() as work:
        unpacked = os.path.join(work, "debs")
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", deb, unpacked], check=True)
        root = os.path.join(work, "root")
        for name in ("bin", "sbin", "etc", "lib/modules", "proc", "sys", "dev", "run", "tmp"):
            os.makedirs(os.path.join(root, name), exist_ok=True)
        shutil.copy2(os.path.join(unpacked, "bin", "busybox"), os.path.join(root, "bin", "busybox"))
        agent = os.path.join(unpacked, "usr", "sbin", "qemu-ga")
        shutil.copy2(agent, os.path.join(root, "bin", "qemu-ga"))
        _copy_libraries(agent, root)
        for module in MODULES:
            found = glob.glob(os.path.join(unpacked, "lib", "modules", "*", "kernel", "**",
                                           module + ".ko"), recursive=True)
            shutil.copy2(found[0], os.path.join(root, "lib", "modules", module + ".ko"))
        _write(os.path.join(root, "init"), INIT % {"modules": " ".join(MODULES),
                                                   "hostname": HOSTNAME})
        _write(os.path.join(root, "etc", "udhcpc.sh"), UDHCPC)
        _write(os.path.join(root, "sbin", "shutdown"), SHUTDOWN)
        _write(os.path.join(root, "etc", "os-release"), OS_RELEASE, 0o644)
        os.makedirs(paths["base"], exist_ok=True)
        kernel = glob.glob(os.path.join(unpacked, "boot", "vmlinuz-*"))[0]
        shutil.copy2(kernel, paths["kernel"])
        files = subprocess.run(["find", "."], cwd=root, check=True, capture_output=True).stdout
        archive = subprocess.run([os.path.join(root, "bin", "busybox"), "cpio", "-o", "-H",
                                  "newc"], cwd=root, input=files, check=True,
                                 capture_output=True).stdout
        with open(paths["initrd"] + ".tmp", "wb") as f:
            f.write(subprocess.run(["gzip", "-9"], input=archive, check=True,
                                   capture_output=True).stdout)
        os.replace(paths["initrd"] + ".tmp", paths["initrd"])
    _write(paths["stamp"], _stamp(), 0o644)
    return {"kernel": paths["kernel"], "initrd": paths["initrd"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--run-dir", default=os.environ.get("RESILIENT_VIRT_LAB_DIR"))
    args = parser.parse_args()
    print(json.dumps(build(args.run_dir)))


if __name__ == "__main__":
    main()
