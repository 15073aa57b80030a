"""Prefix index: a radix tree over token blocks whose checkpoints own host rows and pages.

One block is one page worth of tokens. A node ends at a block boundary; the edge from its parent
holds the node's blocks and one page per block. A node with a ``row`` is a reusable checkpoint (the
recurrent state at that position). Each checkpoint key (model checkpoint plus request model) has
its own tree.

Stores are asynchronous: a stored node is pinned and non-durable until ``complete_store``. Readers
(a request restoring a hit) pin it too. Under row or page pressure one eviction attempt retires the
least recently used eligible leaf; with no eligible leaf, row pressure compacts the row of a
single-child ancestor instead (its pages and child stay). Every checkpoint that loses its row is
remembered (boundedly, ``simulator.retired``) so that a later miss on it reads ``evicted``, with
the eviction that took it (``lookups.evicted_by``).

Schema v3's measures come from the same operations and the clock each call passes (``now``):
an evicted checkpoint's age (since its store completed) and idle time (since it last served a
hit), the stores dropped for want of room or refused as too large, the stores that failed
(``fail_store``) and the bytes of those completed. Checkpoints sit only at multiples of
``checkpoint_blocks`` blocks (1: any block boundary), the row checkpoint interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count

from simulator.audit import audit_index
from simulator.retired import (
    DEFAULT_CAPACITY,
    Cause,
    RetiredPrefixes,
    chain_hash,
    prefix_hashes,
)
from simulator.slabs import SlabPool
from simulator.stats import Outcome, Pressure, TierStats
from simulator.tree import Block, LookupResult, Node, common_blocks


class PrefixIndex:
    def __init__(
        self, pool: SlabPool, tokens_per_page: int, stats: TierStats | None = None,
        retired_capacity: int = DEFAULT_CAPACITY, checkpoint_blocks: int = 1,
    ) -> None:
        if tokens_per_page < 1:
            raise ValueError(f"tokens_per_page must be positive, got {tokens_per_page}")
        if checkpoint_blocks < 1:
            raise ValueError(f"checkpoint_blocks must be positive, got {checkpoint_blocks}")
        self.pool = pool
        self.tokens_per_page = tokens_per_page
        self.checkpoint_blocks = checkpoint_blocks
        self.stats = stats or TierStats()
        self._roots: dict[str, Node] = {}
        self._nodes: dict[int, Node] = {}
        self._ids = count(1)
        # Nodes on the path of the store being made room for: not candidates for eviction.
        self._held: set[int] = set()
        self.retired = RetiredPrefixes(retired_capacity)
        self._cut: tuple[Sequence[int] | None, list[Block]] = (None, [])
        # The time of the latest operation: what an eviction measures ages against.
        self._now = 0.0
        # Stores in flight: the bytes they write, and what their node was before (had_row,
        # lost_by), restored when the store fails.
        self._pending: dict[int, tuple[int, bool, Cause | None]] = {}

    # -- geometry ---------------------------------------------------------------------------

    def blocks_of(self, tokens: Sequence[int]) -> list[Block]:
        # A request looks its prompt up and then stores up to a dozen checkpoints of it: cut a
        # long prompt into blocks once, not thirteen times.
        if tokens is self._cut[0]:
            return self._cut[1]
        tpp = self.tokens_per_page
        blocks = [tuple(tokens[i : i + tpp]) for i in range(0, len(tokens) - tpp + 1, tpp)]
        if isinstance(tokens, tuple):  # immutable: safe to remember
            self._cut = (tokens, blocks)
        return blocks

    def usable_blocks(self, prompt_tokens: int) -> int:
        """Blocks a checkpoint may cover: the last prompt token is always computed, and a
        checkpoint covers a whole number of row checkpoint intervals."""
        whole = max(0, prompt_tokens - 1) // self.tokens_per_page
        return whole // self.checkpoint_blocks * self.checkpoint_blocks

    @property
    def min_reusable_tokens(self) -> int:
        """The shortest prompt a checkpoint can serve; a shorter one misses as ``too_short``."""
        return self.checkpoint_blocks * self.tokens_per_page + 1

    def node(self, node_id: int) -> Node:
        return self._nodes[node_id]

    def nodes(self) -> list[Node]:
        return list(self._nodes.values())

    @property
    def resident_records(self) -> int:
        return sum(1 for n in self._nodes.values() if n.row is not None)

    # -- lookups ----------------------------------------------------------------------------

    def _walk(self, root: Node, blocks: Sequence[Block]) -> tuple[list[Node], int]:
        """Nodes whose whole edge matched (shallow first) and the number of blocks matched."""
        path: list[Node] = []
        node, i = root, 0
        while i < len(blocks):
            child = node.children.get(blocks[i])
            if child is None:
                break
            n = common_blocks(child.blocks, blocks[i:])
            i += n
            if n < len(child.blocks):
                break
            path.append(child)
            node = child
        return path, i

    def lookup(self, key: str, tokens: Sequence[int], now: float) -> LookupResult:
        self._now = now
        usable = self.usable_blocks(len(tokens))
        if usable == 0:
            return self._miss("too_short")
        blocks = self.blocks_of(tokens)[:usable]
        # Keys whose every entry was retired leave no root behind: the request's `model` is
        # client input, so the roots must not grow with every model name ever seen.
        for empty in [k for k, r in self._roots.items() if not r.children]:
            del self._roots[empty]
        root = self._roots.get(key)
        path, matched = self._walk(root, blocks) if root is not None else ([], 0)
        for node in reversed(path):
            if node.row is not None and node.durable:
                for n in node.path():
                    n.last_access = now
                node.last_hit = now
                self.stats.record_hit()
                return LookupResult(True, None, node.node_id, node.depth * self.tokens_per_page)
        return self._miss(*self._miss_reason(key, blocks, path, matched))

    def _miss_reason(
        self, key: str, blocks: Sequence[Block], path: list[Node], matched: int
    ) -> tuple[str, Cause | None]:
        """Why no checkpoint served: the deepest checkpoint ever stored on the prompt's path
        under this key decides (in flight: ``not_durable``; lost its row, whether its node is
        still there or was retired and is remembered: ``evicted``, with the eviction that took
        it)."""
        hashes = prefix_hashes(blocks)
        retired_at = self.retired.deepest(key, hashes)
        for node in reversed(path):
            if node.depth < retired_at:
                break
            if node.row is not None:
                return "not_durable", None
            if node.had_row:
                return "evicted", node.lost_by
        if retired_at:
            return "evicted", self.retired.cause(key, hashes[retired_at - 1])
        if matched:
            return "no_checkpoint", None
        others = {k for k, r in self._roots.items() if k != key and self._walk(r, blocks)[1] > 0}
        others |= self.retired.other_keys(key, hashes)
        if others:
            return f"key_mismatch:ckpt={min(others)[:4]}", None
        return "no_prefix", None

    def _miss(self, reason: str, cause: Cause | None = None) -> LookupResult:
        self.stats.record_miss(reason, cause)
        return LookupResult(False, reason, None, 0)

    def pin(self, node_id: int) -> None:
        self._nodes[node_id].pins += 1

    def unpin(self, node_id: int) -> None:
        node = self._nodes[node_id]
        if node.pins <= 0:
            raise ValueError(f"node {node_id} is not pinned")
        node.pins -= 1

    # -- stores -----------------------------------------------------------------------------

    def begin_store(self, key: str, tokens: Sequence[int], depth: int, now: float) -> int | None:
        """Start storing a checkpoint after ``depth`` blocks; the node id, or None when the
        checkpoint already holds a row or no record could be freed for it (``dropped_full``;
        ``dropped_ineligible`` when it needs more pages than the page slab has)."""
        self._now = now
        blocks = self.blocks_of(tokens)[:depth]
        if depth < 1 or len(blocks) != depth:
            raise ValueError(f"cannot checkpoint {depth} blocks of a {len(tokens)}-token prompt")
        root = self._roots.get(key)
        if root is None:
            root = self._roots[key] = Node(next(self._ids), key, None, [], [], 0)
        node, i, split = root, 0, 0
        split_child: Node | None = None
        while i < depth:
            child = node.children.get(blocks[i])
            if child is None:
                break
            n = common_blocks(child.blocks, blocks[i:])
            if n < len(child.blocks):
                split_child, split = child, n
                i += n
                break
            i += n
            node = child
        if split_child is None and i == depth and node.row is not None:
            for n_ in node.path():
                n_.last_access = now
            return None
        # Pin the walked path so that making room never retires or compacts it.
        held = [*node.path(), *([split_child] if split_child is not None else [])]
        for n_ in held:
            n_.pins += 1
        self._held = {n_.node_id for n_ in held}
        try:
            row = self._acquire_row()
            pages = self._acquire_pages(depth - i) if row is not None else None
        finally:
            self._held = set()
            for n_ in held:
                n_.pins -= 1
        if row is None or pages is None:
            if row is not None:
                self.pool.row.release(row)
            for n_ in held:
                self._prune(n_)
            self.stats.store_failures += 1
            if depth - i > self.pool.page.capacity:
                self.stats.dropped_ineligible += 1  # no eviction could ever make room
            else:
                self.stats.dropped_full += 1
            return None
        if split_child is not None:
            node = self._split(split_child, split)
        if i < depth:
            leaf = Node(next(self._ids), key, node, blocks[i:depth], pages, depth,
                        prefix=chain_hash(node.prefix, blocks[i:depth]))
            node.children[leaf.blocks[0]] = leaf
            self._nodes[leaf.node_id] = leaf
            node = leaf
        geometry = self.pool.geometry
        self._pending[node.node_id] = (
            geometry.row_record_bytes + len(pages) * geometry.page_record_bytes,
            node.had_row, node.lost_by,
        )
        node.row, node.had_row, node.durable = row, True, False
        node.lost_by, node.last_hit = None, None
        self.retired.discard(key, node.prefix)
        node.pins += 1
        # Making room may have retired the only child of a rowless node on the held path (the
        # held pins kept it from being pruned then): prune what is left as a rowless leaf now.
        for n_ in held:
            if n_.node_id in self._nodes:
                self._prune(n_)
        for n_ in node.path():
            n_.last_access = now
        return node.node_id

    def complete_store(self, node_id: int, now: float) -> None:
        node = self._nodes[node_id]
        if node.durable:
            raise ValueError(f"node {node_id} has no store in flight")
        self._now = max(self._now, now)
        node.durable = True
        node.pins -= 1
        node.last_access = max(node.last_access, now)
        node.stored_at = now
        self.stats.host_stores += 1
        self.stats.stored_bytes += self._pending.pop(node_id)[0]

    def fail_store(self, node_id: int, now: float) -> None:
        """The store in flight at ``node_id`` failed (the host copy did not complete): its row
        and the pages it added are freed, and the node is again what it was before."""
        node = self._nodes[node_id]
        if node.durable:
            raise ValueError(f"node {node_id} has no store in flight")
        self._now = max(self._now, now)
        _, had_row, lost_by = self._pending.pop(node_id)
        assert node.row is not None
        self.pool.row.release(node.row)
        node.row, node.durable, node.had_row, node.lost_by = None, True, had_row, lost_by
        node.pins -= 1
        if had_row and lost_by is not None:  # it was evicted before: a miss still says so
            self.retired.add(node.key, node.prefix, lost_by)
        self.stats.stores_failed += 1
        self._prune(node, retired=False)

    def _split(self, child: Node, at: int) -> Node:
        """Insert a rowless node ``at`` blocks into ``child``'s edge and return it."""
        parent = child.parent
        assert parent is not None
        mid = Node(
            next(self._ids), child.key, parent, child.blocks[:at], child.pages[:at],
            child.depth - len(child.blocks) + at, last_access=child.last_access,
            prefix=chain_hash(parent.prefix, child.blocks[:at]),
        )
        child.blocks, child.pages, child.parent = child.blocks[at:], child.pages[at:], mid
        mid.children[child.blocks[0]] = child
        parent.children[mid.blocks[0]] = mid
        self._nodes[mid.node_id] = mid
        return mid

    # -- eviction ---------------------------------------------------------------------------

    def _acquire_row(self) -> int | None:
        while self.pool.row.free == 0:
            if self.evict_once("row") != "evicted":
                return None
        return self.pool.row.allocate()

    def _acquire_pages(self, n: int) -> list[int] | None:
        if n > self.pool.page.capacity:
            return None
        while self.pool.page.free < n:
            if self.evict_once("page") != "evicted":
                return None
        return [self.pool.page.allocate() for _ in range(n)]

    def evict_once(self, pressure: Pressure, now: float | None = None) -> Outcome:
        """One eviction attempt under ``pressure``, counted in the stats: ``evicted`` when a leaf
        was retired or an ancestor's row compacted; otherwise ``pinned`` when some candidate was
        pinned by a reader, ``non_durable`` when candidates only await their stores, and
        ``no_eligible`` when there is no candidate at all (e.g. every row is on the very path
        being stored). The evicted checkpoint's age and idle time are taken at ``now`` (by
        default the time of the latest lookup or store)."""
        if now is not None:
            self._now = now
        nodes = [n for n in self._nodes.values() if n.node_id not in self._held]
        leaves = [n for n in nodes if not n.children]
        candidates = list(leaves)
        outcome: Outcome | None = None
        eligible = [n for n in leaves if n.durable and n.pins == 0]
        if eligible:
            self._retire(min(eligible, key=lambda n: (n.last_access, -n.depth, n.node_id)),
                         pressure)
            outcome = "evicted"
        elif pressure == "row":
            # Compacting frees a row only, so it cannot relieve page pressure.
            ancestors = [n for n in nodes if len(n.children) == 1 and n.row is not None]
            candidates += ancestors
            eligible = [n for n in ancestors if n.durable and n.pins == 0]
            if eligible:
                victim = min(eligible, key=lambda n: (n.last_access, -n.depth, n.node_id))
                assert victim.row is not None
                self._record_age(victim, pressure)
                self.pool.row.release(victim.row)
                victim.row, victim.lost_by = None, "ancestor_compaction"
                self.retired.add(victim.key, victim.prefix, "ancestor_compaction")
                self.stats.ancestor_row_compactions += 1
                outcome = "evicted"
        if outcome is None:
            if any(n.durable and n.pins > 0 for n in candidates):
                outcome = "pinned"
            elif any(not n.durable for n in candidates):
                outcome = "non_durable"
            else:
                outcome = "no_eligible"
        self.stats.evictions(pressure).record(outcome)
        return outcome

    def _record_age(self, node: Node, pressure: Pressure) -> None:
        idle = None if node.last_hit is None else self._now - node.last_hit
        self.stats.evictions(pressure).record_evicted(self._now - node.stored_at, idle)

    def _retire(self, leaf: Node, pressure: Pressure) -> None:
        if leaf.row is not None:
            self._record_age(leaf, pressure)
            self.pool.row.release(leaf.row)
            leaf.row = None
            self.retired.add(leaf.key, leaf.prefix, pressure)
            self.stats.retired_leaf_rows += 1
        self._prune(leaf)

    def _prune(self, start: Node, retired: bool = True) -> None:
        """Take ``start`` and its rowless ancestors out while each is an unpinned rowless leaf;
        their pages count as retired unless ``retired`` is False (a failed store's)."""
        node: Node | None = start
        # A parent left as a rowless, unpinned leaf holds pages nothing can reach: retire it too.
        while (
            node is not None and node.parent is not None
            and not node.children and node.row is None and node.pins == 0
        ):
            for page in node.pages:
                self.pool.page.release(page)
            if retired:
                self.stats.retired_leaf_pages += len(node.pages)
            del node.parent.children[node.blocks[0]]
            del self._nodes[node.node_id]
            node = node.parent

    # -- checks ---------------------------------------------------------------------------

    def audit(self) -> list[str]:
        """Invariant violations; empty when the tree and the slabs agree."""
        return audit_index(self.nodes(), self.pool)
