"""Make this checkout importable as ``ansible_collections.resilient.virt``, and the lab, for the benches.

The collection lives at the repository root; it is reached through a link under
``.build/collections`` (the same link the Makefile and the tests use).
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".build", "collections")
LAB_DIR = os.path.join(ROOT, "lab")


def use_checkout():
    """Create the link if needed and put ``.build/collections`` first on ``sys.path``, with
    ``lab/`` after it (so lab/lab.py and lab/vcsim.py import as ``lab`` and ``vcsim``)."""
    link = os.path.join(COLLECTIONS, "ansible_collections", "resilient", "virt")
    if not os.path.islink(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(ROOT, link)
    for path in (LAB_DIR, COLLECTIONS):
        if path not in sys.path:
            sys.path.insert(0, path)
