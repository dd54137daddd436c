"""A pytest plugin of the mutation run: writes the node id of the first test that fails (or
errors) to the file named by RESILIENT_VIRT_FIRST_FAILED, exactly as pytest names it."""
import os

FILE_ENV = "RESILIENT_VIRT_FIRST_FAILED"


def pytest_runtest_logreport(report):
    path = os.environ.get(FILE_ENV)
    if path and report.failed and not os.path.exists(path):
        with open(path, "w") as handle:
            handle.write(report.nodeid)
