# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of what users type, shared by every module and the inventory plugin, made before
anything is contacted.

* Names and keys (VM names, tags, metadata keys, a reservation's creator, a restore's target): a
  non-empty string of at most a given length, without control characters (NUL, tab, newline),
  invisible or direction-changing characters (U+200B, U+202E...: a name holding them looks like
  another one) or line and paragraph separators.
* Numbers (vCPUs, memory, disk sizes, counts): whole numbers within documented bounds, so that
  ``10**30`` or ``1e308`` is refused here rather than by a provider's parser.

``*_problem`` functions return what is wrong (None when nothing is), for callers that list every
problem at once; ``check_*`` raise InvalidSpec naming the field by its path; :class:`Problems`
gathers what several checks raise into one InvalidSpec.
"""
import math
import unicodedata

from ansible_collections.resilient.virt.plugins.module_utils._convert import to_int
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, field_error, field_errors

__all__ = ("MAX_NAME", "MAX_TEXT", "MAX_METADATA", "BOUNDS", "shown", "text_problem",
           "check_text", "int_problem", "check_int", "metadata_problems", "spec_problems",
           "Problems")

MAX_NAME = 255  # characters of a name or key (platforms allow fewer: libvirt 247 bytes, vSphere 80)
MAX_TEXT = 4096  # characters of a free text value (a metadata value, a reason)
MAX_METADATA = 256  # keys of one metadata dict
# (minimum, maximum) of the numbers users give; larger values are typing mistakes
BOUNDS = {
    "vcpus": (1, 4096),
    "memory_mb": (1, 16 * 1024 * 1024),  # 16 TiB
    "size_gb": (1, 1024 * 1024),  # 1 PiB
    "keep_last": (1, 10000),
    "max_attempts": (1, 100),
    "concurrency": (1, 1024),
    "provider_concurrency": (1, 1024),
    "round_size": (1, 100000),
    "max_prune": (0, 1000000),
    "max_vms_to_process": (0, 10000000),
    "max_changes": (0, 10000000),
}
_REFUSED = {
    "Cc": "a control character (such as a NUL byte, a tab or a newline)",
    "Cf": "an invisible or direction-changing character (such as U+200B or U+202E)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Cs": "a lone surrogate",
}


def shown(value, limit=40):
    """``value`` as messages show it: its repr, cut after ``limit`` characters."""
    if isinstance(value, str) and len(value) > limit:
        return "%r... (%d characters)" % (value[:limit], len(value))
    return repr(value)


def text_problem(value, max_length=MAX_NAME, what="a name"):
    """What is wrong with ``value`` as ``what`` (a non-empty string of at most ``max_length``
    characters, none of them refused), or None."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string (%s), not %s" % (what, shown(value))
    if len(value) > max_length:
        return "%s has %d characters; %s has at most %d" % (shown(value), len(value), what,
                                                            max_length)
    for position, char in enumerate(value):
        why = _REFUSED.get(unicodedata.category(char))
        if why:
            return ("%s contains %s, U+%04X at position %d; remove it (%s may hold letters, "
                    "digits, spaces and punctuation)" % (shown(value), why, ord(char), position,
                                                         what))
    return None


def check_text(value, path, max_length=MAX_NAME, what="a name"):
    """``value`` when :func:`text_problem` finds nothing; else InvalidSpec naming ``path``."""
    problem = text_problem(value, max_length, what)
    if problem:
        raise field_error(path, problem)
    return value


def int_problem(value, name, minimum=None, maximum=None):
    """(the whole number, None) or (None, what is wrong): ``value`` must be a whole number
    within ``BOUNDS[name]`` (or ``minimum``/``maximum`` when given)."""
    low, high = BOUNDS.get(name, (None, None))
    low = low if minimum is None else minimum
    high = high if maximum is None else maximum
    try:
        number = to_int(value)
    except ValueError:
        number = None
    if number is None or (low is not None and number < low) or (high is not None and number > high):
        return None, "must be a whole number from %s to %s, not %s" % (
            low, high, shown(value if not isinstance(value, int) or abs(value) < 10 ** 12
                             else "%.3g" % value))
    return number, None


def check_int(value, path, name=None, minimum=None, maximum=None):
    """``value`` as a whole number within bounds (see :func:`int_problem`); else InvalidSpec
    naming ``path``. ``name`` picks the bounds (default: the last part of ``path``)."""
    number, problem = int_problem(value, name or path.rsplit(".", 1)[-1], minimum, maximum)
    if problem:
        raise field_error(path, problem)
    return number


def metadata_problems(value, path):
    """[(path, message)]: ``value`` must be a dict of at most MAX_METADATA keys, each a name,
    each value a string (at most MAX_TEXT characters), a number, a boolean or null (which removes
    the key) - one level, no nesting."""
    if not isinstance(value, dict):
        return [(path, "must be a dict of key: value")]
    problems = []
    if len(value) > MAX_METADATA:
        problems.append((path, "has %d keys; at most %d" % (len(value), MAX_METADATA)))
    for key in sorted(value, key=str):
        where = "%s.%s" % (path, key) if isinstance(key, str) and len(key) <= MAX_NAME else path
        problem = text_problem(key, what="a metadata key")
        if problem:
            problems.append((where, problem))
            continue
        item = value[key]
        if isinstance(item, str):
            if len(item) > MAX_TEXT:
                problems.append((where, "has %d characters; a metadata value has at most %d"
                                 % (len(item), MAX_TEXT)))
        elif isinstance(item, (dict, list, tuple)):
            problems.append((where, "must be a string, a number, a boolean or null (metadata "
                             "has one level: no lists or dicts), not %s" % type(item).__name__))
        elif isinstance(item, float) and math.isnan(item):
            problems.append((where, "must be a number, not NaN"))
    return problems


def _path(prefix, field):
    return "%s.%s" % (prefix, field) if prefix else field


def spec_problems(spec, prefix=""):
    """[(path, message)] of the numbers, names and metadata of a VM spec (a dict with any of
    vcpus, memory_mb, disks, tags, metadata; None values are not given): ``prefix`` is the
    spec's own path (``vms[3]``), empty for a module's options."""
    problems = []
    for field in ("vcpus", "memory_mb"):
        if spec.get(field) is not None:
            problem = int_problem(spec[field], field)[1]
            if problem:
                problems.append((_path(prefix, field), problem))
    disks = spec.get("disks")
    if isinstance(disks, list):
        for index, disk in enumerate(disks):
            if isinstance(disk, dict) and disk.get("size_gb") is not None:
                problem = int_problem(disk["size_gb"], "size_gb")[1]
                if problem:
                    problems.append(("%s[%d].size_gb" % (_path(prefix, "disks"), index), problem))
    tags = spec.get("tags")
    if isinstance(tags, list):
        for index, tag in enumerate(tags):
            problem = text_problem(tag, what="a tag") if isinstance(tag, str) else None
            if problem:
                problems.append(("%s[%d]" % (_path(prefix, "tags"), index), problem))
    if spec.get("metadata") is not None:
        problems.extend(metadata_problems(spec["metadata"], _path(prefix, "metadata")))
    return problems


class Problems(list):
    """The problems found in a task's options (``{"path", "message"}`` dicts), raised together
    as one InvalidSpec by :meth:`raise_any`."""

    def check(self, path, test):
        """``test()``, or None with its problems kept when it raises InvalidSpec (under ``path``
        when it names none)."""
        try:
            return test()
        except InvalidSpec as err:
            self.extend((err.details or {}).get("errors") or [{"path": path, "message": err.message}])
        return None

    def raise_any(self):
        """Raise one InvalidSpec listing every problem, if there is any."""
        if self:
            raise field_errors(list(self))
