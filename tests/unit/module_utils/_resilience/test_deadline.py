"""Deadline arithmetic and abandoning hung calls."""
import os
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import Deadline, run_with_timeout
from ansible_collections.resilient.virt.plugins.module_utils.errors import Timeout

from paths import COLLECTIONS


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_unbounded_deadline():
    d = Deadline.after(None)
    assert d.at is None and d.remaining() is None and not d.expired()
    assert d.cap(5) == 5.0 and d.cap(None) is None


def test_bounded_deadline_on_given_clock():
    clock = Clock()
    d = Deadline.after(10, clock=clock)
    assert d.at == 110.0 and d.remaining() == 10.0 and not d.expired()
    assert d.cap(30) == 10.0 and d.cap(4) == 4.0 and d.cap(None) == 10.0
    clock.t = 109.5
    assert d.remaining() == 0.5
    clock.t = 110.0
    assert d.expired() and d.remaining() == 0.0
    clock.t = 200.0
    assert d.remaining() == 0.0 and d.cap(3) == 0.0


def test_default_clock_is_monotonic():
    d = Deadline.after(60)
    assert 59 < d.remaining() <= 60
    assert abs(d.at - (time.monotonic() + 60)) < 1


def test_returns_value_and_runs_in_daemon_thread():
    seen = {}

    def fn():
        seen["thread"] = threading.current_thread()
        return 42
    assert run_with_timeout(fn, 5, "describe vm1") == 42
    assert seen["thread"] is not threading.main_thread()
    assert seen["thread"].daemon


def test_exception_propagates_unchanged():
    boom = KeyError("missing")

    def fn():
        raise boom
    with pytest.raises(KeyError) as info:
        run_with_timeout(fn, 5, "x")
    assert info.value is boom


@pytest.mark.parametrize("hang", [lambda: threading.Event().wait(), lambda: time.sleep(1000)],
                         ids=["event-wait", "sleep"])
def test_hung_call_raises_timeout_in_time(hang):
    start = time.monotonic()
    with pytest.raises(Timeout) as info:
        run_with_timeout(hang, 0.3, "libvirt list domains")
    elapsed = time.monotonic() - start
    assert 0.3 <= elapsed < 0.3 + 2
    assert str(info.value) == "libvirt list domains did not answer within 0.3s"
    assert info.value.retryable
    abandoned = [t for t in threading.enumerate() if t.name == "resilient-virt:libvirt list domains"]
    assert abandoned and all(t.daemon for t in abandoned)


def test_none_runs_inline_and_no_time_left_does_not_call():
    assert run_with_timeout(threading.current_thread, None, "x") is threading.current_thread()
    called = []
    with pytest.raises(Timeout, match="no time left"):
        run_with_timeout(lambda: called.append(1), 0, "create vm1")
    assert called == []


def test_process_exits_despite_abandoned_thread():
    code = ("import threading\n"
            "from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline "
            "import run_with_timeout\n"
            "from ansible_collections.resilient.virt.plugins.module_utils.errors import Timeout\n"
            "try:\n"
            "    run_with_timeout(lambda: threading.Event().wait(), 0.2, 'hang')\n"
            "except Timeout as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, timeout=20, capture_output=True,
                         text=True, env=dict(os.environ, PYTHONPATH=os.path.abspath(COLLECTIONS)))
    assert out.stdout.strip() == "hang did not answer within 0.2s"
