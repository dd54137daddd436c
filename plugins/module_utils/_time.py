"""RFC 3339 UTC timestamps ("2026-11-21T10:00:00Z") to and from epoch seconds."""
import re
import time

__all__ = ("format_time", "parse_time", "PATTERNS")

# a pattern, compiled (and cached by re) on the first parse: most tasks only format times
_RFC3339 = r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|z|[+-]\d{2}:\d{2})$"
PATTERNS = (_RFC3339,)  # compiled ahead by a controller that preloads the collection


def format_time(epoch, round_up=False):
    """Epoch seconds -> "YYYY-MM-DDTHH:MM:SSZ" (whole seconds, UTC): the second it falls in, or
    with ``round_up`` the first whole second not before it (for a time something waits for)."""
    if round_up:
        epoch = -(-epoch // 1)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def parse_time(text, field="time"):
    """RFC 3339 string -> epoch seconds; InvalidSpec naming ``field`` when malformed."""
    match = re.match(_RFC3339, text) if isinstance(text, str) else None
    if match is None:
        # here, not at the top: errors.py imports this module
        from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec

        raise InvalidSpec("%s: %r is not an RFC 3339 time; use a form like 2026-11-21T10:00:00Z"
                          % (field, text))
    import calendar

    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    epoch = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    if match.group(7):
        epoch += float(match.group(7))
    zone = match.group(8)
    if zone not in ("Z", "z"):
        offset = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        epoch += -offset if zone[0] == "+" else offset
    return float(epoch)
