# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The grace and the second check before a hypervisor is fenced (docs/ha.md#confirm).

:func:`confirm_unreachable` checks the hypervisor every ``interval`` seconds until ``grace``
seconds have passed since it was first seen unreachable: only when every check failed, the
last one begun at or after the end of the grace, is it confirmed unreachable. The first
check that finds it answering ends the wait: a flap. A check that could not ask (a vSphere
host's vCenter did not answer: :class:`Undecided`) tells neither; when the last check is one,
the verdict is unknown, and nothing may be fenced on it. The clock and the sleep are given, so
the rule is tested without waiting.
"""
from collections import namedtuple

__all__ = ("Undecided", "Verdict", "confirm_unreachable")


class Undecided(Exception):
    """A check that could not ask whether the hypervisor answers; ``why``: a text."""

    def __init__(self, why):
        super().__init__(why)
        self.why = why


# reachable: the last check's answer (None: unknown, the last check was undecided); at: when it
# ended (epoch seconds); error: why the last check failed (None when it answered); checks: how
# many were made
Verdict = namedtuple("Verdict", "reachable at error checks")


def confirm_unreachable(check, since, grace, interval, clock, sleep):
    """The :class:`Verdict` on a hypervisor unreachable since ``since`` (epoch seconds).

    ``check()`` returns None when the hypervisor answered, else why not (a text), or raises
    :class:`Undecided`; ``clock()`` gives the time, ``sleep(seconds)`` waits.
    """
    end = since + grace
    checks = 0
    while True:
        begun = clock()
        try:
            error, known = check(), True
        except Undecided as undecided:
            error, known = undecided.why, False
        checks += 1
        now = clock()
        if error is None:
            return Verdict(True, now, None, checks)
        if begun >= end:
            return Verdict(False if known else None, now, error, checks)
        sleep(max(0.0, min(interval, end - now)))
