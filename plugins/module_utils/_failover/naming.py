"""Names for new reservations: ``failover-<zone>-<suffix>``, unique and reproducible."""
import hashlib
import re

__all__ = ("sanitize_az_for_name", "NameAllocator")

MAX_AZ_SEGMENT = 9
_INVALID = re.compile(r"[^a-z0-9-]+")
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def sanitize_az_for_name(az):
    """Lower-case, drop characters outside [a-z0-9-], cut to 9, trim '-'; "" -> "unknown"."""
    out = _INVALID.sub("", (az or "").lower())[:MAX_AZ_SEGMENT].strip("-")
    return out or "unknown"


def _suffix(seed, length=5):
    number = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big")
    chars = []
    for dummy in range(length):
        number, digit = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[digit])
    return "".join(chars)


class NameAllocator:
    """Hands out names not among ``taken``; the same seeds in the same order give the same names."""

    def __init__(self, taken=()):
        self._taken = set(taken)

    def new_name(self, az, seed):
        prefix = "failover-%s-" % sanitize_az_for_name(az)
        attempt = 0
        while True:
            name = prefix + _suffix("%s#%d" % (seed, attempt))
            if name not in self._taken:
                self._taken.add(name)
                return name
            attempt += 1
