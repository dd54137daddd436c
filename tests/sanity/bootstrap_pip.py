# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the get-pip.py that ansible-test bootstraps its virtual environments with.

ansible-test downloads get-pip.py from its own file host, which machines limited to package
registries cannot reach. It uses a copy in its cache when one is there, so `make sanity` puts
this file there: it installs pip from the wheel bundled with Python (ensurepip), then installs the
packages ansible-test asked for (such as a pinned pip) from the package index.
"""


import subprocess
import sys

GET_PIP_ONLY = ("--no-setuptools", "--no-wheel")


def main():
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
    arguments = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY]
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + arguments)


if __name__ == "__main__":
    main()
