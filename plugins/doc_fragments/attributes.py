# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Attributes every resilient.virt module shares; a module adds what is particular to it."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: Runs in check mode and reports what it would change, without changing anything.
  diff_mode:
    support: full
    description: Shows what changed (or, in check mode, would change) with C(--diff).
"""
