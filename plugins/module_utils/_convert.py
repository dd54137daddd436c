# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values as users type them (in YAML, in environment variables), converted and checked.

``to_int``, ``to_float`` and ``to_bool`` raise ValueError saying what is expected, for callers
that name the setting; :func:`parse_duration` raises InvalidSpec naming it itself. The resilience
settings and the provider options both convert through these.
"""
import math
import re

from ansible_collections.resilient.virt.plugins.module_utils.errors import field_error

__all__ = ("to_int", "to_float", "to_bool", "parse_duration", "format_duration", "MAX_DURATION",
           "PATTERNS")

MAX_DURATION = 7 * 24 * 3600.0  # longer waits and limits are mistakes (and overflow clocks)
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")
# patterns compiled (and cached by re) on first use: most tasks convert few values; PATTERNS
# are compiled ahead by a controller that preloads the collection (plugin_utils._in_process)
_INTEGER = r"^\s*[-+]?\d+\s*$"
_DURATION = r"(?i)^(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?$"
PATTERNS = (_INTEGER, _DURATION)
_UNIT = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_HELP = ("use seconds (30, 1.5) or a number with unit ms, s, m, h or d (250ms, 30s, 4m, "
                  "1h, 7d)")


def to_int(value):
    """A whole number from an int, a float without fraction or a string of digits."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.match(_INTEGER, value):
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number")
    return value


def to_float(value):
    """A finite number from an int, a float or a numeric string."""
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            pass
    if number is None or not math.isfinite(number):
        raise ValueError("must be a number")
    return number


def to_bool(value):
    """True or False from a boolean or yes/no, true/false, on/off, 1/0."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ValueError("must be true or false")


def format_duration(seconds):
    """``604800`` -> ``7d``, ``90`` -> ``90s``: the largest unit that divides it."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return "%g%s" % (seconds / size, unit)
    return "%gs" % seconds


def parse_duration(value, name, maximum=MAX_DURATION, minimum=0.0):
    """Seconds (float) from 30, 1.5, "30", "250ms", "30s", "4m", "1h", "7d"; InvalidSpec naming
    ``name``.

    Values below ``minimum`` or above ``maximum`` (7 days by default) are refused; None skips
    that check.
    """
    seconds = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        match = re.match(_DURATION, value.strip())
        if match:
            seconds = float(match.group(1)) * _UNIT[(match.group(2) or "").lower() or None]
    if seconds is None or not math.isfinite(seconds):
        raise field_error(name, "%s=%r is not a duration; %s" % (name, value, _DURATION_HELP))
    if minimum is not None and seconds < minimum:
        raise field_error(name, "%s=%r must be at least %g; %s" % (name, value, minimum,
                                                                   _DURATION_HELP))
    if maximum is not None and seconds > maximum:
        raise field_error(name, "%s=%r is longer than the %s allowed; give a shorter duration"
                          % (name, value, format_duration(maximum)))
    return seconds
