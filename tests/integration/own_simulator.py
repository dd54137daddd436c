"""What a test needs to run a vSphere simulator of its own: ``vcsim`` (lab/vcsim.py) and
``BIN_DIR``, where the lab keeps the simulator binary (built once, shared). Importing it fails
the test with the fix when Go is missing."""
import importlib
import os
import shutil

import pytest

if shutil.which("go") is None:
    pytest.fail("needs golang-go and golang-github-vmware-govmomi-dev to build the simulator "
                "(run `make deps`)", pytrace=False)

vcsim = importlib.import_module("vcsim")  # lab/ is on sys.path (conftest.py)
BIN_DIR = os.path.join(os.environ.get("RESILIENT_VIRT_LAB_DIR") or vcsim.DEFAULT_RUN_DIR,
                       "vcsim", "bin")
