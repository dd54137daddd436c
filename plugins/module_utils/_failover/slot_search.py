"""Choosing a VM's missing slots together, so an early choice does not strand a later one.

Joining the most shared reservation first gives the VM many sharers, and constraint 5 then rules
out every reservation those sharers hold; the VM's last slot may find no room. The search tries
the choices in preference order, depth first, and keeps the first sequence that covers all the
missing slots (or the longest one found).
"""

__all__ = ("search_slots", "BRANCH_LIMIT")

BRANCH_LIMIT = 8
"""Shared reservations offered per slot before the new-reservation option (bounds the search)."""


def search_slots(missing, options, apply, undo):
    """Longest sequence of at most ``missing`` options that can be applied one after another.

    ``options()`` yields the choices for the next slot given what is applied so far, best first;
    ``apply``/``undo`` change and restore that state. Everything is undone before returning.
    """
    best, chosen = [], []

    def extend():
        if len(chosen) > len(best):
            best[:] = chosen
        if len(chosen) == missing:
            return True
        if len(chosen) == missing - 1:
            for option in options():
                best[:] = chosen + [option]
                return True
            return False
        for option in options():
            apply(option)
            chosen.append(option)
            done = extend()
            chosen.pop()
            undo(option)
            if done:
                return True
        return False

    extend()
    return best
