"""The retry loop (real tenacity); a fake clock replaces only time and sleep."""
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from ansible_collections.resilient.virt.plugins.module_utils import errors as E
from ansible_collections.resilient.virt.plugins.module_utils._resilience.deadline import Deadline
from ansible_collections.resilient.virt.plugins.module_utils._resilience.retry import (
    Attempt, backoff_delay, run_with_retry)

from paths import COLLECTIONS


class FakeClock:
    """Monotonic time that only moves when someone sleeps (or the test says so)."""

    def __init__(self):
        self.t = 1000.0
        self.sleeps = []

    def __call__(self):
        return self.t

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.t += seconds


class Script:
    """fn(attempt) that raises the scripted errors in turn, then returns "ok"."""

    def __init__(self, *outcomes, clock=None, cost=0.0):
        self.outcomes = list(outcomes)
        self.attempts = []
        self.clock = clock
        self.cost = cost

    def __call__(self, attempt):
        self.attempts.append((attempt.number, attempt.is_last, attempt.at_deadline,
                              self.clock() if self.clock else None))
        if self.clock:
            self.clock.t += self.cost
        if not self.outcomes:
            return "ok"
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def settings(max_attempts=5, base=1.0, cap=30.0, mult=2.0):
    return SimpleNamespace(max_attempts=max_attempts, base_delay=base, max_delay=cap, multiplier=mult)


def test_success_first_time_calls_once():
    clock = FakeClock()
    fn = Script("done")
    assert run_with_retry(fn, settings(), sleep=clock.sleep) == "done"
    assert fn.attempts == [(1, False, False, None)] and clock.sleeps == []


def test_attempt_numbering_and_is_last():
    clock = FakeClock()
    fn = Script(E.Unavailable("a"), E.Timeout("b"), E.Unavailable("c"))
    assert run_with_retry(fn, settings(max_attempts=4), sleep=clock.sleep) == "ok"
    assert [(n, last) for n, last, at_deadline, when in fn.attempts] == [(1, False), (2, False), (3, False), (4, True)]
    assert len(clock.sleeps) == 3


def test_exhausted_attempts_raise_last_error_with_attempt_count():
    clock = FakeClock()
    errs = [E.Unavailable("down %d" % i) for i in range(3)]
    with pytest.raises(E.Unavailable) as info:
        run_with_retry(Script(*errs), settings(max_attempts=3), sleep=clock.sleep)
    assert info.value is errs[2]
    assert info.value.details == {"attempts": 3}
    assert len(clock.sleeps) == 2


@pytest.mark.parametrize("err", [E.NotFound("nope"), E.InvalidSpec("bad"), E.Conflict("busy"),
                                 E.Unauthorized("who"), E.BreakerOpen("libvirt:lab1", 0.0)])
def test_non_retryable_and_breaker_open_raise_at_once(err):
    clock = FakeClock()
    fn = Script(err)
    with pytest.raises(type(err)) as info:
        run_with_retry(fn, settings(), sleep=clock.sleep)
    assert info.value is err and len(fn.attempts) == 1 and clock.sleeps == []
    assert info.value.details["attempts"] == 1


def test_library_failure_is_retried_and_raised_classified_with_cause():
    clock = FakeClock()
    originals = [ConnectionRefusedError(111, "refused"), ConnectionResetError(104, "reset")]
    fn = Script(*originals)
    with pytest.raises(E.Unavailable) as info:
        run_with_retry(fn, settings(max_attempts=2), sleep=clock.sleep)
    assert info.value.cause is originals[1] and info.value.__cause__ is originals[1]
    assert info.value.details == {"attempts": 2} and len(fn.attempts) == 2


def test_unknown_failure_is_internal_and_not_retried():
    bug = ZeroDivisionError("division by zero")
    fn = Script(bug)
    with pytest.raises(E.Internal) as info:
        run_with_retry(fn, settings(), sleep=FakeClock().sleep)
    assert info.value.cause is bug and len(fn.attempts) == 1


def test_wrapped_error_is_recognised():
    def fn(attempt):
        try:
            raise E.Timeout("slow")
        except E.Timeout as exc:
            raise RuntimeError("library wrapper") from exc
    clock = FakeClock()
    with pytest.raises(E.Timeout) as info:
        run_with_retry(fn, settings(max_attempts=3), sleep=clock.sleep)
    assert info.value.details["attempts"] == 3 and len(clock.sleeps) == 2


def test_plugged_classifier_makes_backend_error_retryable():
    class Fault(Exception):
        pass
    fn = Script(Fault("HostCommunication"))

    def classify(exc):
        return E.Unavailable("host unreachable") if isinstance(exc, Fault) else None
    assert run_with_retry(fn, settings(), sleep=FakeClock().sleep, classifiers=[classify]) == "ok"
    assert len(fn.attempts) == 2


def test_base_exceptions_propagate_untouched():
    fn = Script(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run_with_retry(fn, settings(), sleep=FakeClock().sleep)
    assert len(fn.attempts) == 1


def test_delays_grow_exponentially_capped_with_at_most_ten_percent_jitter():
    seen_jitter = False
    for _dummy in range(30):
        clock = FakeClock()
        fn = Script(*[E.Unavailable("x")] * 6)
        run_with_retry(fn, settings(max_attempts=7, base=1.0, cap=5.0, mult=2.0), sleep=clock.sleep)
        expected = [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
        assert len(clock.sleeps) == 6
        for got, want in zip(clock.sleeps, expected):
            assert want <= got <= want * 1.1
            seen_jitter = seen_jitter or got > want
    assert seen_jitter


def test_backoff_delay_formula_and_overflow():
    s = settings(base=0.5, cap=30.0, mult=3.0)
    assert [backoff_delay(n, s) for n in (1, 2, 3, 4, 5)] == [0.5, 1.5, 4.5, 13.5, 30.0]
    assert backoff_delay(5000, s) == 30.0


def test_retry_after_is_honoured():
    clock = FakeClock()
    fn = Script(E.RateLimit("slow down", retry_after=7), E.RateLimit("again", retry_after=0.01))
    run_with_retry(fn, settings(base=0.1, mult=2.0), sleep=clock.sleep)
    assert clock.sleeps[0] == 7.0
    assert 0.2 <= clock.sleeps[1] <= 0.22


def test_on_retry_sees_failed_attempt_error_and_delay():
    clock = FakeClock()
    calls = []
    fn = Script(ConnectionResetError(104, "reset"))
    run_with_retry(fn, settings(), sleep=clock.sleep,
                   on_retry=lambda a, err, delay: calls.append((a.number, type(err), delay)))
    assert calls == [(1, E.Unavailable, clock.sleeps[0])]


def test_deadline_last_attempt_is_made_at_the_deadline():
    clock = FakeClock()
    deadline = Deadline.after(10, clock=clock)
    budgets = []

    def fn(attempt):
        budgets.append((attempt.number, clock(), attempt.is_last, attempt.at_deadline,
                        attempt.budget(30.0), attempt.deadline is deadline))
        raise E.Unavailable("down")
    with pytest.raises(E.Unavailable) as info:
        run_with_retry(fn, settings(max_attempts=10, base=4.0, mult=2.0), deadline=deadline,
                       sleep=clock.sleep)
    assert info.value.details["attempts"] == 3
    (n1, t1, last1, at1, b1, same1), (n2, t2, last2, at2, b2, same2), (n3, t3, last3, at3, b3, same3) = budgets
    assert (n1, t1, last1, at1, b1, same1) == (1, 1000.0, False, False, 10.0, True)
    assert n2 == 2 and 1004.0 <= t2 <= 1004.4 and not last2 and not at2 and b2 == pytest.approx(1010 - t2)
    assert (n3, t3, last3, at3, b3) == (3, 1010.0, True, True, 30.0)
    assert sum(clock.sleeps) == pytest.approx(10.0)


def test_deadline_retry_after_beyond_deadline_still_gets_one_final_attempt():
    clock = FakeClock()
    fn = Script(E.RateLimit("429", retry_after=60), clock=clock)
    assert run_with_retry(fn, settings(), deadline=Deadline.after(5, clock=clock),
                          sleep=clock.sleep) == "ok"
    assert clock.sleeps == [5.0]
    assert fn.attempts[-1] == (2, True, True, 1005.0)


def test_no_time_left_raises_last_error_without_sleeping():
    clock = FakeClock()
    fn = Script(E.Timeout("t1"), clock=clock, cost=12.0)
    with pytest.raises(E.Timeout) as info:
        run_with_retry(fn, settings(), deadline=Deadline.after(10, clock=clock), sleep=clock.sleep)
    assert info.value.details["attempts"] == 1 and clock.sleeps == []


def test_expired_deadline_still_makes_one_attempt_marked_last():
    clock = FakeClock()
    fn = Script(E.Unavailable("x"))
    with pytest.raises(E.Unavailable):
        run_with_retry(fn, settings(), deadline=Deadline.after(0, clock=clock), sleep=clock.sleep)
    assert fn.attempts == [(1, True, False, None)]


def test_single_attempt_setting_never_sleeps():
    fn = Script(E.Unavailable("x"))
    with pytest.raises(E.Unavailable):
        run_with_retry(fn, settings(max_attempts=1), sleep=FakeClock().sleep)
    assert fn.attempts == [(1, True, False, None)]


def test_real_sleep_by_default():
    fn = Script(E.Unavailable("x"))
    assert run_with_retry(fn, settings(base=0.01)) == "ok"
    assert len(fn.attempts) == 2


def test_attempt_budget_outside_deadline():
    a = Attempt(1, False, Deadline())
    assert a.budget(30.0) == 30.0 and a.budget(None) is None


def test_importing_core_modules_loads_no_heavy_library():
    code = ("import sys\n"
            "from ansible_collections.resilient.virt.plugins.module_utils import errors, _conditions\n"
            "from ansible_collections.resilient.virt.plugins.module_utils._resilience import "
            "deadline, settings, retry\n"
            "heavy = ('tenacity', 'requests', 'urllib3', 'pluggy', 'jsonschema', 'redis', "
            "'libvirt', 'pyVmomi', 'sqlite3', 'difflib', 'email.utils')\n"
            "bad = [m for m in heavy if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True,
                   env=dict(os.environ, PYTHONPATH=os.path.abspath(COLLECTIONS)))
