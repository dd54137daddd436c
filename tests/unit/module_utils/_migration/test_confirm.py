"""The grace and the second check before a fence, on a fake clock: the checks' answers are
scripted, and each check and sleep advances the clock by what it would take."""
from ansible_collections.resilient.virt.plugins.module_utils._migration.confirm import (
    Undecided, confirm_unreachable)


class FakeTime:
    """A clock that moves only when a check or a sleep takes time."""

    def __init__(self, start=1000.0, check_takes=0.5):
        self.now = start
        self.check_takes = check_takes
        self.checked_at = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        assert seconds >= 0
        self.now += seconds

    def checks(self, answers):
        """check(): the next of ``answers`` (None: it answered; an Undecided is raised), noted
        with when it began."""
        answers = iter(answers)

        def check():
            self.checked_at.append(self.now)
            self.now += self.check_takes
            answer = next(answers)
            if isinstance(answer, Undecided):
                raise answer
            return answer

        return check


def test_unreachable_through_the_grace_and_after_it_is_confirmed():
    fake = FakeTime()
    verdict = confirm_unreachable(fake.checks(["refused"] * 10), 1000.0, 10, 3, fake.clock,
                                  fake.sleep)
    assert verdict.reachable is False and verdict.error == "refused"
    assert fake.checked_at == [1000.0, 1003.5, 1007.0, 1010.0]  # the last at the grace's end
    assert verdict.checks == 4 and verdict.at == 1010.5


def test_one_answer_during_the_grace_is_a_flap():
    fake = FakeTime()
    verdict = confirm_unreachable(fake.checks(["refused", None, "refused"]), 1000.0, 10, 3,
                                  fake.clock, fake.sleep)
    assert verdict.reachable is True and verdict.error is None
    assert verdict.checks == 2 and verdict.at == 1004.0


def test_the_grace_counts_from_when_it_was_first_seen_unreachable():
    fake = FakeTime(start=1008.0)  # seen unreachable at 1000, the task starts 8 s later
    verdict = confirm_unreachable(fake.checks(["refused"] * 5), 1000.0, 10, 5, fake.clock,
                                  fake.sleep)
    assert fake.checked_at == [1008.0, 1010.0]
    assert verdict.reachable is False


def test_a_grace_long_past_still_takes_one_check_of_its_own():
    fake = FakeTime(start=5000.0)
    verdict = confirm_unreachable(fake.checks(["refused"]), 1000.0, 30, 5, fake.clock, fake.sleep)
    assert verdict.reachable is False and fake.checked_at == [5000.0]
    fake = FakeTime(start=5000.0)
    assert confirm_unreachable(fake.checks([None]), 1000.0, 30, 5, fake.clock, fake.sleep).reachable


def test_a_check_begun_before_the_end_does_not_confirm_though_it_ends_after():
    fake = FakeTime(check_takes=4.0)  # a hanging connect, abandoned after its time limit
    verdict = confirm_unreachable(fake.checks(["no answer"] * 5), 1000.0, 3, 1, fake.clock,
                                  fake.sleep)
    assert fake.checked_at == [1000.0, 1004.0]  # the first ended at 1004, past the end at 1003
    assert verdict.reachable is False and verdict.checks == 2


def test_a_manager_that_does_not_answer_the_last_check_leaves_the_verdict_unknown():
    fake = FakeTime()
    vcenter_gone = Undecided("vsphere:vc1 could not be asked: Unavailable: refused")
    verdict = confirm_unreachable(fake.checks(["esx1 notResponding"] * 3 + [vcenter_gone]),
                                  1000.0, 10, 3, fake.clock, fake.sleep)
    assert verdict.reachable is None and verdict.error == vcenter_gone.why
    fake = FakeTime()  # undecided during the grace, answered by the manager at its end
    verdict = confirm_unreachable(fake.checks([vcenter_gone] * 3 + ["esx1 notResponding"]),
                                  1000.0, 10, 3, fake.clock, fake.sleep)
    assert verdict.reachable is False and verdict.checks == 4
