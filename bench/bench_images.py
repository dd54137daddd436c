"""Creating VMs from images, per task: resilient.virt.vm against the peers doing the same.

1. **libvirt, from a base image** on one lab hypervisor (``--hypervisor``, default hv2): a qcow2
   base volume of ``--base-mib`` MiB (default 1024) full of data (``qemu-io write`` in the
   hypervisor's mount namespace), then, ``--rounds`` times (default 5), the cases interleaved
   (each round starts with another one), each in a playbook of its own after a warm-up task that
   loads its collection, the figure being the creating tasks' duration as Ansible's
   ``ansible.posix.json`` callback reports it (task start to result):

   * **overlay** - ``resilient.virt.vm`` with ``disks: [{base_image: BASE}]`` (a qcow2 volume
     whose backing file is the base), against ``virsh vol-create-as --backing-vol`` (an
     ``ansible.builtin.command`` task) plus ``community.libvirt.virt command=define``;
   * **copy** - ``disks: [{base_image: BASE, clone: copy}]`` against ``virsh vol-clone`` plus
     ``community.libvirt.virt command=define``.

   Every VM is defined stopped with 1 vCPU and 64 MiB. Ratio: ours / peer (both tasks).
2. **vSphere, a clone of a template** on a simulator of its own (HTTPS with a certificate of
   the lab CA, verified by both: ``ca_path`` for ours, ``SSL_CERT_FILE`` for the peer):
   ``resilient.virt.vm`` with ``template:`` against ``vmware.vmware.deploy_folder_template``
   (the simulator's VM DC0_C0_RP0_VM1, powered off and marked as a template, cloned into cluster
   DC0_C0), ``--rounds`` each, interleaved, after a warm-up task each.
   ``community.vmware.vmware_guest`` cannot be the peer here: it reads the root folder's
   parent, and the simulator (govmomi 0.24.2) fails that request, so its clone never finishes.

Everything is named ``bench-images-*`` and removed before and after, whatever happens.

    python3 bench/bench_images.py [--lab-dir DIR] [--quick] [--json PATH]

``--quick``: 3 rounds, a 256 MiB base. Prints markdown tables; exits 0 when the bench ran and
1 when it could not.
"""
import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

from checkout import ROOT, use_checkout

use_checkout()

from bench_backup import PATTERN, Hypervisor, play  # noqa: E402
from bench_tasks import BenchError, Runner, print_targets, run_and_report  # noqa: E402

PREFIX = "bench-images-"
BASE = PREFIX + "base.qcow2"
TARGET_VS_PEER = 1.0        # ours / the peer's tasks: one task that does what two do
CASES = ("ours_overlay", "peer_overlay", "ours_copy", "peer_copy")
TEMPLATE = "DC0_C0_RP0_VM1"  # a VM of the simulator's inventory, made a template
VSPHERE_CASES = ("ours_clone", "peer_clone")


# ---------------------------------------------------------------- libvirt

def make_base(hv, size_mib):
    """The base volume, ``size_mib`` MiB of qcow2 full of data; its path."""
    root = ET.Element("volume")
    ET.SubElement(root, "name").text = BASE
    ET.SubElement(root, "capacity", unit="MiB").text = str(size_mib)
    target = ET.SubElement(root, "target")
    ET.SubElement(target, "format", type="qcow2")
    ET.SubElement(target, "compat").text = "1.1"
    path = hv.pools["default"].createXML(ET.tostring(root, encoding="unicode"), 0).path()
    hv.run("qemu-io", "-f", "qcow2", "-c", "write -P %s 0 %dM" % (PATTERN, size_mib), path)
    return path


def _domain_xml(name, path):
    root = ET.Element("domain", type="qemu")
    ET.SubElement(root, "name").text = name
    ET.SubElement(root, "memory", unit="MiB").text = "64"
    ET.SubElement(root, "vcpu").text = "1"
    ET.SubElement(ET.SubElement(root, "os"), "type").text = "hvm"
    disk = ET.SubElement(ET.SubElement(root, "devices"), "disk", type="file", device="disk")
    ET.SubElement(disk, "driver", name="qemu", type="qcow2")
    ET.SubElement(disk, "source", file=path)
    ET.SubElement(disk, "target", dev="vda", bus="virtio")
    return ET.tostring(root, encoding="unicode")


def libvirt_tasks(hv, case, name, base, store_url):
    """The warm-up task and the creating task(s) of ``case`` for VM ``name``."""
    if case.startswith("ours"):
        disk = {"base_image": base, "clone": "overlay" if case == "ours_overlay" else "copy"}
        args = {"provider": hv.provider(), "state_store": store_url}
        return [{"name": "warm-up", "resilient.virt.vm_info": dict(args, name=BASE)},
                {"name": "create", "resilient.virt.vm": dict(
                    args, name=name, vcpus=1, memory_mb=64, disks=[disk])}]
    volume = name + ".qcow2"
    path = os.path.join(hv.dirs["default"], volume)
    if case == "peer_overlay":
        make = ["vol-create-as", "default", volume, "1G", "--format", "qcow2", "--backing-vol",
                base, "--backing-vol-format", "qcow2"]
    else:
        make = ["vol-clone", "--pool", "default", BASE, volume]
    return [{"name": "warm-up", "community.libvirt.virt": {"command": "list_vms", "uri": hv.uri}},
            {"name": "create volume", "ansible.builtin.command": {
                "argv": ["virsh", "-c", hv.uri] + make}},
            {"name": "create", "community.libvirt.virt": {
                "command": "define", "xml": _domain_xml(name, path), "uri": hv.uri}}]


def measure_libvirt(runner, hv, base, rounds, store_url):
    """{case: [seconds of its creating tasks, per round]}."""
    found = dict((case, []) for case in CASES)
    for number in range(rounds):
        order = CASES[number % len(CASES):] + CASES[:number % len(CASES)]
        for case in order:
            name = "%s%s-%d" % (PREFIX, case.replace("_", "-"), number)
            done = play(runner, name, libvirt_tasks(hv, case, name, base, store_url))
            found[case].append(sum(task["seconds"] for task in done[1:]))
            if name not in [dom.name() for dom in hv.conn.listAllDomains(0)]:
                raise BenchError("%s defined no VM %s" % (case, name))
            _drop(hv, name)
    return found


def _drop(hv, name):
    """Remove VM ``name`` and its volumes (not the base)."""
    import libvirt

    try:
        dom = hv.conn.lookupByName(name)
        dom.undefine()
    except libvirt.libvirtError:
        pass
    hv.refresh()
    for vol in hv.pools["default"].listAllVolumes(0):
        if vol.name().startswith(name):
            vol.delete(0)


# ---------------------------------------------------------------- vSphere

def _vsphere(run_dir):
    vcsim = importlib.import_module("vcsim")
    return vcsim, dict(vcsim.start(run_dir,
                                   bin_dir=os.path.join(vcsim.DEFAULT_RUN_DIR, "vcsim", "bin")))


class _Session:
    """A pyVmomi session on the simulator, independent of the collection (the oracle),
    verified with the lab CA."""

    def __init__(self, settings):
        import ssl

        from pyVim.connect import SmartConnect

        self.si = SmartConnect(host=settings["host"], port=settings["port"],
                               user=settings["username"], pwd=settings["password"],
                               sslContext=ssl.create_default_context(cafile=settings["ca_path"]))
        self.content = self.si.RetrieveContent()

    def vm(self, name):
        from pyVmomi import vim

        view = self.content.viewManager.CreateContainerView(self.content.rootFolder,
                                                            [vim.VirtualMachine], True)
        try:
            return next((ref for ref in view.view if ref.name == name), None)
        finally:
            view.Destroy()

    def wait(self, task):
        while str(task.info.state) not in ("success", "error"):
            time.sleep(0.02)

    def remove(self, name):
        ref = self.vm(name)
        if ref is None:
            return
        if str(ref.runtime.powerState) != "poweredOff":
            self.wait(ref.PowerOffVM_Task())
        self.wait(ref.Destroy_Task())

    def close(self):
        from pyVim.connect import Disconnect

        Disconnect(self.si)


def make_template(session):
    """Power off the simulator's VM ``TEMPLATE`` and mark it as a template."""
    ref = session.vm(TEMPLATE)
    session.wait(ref.PowerOffVM_Task())
    ref.MarkAsTemplate()


def vsphere_tasks(settings, case, name, store_url):
    """The warm-up task and the clone task of ``case`` for VM ``name``; both verify the
    certificate (the peer trusts the lab CA through SSL_CERT_FILE, see measure_vsphere)."""
    common = {"hostname": settings["host"], "port": settings["port"],
              "username": settings["username"], "password": settings["password"],
              "validate_certs": True}
    if case == "ours_clone":
        provider = {"type": "vsphere", "host": settings["host"], "port": settings["port"],
                    "username": settings["username"], "password": settings["password"],
                    "ca_path": settings["ca_path"]}
        args = {"provider": provider, "state_store": store_url}
        return [{"name": "warm-up", "resilient.virt.vm_info": dict(args, name=TEMPLATE)},
                {"name": "create", "resilient.virt.vm": dict(
                    args, name=name, template=TEMPLATE, placement={"cluster": "DC0_C0"})}]
    clone = dict(common, datacenter="DC0", template_name=TEMPLATE, template_folder="/DC0/vm",
                 vm_folder="/DC0/vm", folder_paths_are_absolute=True, cluster="DC0_C0",
                 vm_name=name)
    return [{"name": "warm-up", "vmware.vmware.cluster_info": dict(common, datacenter="DC0")},
            {"name": "create", "vmware.vmware.deploy_folder_template": clone}]


def measure_vsphere(runner, settings, rounds, store_url):
    """{case: [seconds of its clone task, per round]}."""
    # the peer has no CA option: OpenSSL's default trust (load_default_certs) reads SSL_CERT_FILE
    runner.env = dict(runner.env, SSL_CERT_FILE=settings["ca_path"])
    found = dict((case, []) for case in VSPHERE_CASES)
    session = _Session(settings)
    try:
        make_template(session)
        for number in range(rounds):
            order = VSPHERE_CASES if number % 2 == 0 else VSPHERE_CASES[::-1]
            for case in order:
                name = "%s%s-%d" % (PREFIX, case.replace("_", "-"), number)
                done = play(runner, name, vsphere_tasks(settings, case, name, store_url))
                found[case].append(done[-1]["seconds"])
                if session.vm(name) is None:
                    raise BenchError("%s made no VM %s" % (case, name))
                session.remove(name)
    finally:
        session.close()
    return found


# ---------------------------------------------------------------- report

def _median(values):
    return round(statistics.median(values), 3)


def run(args):
    workdir = tempfile.mkdtemp(prefix="bench-images-")
    runner = Runner(workdir)
    store_url = "sqlite:///%s" % os.path.join(workdir, "state.db")
    result = {"rounds": args.rounds, "base_mib": args.base_mib}
    hv = Hypervisor(args.lab_dir, args.hypervisor, prefix=PREFIX)
    hv.clean()
    try:
        began = time.perf_counter()
        base = make_base(hv, args.base_mib)
        result["fill_seconds"] = round(time.perf_counter() - began, 2)
        result["libvirt"] = measure_libvirt(runner, hv, base, args.rounds, store_url)
    finally:
        hv.clean()
        left = hv.leftovers()
        hv.close()
    if any(left):
        raise BenchError("left on the hypervisor: %s" % (left,))
    run_dir = os.path.join(workdir, "vsphere")
    vcsim, settings = _vsphere(run_dir)
    try:
        result["vsphere"] = measure_vsphere(runner, settings, args.rounds, store_url)
    finally:
        vcsim.stop(run_dir)
    return result


def targets(result):
    rows = []
    for ours, peer, label in (("ours_overlay", "peer_overlay", "libvirt overlay"),
                              ("ours_copy", "peer_copy", "libvirt full copy")):
        ratio = _median(result["libvirt"][ours]) / _median(result["libvirt"][peer])
        rows.append({"name": "%s: vm task / virsh + community.libvirt.virt" % label,
                     "measured": "%.2fx" % ratio, "target": "<= %.1fx" % TARGET_VS_PEER,
                     "passed": ratio <= TARGET_VS_PEER})
    ratio = _median(result["vsphere"]["ours_clone"]) / _median(result["vsphere"]["peer_clone"])
    rows.append({"name": "vSphere clone: vm task / vmware.vmware.deploy_folder_template",
                 "measured": "%.2fx" % ratio, "target": "<= %.1fx" % TARGET_VS_PEER,
                 "passed": ratio <= TARGET_VS_PEER})
    return rows


def print_report(result):
    print("Creating VMs from images, %d rounds, medians (seconds per VM, the creating tasks "
          "only; base image %d MiB of data)\n" % (result["rounds"], result["base_mib"]))
    print("| case | ours (resilient.virt.vm) | peer | ours / peer |")
    print("|---|---:|---:|---:|")
    rows = (("libvirt overlay on a base image", result["libvirt"], "ours_overlay",
             "peer_overlay", "virsh vol-create-as --backing-vol + virt define"),
            ("libvirt full copy of a base image", result["libvirt"], "ours_copy", "peer_copy",
             "virsh vol-clone + virt define"),
            ("vSphere clone of a template", result["vsphere"], "ours_clone", "peer_clone",
             "vmware.vmware.deploy_folder_template"))
    for label, found, ours, peer, how in rows:
        a, b = _median(found[ours]), _median(found[peer])
        print("| %s (peer: %s) | %.3f | %.3f | %.2fx |" % (label, how, a, b, a / b))
    print_targets(targets(result))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--lab-dir", default=os.environ.get("RESILIENT_VIRT_LAB_DIR",
                                                            os.path.join(ROOT, "lab", "run")))
    parser.add_argument("--hypervisor", default="hv2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base-mib", type=int, default=1024)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.base_mib = 3, 256
    return run_and_report("bench_images", run, print_report, args)


if __name__ == "__main__":
    sys.exit(main())
