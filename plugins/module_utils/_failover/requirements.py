# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How many failover slots a flavor needs: glob patterns mapped to counts, checked against what
the fleet can give."""
import functools
import re

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error

__all__ = ("validate_requirements", "required_count", "MAX_REQUIRED", "check_requirements_met",
           "glob_regex")


# -- How many failover slots a flavor needs: glob patterns mapped to counts.
# Patterns follow shell globbing as in Go's ``filepath.Match``: ``*`` matches any run of characters
# except ``/``, ``?`` one character except ``/``, ``[a-z]``/``[^a-z]`` a class, ``\`` escapes. When
# several patterns match, the highest count wins; an empty flavor name needs nothing.

@functools.lru_cache(maxsize=1024)
def _compile(pattern):
    out = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "\\":
            if i + 1 == n:
                raise ValueError("ends with a lone backslash")
            i += 1
            out.append(re.escape(pattern[i]))
        elif char == "[":
            i, klass = _char_class(pattern, i + 1)
            out.append(klass)
            continue
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_regex(pattern):
    """The compiled regex of ``pattern`` (the globbing above); ValueError saying what is wrong."""
    return _compile(pattern)


def _char_class(pattern, i):
    """Translate a class starting after '['; returns (index after ']', regex)."""
    n = len(pattern)
    negate = i < n and pattern[i] == "^"
    if negate:
        i += 1
    ranges = []
    while True:
        if i >= n:
            raise ValueError("has an unclosed '['")
        if pattern[i] == "]" and ranges:
            return i + 1, "[%s%s]" % ("^" if negate else "", "".join(ranges))
        i, low = _class_char(pattern, i)
        if i < n and pattern[i] == "-":
            i, high = _class_char(pattern, i + 1)
            if high < low:
                raise ValueError("has a reversed range %s-%s" % (low, high))
            ranges.append("%s-%s" % (re.escape(low), re.escape(high)))
        else:
            ranges.append(re.escape(low))


def _class_char(pattern, i):
    if i >= len(pattern) or pattern[i] in "-]":
        raise ValueError("has an empty or malformed character class")
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            raise ValueError("ends with a lone backslash")
    return i + 1, pattern[i]


MAX_REQUIRED = 100
"""The most slots a requirement may give a VM: surviving 100 hypervisor failures at once is far
beyond any failover plan, and the slot search, one level of recursion per slot, stays far from
Python's recursion limit."""


def validate_requirements(requirements, path="requirements"):
    """Checked copy of ``{pattern: count}``; InvalidSpec names the bad pattern and the fix. A
    count is a whole number from 0 to MAX_REQUIRED."""
    if requirements is None:
        return {}
    if not isinstance(requirements, dict):
        raise field_error(path, "must be a mapping of flavor pattern to count, e.g. {'hana_*': 2, '*': 1}")
    out = {}
    for pattern, count in requirements.items():
        where = "%s[%r]" % (path, pattern)
        if not isinstance(pattern, str) or not pattern:
            raise field_error(where, "the flavor pattern must be a non-empty string")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise field_error(where, "the count must be a whole number >= 0, got %r" % (count,))
        if count > MAX_REQUIRED:
            raise field_error(where, "the count %d is more than the %d slots a VM may require: it "
                              "is how many hypervisor failures the VM survives; give at most %d"
                              % (count, MAX_REQUIRED, MAX_REQUIRED))
        try:
            _compile(pattern)
        except ValueError as exc:
            raise field_error(where, "the pattern %s; use *, ?, [a-z] or escape with \\" % exc) from exc
        out[pattern] = count
    return out


def check_requirements_met(requirements, hypervisors, vms, path="requirements"):
    """InvalidSpec naming the pattern whose count a VM of ``vms`` could never hold: more slots
    than the fleet has ``hypervisors`` besides its own (rules 1 and 2). Fewer hypervisors of its
    zone, or with its traits, leave the VM short in the plan with ``why`` instead: a small zone
    is part of the fleet, and the plan says what it lacks. The patterns are checked in order."""
    names = {hv.name for hv in hypervisors}
    others = {False: len(names), True: len(names) - 1}  # by: the VM's host is one of them
    for pattern, count in requirements.items():
        for vm in vms:
            if count > others[vm.host in names] and required_count(vm.flavor, requirements) == count \
                    and _compile(pattern).match(vm.flavor):
                raise field_error(
                    "%s[%r]" % (path, pattern),
                    "VM %s (flavor %r) requires %d slots, but a VM's slots are on distinct "
                    "hypervisors other than its own (rules 1 and 2) and the fleet has %d besides "
                    "%s; give at most %d, or add hypervisors"
                    % (vm.uuid, vm.flavor, count, others[vm.host in names], vm.host,
                       others[vm.host in names]))
    return requirements


def required_count(flavor, requirements):
    """Highest count among patterns matching ``flavor``; 0 for no match or an empty flavor."""
    if not flavor:
        return 0
    best = 0
    for pattern, count in requirements.items():
        if count > best and _compile(pattern).match(flavor):
            best = count
    return best
