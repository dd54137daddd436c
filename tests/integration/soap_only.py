"""The lab's simulator without its REST API (``rest=False``): an endpoint like an ESXi host,
whose SOAP API answers and which has no vSphere Automation API (no tags); HTTPS with the lab CA,
as the lab's simulator."""
import contextlib

from own_simulator import BIN_DIR, vcsim


@contextlib.contextmanager
def soap_only_simulator(tmp_path):
    """A simulator of the test's own without the REST API, as an ESXi host (one VM per cluster),
    in ``tmp_path``: its provider settings (named ``esx``) while the block runs."""
    run_dir = str(tmp_path / "soap-only")
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, rest=False, vms=1)
    try:
        yield dict(settings, name="esx")
    finally:
        vcsim.stop(run_dir)
