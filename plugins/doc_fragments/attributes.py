# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Attributes every resilient.virt module shares (a module adds what is particular to it), and
the option that decides where its task runs."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  in_process:
    description:
      - "Run the task inside the controller's worker process, with no module process, when the
        task runs on the controller - a local connection (C(connection: local),
        C(delegate_to: localhost)), no C(become), no C(async), a task C(environment) that sets
        only C(RESILIENT_VIRT_*) variables, and the libraries the task needs importable by the
        controller's Python. Otherwise the module runs as a module process, like any module."
      - V(false) always uses a module process. The result is the same either way; a task in the
        worker skips the module process's start-up (see the collection's docs/execution.md).
      - When not set, the environment variable C(RESILIENT_VIRT_IN_PROCESS) on the controller (or
        in the task's C(environment)) decides; unset means V(true).
    type: bool
attributes:
  action:
    support: full
    description: An action plugin runs the module inside the controller's worker when it can (O(in_process)).
  check_mode:
    support: full
    description: Runs in check mode and reports what it would change, without changing anything.
  diff_mode:
    support: full
    description: Shows what changed (or, in check mode, would change) with C(--diff).
"""
