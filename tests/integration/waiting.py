"""Waiting in a test for something it can observe, not for a time."""
import time

__all__ = ("wait_for",)


def wait_for(what, check, timeout, interval=0.1):
    """``check()``'s first true answer, asked every ``interval`` seconds; AssertionError naming
    ``what`` once ``timeout`` seconds passed without one."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(interval)
    raise AssertionError("waited %.0f s for %s" % (timeout, what))
