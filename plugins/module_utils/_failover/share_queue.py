"""Reservations of one zone ordered for reuse: most shared first, then by name."""
import bisect

__all__ = ("ShareQueue",)


class ShareQueue:
    """Buckets of names by member count; iteration walks the largest bucket first."""

    def __init__(self):
        self._size = {}
        self._buckets = {}

    def add(self, name, size):
        self._size[name] = size
        bisect.insort(self._buckets.setdefault(size, []), name)

    def remove(self, name):
        size = self._size.pop(name, None)
        if size is None:
            return
        bucket = self._buckets[size]
        del bucket[bisect.bisect_left(bucket, name)]
        if not bucket:
            del self._buckets[size]

    def resize(self, name, size):
        self.remove(name)
        self.add(name, size)

    def __iter__(self):
        """Names in reuse order; do not change the queue while iterating."""
        for size in sorted(self._buckets, reverse=True):
            yield from self._buckets[size]
