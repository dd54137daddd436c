"""The lab's simulator without its REST API (``-rest=false``): an endpoint like an ESXi host,
whose SOAP API answers and which has no vSphere Automation API (no tags)."""
import contextlib
import os
import subprocess
import time


@contextlib.contextmanager
def soap_only_simulator(binary, tmp_path):
    """A simulator (lab/vcsim's ``binary``) without the REST API (``-rest=false``), as an ESXi
    host: its provider settings while the block runs."""
    password = "esx-Pa55"
    url_file = tmp_path / "soap-only.url"
    proc = subprocess.Popen([binary, "-listen", "127.0.0.1:0", "-url-file", str(url_file),
                             "-username", "lab", "-rest=false", "-vm", "1"],
                            env=dict(os.environ, VCSIM_PASSWORD=password, TMPDIR=str(tmp_path)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 30
        while not url_file.exists():
            assert proc.poll() is None and time.monotonic() < end, "the simulator did not start"
            time.sleep(0.05)
        port = int(url_file.read_text().split(":")[2].split("/")[0])
        yield {"type": "vsphere", "name": "esx", "host": "127.0.0.1", "port": port,
               "protocol": "http", "username": "lab", "password": password}
    finally:
        proc.terminate()
        proc.wait(10)
