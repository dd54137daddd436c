"""The lab's run directory: its small state files (a pid, a URL, a password) and the state of the
processes they name. Shared by lab.py, vcsim.py and pvesim.py."""
import os


def read_text(path):
    """The stripped text of ``path``, None when it does not exist."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except FileNotFoundError:
        return None


def write_private(path, text):
    """Write ``text`` to ``path`` (mode 0600) at once: a reader sees the old file or the new."""
    fd = os.open(path + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(path + ".new", path)


def process_state(pid):
    """The one-letter state of ``pid`` ("R", "S", "T", "Z"...), None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
