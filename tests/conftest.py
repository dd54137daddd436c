"""Make the repository importable as ``ansible_collections.resilient.virt``.

The collection lives at the repository root, so tests reach it through a link under
``.build/collections`` (ignored by git). ``ANSIBLE_COLLECTIONS_PATH`` points there too, so
``ansible-playbook`` started by a test finds the same code.
"""
import os
import sys

from paths import COLLECTIONS, ROOT


def _link_collection():
    ns_dir = os.path.join(COLLECTIONS, "ansible_collections", "resilient")
    link = os.path.join(ns_dir, "virt")
    os.makedirs(ns_dir, exist_ok=True)
    if not os.path.islink(link):
        try:
            os.symlink(ROOT, link)
        except FileExistsError:
            pass


_link_collection()
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
os.environ["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS + os.pathsep + os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")
