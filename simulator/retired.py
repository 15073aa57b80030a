"""Bounded memory of checkpoints the index retired for capacity, so a later miss can say so.

Without it a prefix whose nodes were pruned looks exactly like one never stored, and its miss
would read ``no_prefix`` ("nothing stored") when the truth is ``evicted`` ("stored, but the tier
was too small"). Each retired checkpoint is remembered as ``(checkpoint key, prefix hash)``, where
the prefix hash chains the hashes of the blocks from the root to the checkpoint (as block hashes
do in paged KV caches), so a lookup checks every depth of its prompt in one pass.

Each entry also keeps how the checkpoint lost its row (``row`` or ``page``: its leaf was retired
under that pressure; ``ancestor_compaction``: its row was compacted away), so that an ``evicted``
miss can say which eviction caused it (the snapshot's ``lookups.evicted_by``).

The memory holds at most ``capacity`` checkpoints; past that the oldest retirement is forgotten
first (``forgotten`` counts them) and a miss on it reads ``no_prefix`` again. A checkpoint stored
anew leaves the memory: the live index answers for it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Literal

Block = tuple[int, ...]
# Which eviction took a checkpoint's row: a leaf retired under row or page pressure, or an
# ancestor's row compacted (row pressure only).
Cause = Literal["row", "page", "ancestor_compaction"]
CAUSES: tuple[Cause, ...] = ("row", "page", "ancestor_compaction")

# 32 turnovers of the default 512-row slab, about 6 MiB of Python objects.
DEFAULT_CAPACITY = 16_384


def chain_hash(prefix: int, blocks: Iterable[Block]) -> int:
    """The prefix hash after ``blocks``, continuing from ``prefix`` (0 at the root).

    Python hashes ints and tuples of ints without a per-process seed, so the value is stable."""
    for block in blocks:
        prefix = hash((prefix, block))
    return prefix


def prefix_hashes(blocks: Sequence[Block]) -> list[int]:
    """The prefix hash at every depth: element ``d - 1`` covers ``blocks[:d]``."""
    out: list[int] = []
    h = 0
    for block in blocks:
        h = hash((h, block))
        out.append(h)
    return out


class RetiredPrefixes:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must not be negative, got {capacity}")
        self.capacity = capacity
        self.forgotten = 0
        self._order: OrderedDict[tuple[str, int], Cause] = OrderedDict()
        # prefix hash -> keys that retired it; almost always one, and a tuple is a quarter of a set
        self._keys: dict[int, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self._order)

    def add(self, key: str, prefix: int, cause: Cause = "row") -> None:
        entry = (key, prefix)
        if entry in self._order:
            self._order[entry] = cause
            self._order.move_to_end(entry)
            return
        if self.capacity == 0:
            self.forgotten += 1
            return
        self._order[entry] = cause
        self._keys[prefix] = (*self._keys.get(prefix, ()), key)
        while len(self._order) > self.capacity:
            old_key, old_prefix = self._order.popitem(last=False)[0]
            self._drop_key(old_key, old_prefix)
            self.forgotten += 1

    def discard(self, key: str, prefix: int) -> None:
        entry = (key, prefix)
        if entry in self._order:
            del self._order[entry]
            self._drop_key(key, prefix)

    def _drop_key(self, key: str, prefix: int) -> None:
        keys = tuple(k for k in self._keys[prefix] if k != key)
        if keys:
            self._keys[prefix] = keys
        else:
            del self._keys[prefix]

    def deepest(self, key: str, hashes: Sequence[int]) -> int:
        """The deepest depth (1-based) at which ``key`` retired a checkpoint; 0 when none."""
        for depth in range(len(hashes), 0, -1):
            if key in self._keys.get(hashes[depth - 1], ()):
                return depth
        return 0

    def cause(self, key: str, prefix: int) -> Cause | None:
        """How the checkpoint ``(key, prefix)`` lost its row; None when it is not remembered."""
        return self._order.get((key, prefix))

    def other_keys(self, key: str, hashes: Sequence[int]) -> set[str]:
        """Keys other than ``key`` that retired a checkpoint at any of these prefixes."""
        found: set[str] = set()
        for h in hashes:
            found.update(self._keys.get(h, ()))
        found.discard(key)
        return found
