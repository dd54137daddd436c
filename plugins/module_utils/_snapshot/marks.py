# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The line that ends the description of a snapshot this collection made: it tells such
snapshots (the only ones retention may delete) from the others, and marks the pinned ones,
which it never deletes. Backends store descriptions verbatim, so the mark works on every one.
"""
import re

__all__ = ("MARK", "marked", "read")

MARK = "[resilient.virt snapshot]"
_PINNED = "[resilient.virt snapshot, pinned]"
_LINE = re.compile(r"(?:\A|\n)\[resilient\.virt snapshot(, pinned)?\]\Z")


def marked(description, pinned):
    """``description`` (the user's text, may be empty) ended with the mark."""
    mark = _PINNED if pinned else MARK
    return "%s\n%s" % (description, mark) if description else mark


def read(stored):
    """(the user's description, made by this collection, pinned) of a stored description."""
    match = _LINE.search(stored or "")
    if match is None:
        return stored or "", False, False
    return stored[:match.start()], True, bool(match.group(1))
