# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names for new reservations: ``failover-<zone>-<suffix>``, unique and reproducible."""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ("MAX_AZ_SEGMENT", "sanitize_az_for_name", "NameAllocator")

# -- Names for new reservations: ``failover-<zone>-<suffix>``, unique and reproducible.

MAX_AZ_SEGMENT = 9
_INVALID = re.compile(r"[^a-z0-9-]+")
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def sanitize_az_for_name(az: str | None) -> str:
    """Lower-case, drop characters outside [a-z0-9-], cut to 9, trim '-'; "" -> "unknown"."""
    out = _INVALID.sub("", (az or "").lower())[:MAX_AZ_SEGMENT].strip("-")
    return out or "unknown"


def _suffix(seed: str, length: int = 5) -> str:
    number = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big")
    chars = []
    for _dummy in range(length):
        number, digit = divmod(number, len(_ALPHABET))
        chars.append(_ALPHABET[digit])
    return "".join(chars)


class NameAllocator:
    """Hands out names not among ``taken``; the same seeds in the same order give the same names."""

    def __init__(self, taken: Iterable[str] = ()):
        self._taken = set(taken)

    def claim(self, name: str) -> bool:
        """Take ``name`` when no reservation has it; False when one does."""
        if name in self._taken:
            return False
        self._taken.add(name)
        return True

    def new_name(self, az: str, seed: str) -> str:
        prefix = "failover-%s-" % sanitize_az_for_name(az)
        attempt = 0
        while True:
            name = prefix + _suffix("%s#%d" % (seed, attempt))
            if name not in self._taken:
                self._taken.add(name)
                return name
            attempt += 1
