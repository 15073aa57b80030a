"""The prefix index's tree (simulator/index.py): a node is a block boundary, its edge from the parent
holds its blocks and one page per block, and a node with a ``row`` is a reusable checkpoint. What
a node remembers (pins, durability, access and store times, how it lost its row) is what the
index's lookups, stores and evictions read and write."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from simulator.retired import Cause

Block = tuple[int, ...]


@dataclass(eq=False)
class Node:
    node_id: int
    key: str
    parent: Node | None
    blocks: list[Block]
    pages: list[int]
    depth: int
    children: dict[Block, Node] = field(default_factory=dict)
    row: int | None = None
    had_row: bool = False
    durable: bool = True
    pins: int = 0
    last_access: float = 0.0
    # Hash of every block from the root to the end of this node's edge (simulator.retired).
    prefix: int = 0
    # When its row's store completed, and when that row last served a hit (None: never).
    stored_at: float = 0.0
    last_hit: float | None = None
    # How a node still in the tree lost its row (only compaction leaves one there).
    lost_by: Cause | None = None

    def path(self) -> Iterator[Node]:
        """This node and its ancestors, roots excluded."""
        node: Node | None = self
        while node is not None and node.parent is not None:
            yield node
            node = node.parent


@dataclass(frozen=True)
class LookupResult:
    hit: bool
    reason: str | None
    node_id: int | None
    tokens: int


def common_blocks(edge: Sequence[Block], blocks: Sequence[Block]) -> int:
    n = 0
    for a, b in zip(edge, blocks, strict=False):
        if a != b:
            break
        n += 1
    return n
