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


def pytest_sessionfinish(session, exitstatus):
    """A skipped test is a failed run: what a test needs, `make deps` installs.

    A skip that is intended says so: its reason starts with "intended:".
    """
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus != 0:
        return
    unintended = [report for report in reporter.stats.get("skipped", [])
                  if not str(report.longrepr[-1] if isinstance(report.longrepr, tuple)
                             else report.longrepr).startswith("Skipped: intended:")]
    if unintended:
        reporter.write_line("\n%d test(s) skipped without an intended reason; the run fails"
                            % len(unintended), red=True)
        session.exitstatus = 1
