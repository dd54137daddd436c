"""How many failover slots a flavor needs: glob patterns mapped to counts.

Patterns follow shell globbing as in Go's ``filepath.Match``: ``*`` matches any run of characters
except ``/``, ``?`` one character except ``/``, ``[a-z]``/``[^a-z]`` a class, ``\\`` escapes. When
several patterns match, the highest count wins; an empty flavor name needs nothing.
"""
import functools
import re

from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec

__all__ = ("validate_requirements", "required_count")


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


def validate_requirements(requirements, path="requirements"):
    """Checked copy of ``{pattern: count}``; InvalidSpec names the bad pattern and the fix."""
    if requirements is None:
        return {}
    if not isinstance(requirements, dict):
        raise InvalidSpec("%s: must be a mapping of flavor pattern to count, e.g. {'hana_*': 2, '*': 1}"
                          % path)
    out = {}
    for pattern, count in requirements.items():
        where = "%s[%r]" % (path, pattern)
        if not isinstance(pattern, str) or not pattern:
            raise InvalidSpec("%s: the flavor pattern must be a non-empty string" % where)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidSpec("%s: the count must be a whole number >= 0, got %r" % (where, count))
        try:
            _compile(pattern)
        except ValueError as exc:
            raise InvalidSpec("%s: the pattern %s; use *, ?, [a-z] or escape with \\" % (where, exc))
        out[pattern] = count
    return out


def required_count(flavor, requirements):
    """Highest count among patterns matching ``flavor``; 0 for no match or an empty flavor."""
    if not flavor:
        return 0
    best = 0
    for pattern, count in requirements.items():
        if count > best and _compile(pattern).match(flavor):
            best = count
    return best
