"""A retried changing call never starts the work again while an earlier attempt may still do it.

The work here is the test's own: a function that counts how often it was called and how often
it finished (the oracle), slower than the attempt's time limit, or one that records a handle of
an operation whose state the test's own table answers.
"""
import threading
import time

import pytest

from ansible_collections.resilient.virt.plugins.module_utils._resilience.inflight import (
    InFlight, record_started)
from ansible_collections.resilient.virt.plugins.module_utils._resilience.policy import Policy
from ansible_collections.resilient.virt.plugins.module_utils._resilience.settings import resolve_settings
from ansible_collections.resilient.virt.plugins.module_utils.errors import Internal, Timeout

LIMIT = 0.3  # timeout_mutating of every call here


@pytest.fixture
def store(sqlite_url):
    """What is followed lives in the call, not the store: SQLite alone is enough here."""
    from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

    opened = open_store(sqlite_url)
    yield opened
    opened.close()


def _policy(store, hooks=None, **option):
    option = dict({"base_delay": "10ms", "max_delay": "20ms", "timeout_mutating": LIMIT,
                   "failure_threshold": 100}, **option)
    return Policy(store, "lab:1", resolve_settings(option, environ={}), hooks=hooks)


class SlowWork:
    """Takes ``seconds`` and then leaves ``made`` one item more; counts calls and endings."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.calls = 0
        self.made = []
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            self.calls += 1
        time.sleep(self.seconds)
        with self.lock:
            self.made.append("vm")
        return "made"

    def look(self):
        with self.lock:
            return bool(self.made), ("found" if self.made else None)


def test_a_retry_waits_for_the_abandoned_attempt_and_finds_its_work(store):
    work = SlowWork(LIMIT * 2.5)
    policy = _policy(store, max_attempts=5)
    assert policy.call(work, "mutating", "create", look=work.look) == "found"
    assert work.calls == 1 and work.made == ["vm"]


def test_a_retry_whose_time_runs_out_first_starts_nothing_and_says_so(store):
    work = SlowWork(LIMIT * 8)
    policy = _policy(store, max_attempts=3)
    with pytest.raises(Timeout) as info:
        policy.call(work, "mutating", "create", look=work.look)
    assert work.calls == 1
    message = info.value.message
    assert "still going on" in message and "not started again" in message, message
    assert "attempt 1" in message, message
    assert info.value.details["in_progress"] is True
    time.sleep(LIMIT * 8)  # the first attempt ends; nothing abandoned starts the work after it
    assert work.calls == 1 and work.made == ["vm"]


def test_without_a_look_the_retry_waits_for_the_first_to_end_before_its_own(store):
    running, overlaps, calls = [], [], []

    def change():
        calls.append(1)
        overlaps.append(len(running))
        running.append(1)
        try:
            time.sleep(LIMIT * 2.5 if len(calls) == 1 else 0)
        finally:
            running.pop()
        return "changed"

    policy = _policy(store, max_attempts=5)
    assert policy.call(change, "mutating", "change") == "changed"
    assert len(calls) == 2 and overlaps == [0, 0]  # the second began once the first had ended


def test_reads_are_not_held_up_by_an_abandoned_read(store):
    calls = []

    def read():
        calls.append(time.monotonic())
        if len(calls) == 1:
            time.sleep(LIMIT * 10)
        return "answer"

    policy = _policy(store, max_attempts=3, timeout_describe=LIMIT)
    began = time.monotonic()
    assert policy.call(read, "describe", "list") == "answer"
    assert len(calls) == 2 and calls[1] - began < LIMIT * 5


class Tasks:
    """Hooks whose ``status`` answers from the test's table of operation states."""

    def __init__(self):
        self.states = {}
        self.asked = []

    def status(self, handle):
        self.asked.append(handle)
        state = self.states[handle]
        return state() if callable(state) else state


def _after(seconds, then, meanwhile="running"):
    at = time.monotonic() + seconds
    return lambda: then if time.monotonic() >= at else meanwhile


def test_a_recorded_operation_is_followed_until_it_succeeds(store):
    """The attempt starts a task and gives up on its own (its answer lost); the task is still
    running, so the retry polls it and then looks, and never starts a second one."""
    tasks = Tasks()
    started = []

    def create():
        started.append("task-%d" % len(started))
        record_started(started[-1])
        tasks.states[started[-1]] = _after(LIMIT * 3, "success")
        raise Internal("the answer was lost")  # not retryable by itself: see below

    def made():
        return tasks.states[started[0]]() == "success", "found"

    policy = _policy(store, hooks=tasks, max_attempts=6)
    retried = Timeout("the backend's own wait ran out")

    def attempt():
        try:
            return create()
        except Internal:
            raise retried from None

    assert policy.call(attempt, "mutating", "create", look=made) == "found"
    assert started == ["task-0"] and set(tasks.asked) == {"task-0"}


def test_a_recorded_operation_that_failed_lets_the_retry_start_again(store):
    tasks = Tasks()
    started = []

    def create():
        started.append("task-%d" % len(started))
        record_started(started[-1])
        if len(started) == 1:
            tasks.states[started[-1]] = _after(LIMIT * 2, "error")
            time.sleep(LIMIT * 4)  # abandoned while its task runs, then fails
            raise Internal("unreachable: abandoned")
        tasks.states[started[-1]] = "success"
        return "made"

    policy = _policy(store, hooks=tasks, max_attempts=6)
    assert policy.call(create, "mutating", "create", look=lambda: (False, None)) == "made"
    assert started == ["task-0", "task-1"]


def test_handles_are_kept_per_attempt_only_inside_an_attempt():
    record_started("task-outside")  # outside any attempt: nothing to record it on
    flight = InFlight()
    first = flight.start(1)
    thread = threading.Thread(target=lambda: (first.begin(), first.enter(),
                                              record_started("task-1"), first.end()))
    thread.start()
    thread.join()
    assert first.handles == ["task-1"] and first.ended.is_set()
    second = flight.start(2)
    second.begin()
    try:
        flight.settle(second, sleep=lambda s: pytest.fail("nothing to wait for"))
    finally:
        second.end()
