from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from simulator.index import PrefixIndex
from simulator.retired import DEFAULT_CAPACITY
from simulator.slabs import SlabGeometry, SlabPool

TPP = 4
KEY = "abcd000000000000"
OTHER = "ef01000000000000"


def make_index(rows: int, pages: int, memory: int = DEFAULT_CAPACITY) -> PrefixIndex:
    budget = rows + pages
    geometry = SlabGeometry(budget_bytes=budget, row_fraction=(rows + 0.5) / budget,
                            row_record_bytes=1, page_record_bytes=1)
    pool = SlabPool(geometry)
    assert (pool.row.capacity, pool.page.capacity) == (rows, pages)
    return PrefixIndex(pool, TPP, retired_capacity=memory)


def prompt(*blocks: int, extra: int = 1) -> list[int]:
    """A prompt of whole blocks (block b is TPP copies of b) plus ``extra`` loose tokens."""
    return [b for b in blocks for _ in range(TPP)] + [99] * extra


def stored(index: PrefixIndex, tokens: list[int], depth: int, now: float = 0.0,
           key: str = KEY, complete: bool = True) -> int:
    node_id = index.begin_store(key, tokens, depth, now)
    assert node_id is not None
    if complete:
        index.complete_store(node_id, now)
    return node_id


def test_blocks_and_usable_blocks() -> None:
    index = make_index(2, 8)
    assert index.blocks_of([1, 1, 1, 1, 2, 2]) == [(1, 1, 1, 1)]
    # The last prompt token is always computed, so an exact block multiple loses one block.
    assert index.usable_blocks(8) == 1
    assert index.usable_blocks(9) == 2
    assert index.usable_blocks(0) == 0


def test_store_then_lookup_hits_and_counts() -> None:
    index = make_index(4, 16)
    a = prompt(1, 2, 3)
    node = stored(index, a, 3)
    result = index.lookup(KEY, a, 1.0)
    assert result.hit and result.node_id == node and result.tokens == 3 * TPP
    assert index.stats.lookups == 1 and index.stats.lookup_hits == 1
    assert index.stats.host_stores == 1
    assert (index.pool.row.free, index.pool.page.free) == (3, 13)
    assert index.resident_records == 1
    # Storing the same checkpoint again is not a new store.
    assert index.begin_store(KEY, a, 3, 2.0) is None
    assert index.audit() == []


def test_every_miss_reason() -> None:
    index = make_index(4, 32)
    assert index.lookup(KEY, prompt(1), 0).reason == "no_prefix"
    assert index.lookup(KEY, [1, 2, 3], 0).reason == "too_short"
    assert index.lookup(KEY, prompt(1, extra=0), 0).reason == "too_short"

    a = prompt(1, 2, 3, 4)
    first = index.begin_store(KEY, a, 2, 0.0)
    assert first is not None
    assert index.lookup(KEY, a, 0).reason == "not_durable"
    index.complete_store(first, 0.0)
    assert index.lookup(KEY, a, 0).hit

    # Same blocks under another checkpoint key.
    assert index.lookup(OTHER, a, 0).reason == "key_mismatch:ckpt=abcd"
    # Matched one block, inside the checkpoint's edge: no checkpoint there.
    assert index.lookup(KEY, prompt(1, 7), 0).reason == "no_checkpoint"

    # Compacting the checkpoint's row (keeps pages and child) makes it "evicted".
    second = stored(index, a, 4)
    assert index.node(second).parent is not None and index.node(second).parent.node_id == first
    index.pin(second)  # a reader holds the leaf, so the attempt compacts the ancestor
    for _ in range(2):
        index.pool.row.allocate()
    assert index.evict_once("row") == "evicted"
    assert index.stats.ancestor_row_compactions == 1
    assert index.node(first).row is None
    assert index.lookup(KEY, prompt(1, 2, 9), 0).reason == "evicted"
    assert index.lookup(KEY, a, 0).hit  # the deeper checkpoint still serves
    assert dict(index.stats.lookup_misses) == {
        "no_prefix": 1, "too_short": 2, "not_durable": 1, "key_mismatch:ckpt=abcd": 1,
        "no_checkpoint": 1, "evicted": 1,
    }
    assert index.stats.lookups == 9 and index.stats.lookup_hits == 2


def test_row_pressure_retires_the_least_recent_leaf_first() -> None:
    index = make_index(2, 16)
    a = prompt(1, 2)
    a1 = stored(index, a, 1, now=1.0)
    a2 = stored(index, a, 2, now=2.0)
    assert index.node(a2).parent is index.node(a1)
    b = stored(index, prompt(5, 6), 1, now=3.0)
    ev = index.stats.row_evictions
    assert (ev.attempts, ev.evicted) == (1, 1)
    # The leaf a2 went (its row and its one page); the ancestor a1 stayed whole.
    assert (index.stats.retired_leaf_rows, index.stats.retired_leaf_pages) == (1, 1)
    assert index.stats.ancestor_row_compactions == 0
    assert {n.node_id for n in index.nodes()} == {a1, b}
    assert index.lookup(KEY, a, 4.0).node_id == a1
    assert index.audit() == []


def test_retiring_a_leaf_prunes_rowless_parents() -> None:
    index = make_index(2, 16)
    stored(index, prompt(1, 2, 3), 3, now=1.0)
    stored(index, prompt(1, 2, 7), 3, now=2.0)  # splits the edge at two blocks
    splits = [n for n in index.nodes() if n.row is None]
    assert len(splits) == 1 and splits[0].depth == 2
    assert index.pool.page.used == 4
    assert index.evict_once("row") == "evicted"
    assert index.evict_once("row") == "evicted"
    # Both leaves went, then their rowless parent: every page is back.
    assert index.nodes() == []
    assert index.pool.page.free == 16
    assert (index.stats.retired_leaf_rows, index.stats.retired_leaf_pages) == (2, 4)
    assert index.audit() == []


def test_compacts_a_single_child_ancestor_when_no_leaf_is_eligible() -> None:
    index = make_index(2, 16)
    a = prompt(1, 2)
    a1 = stored(index, a, 1)
    a2 = stored(index, a, 2, complete=False)
    b = index.begin_store(KEY, prompt(5), 1, 1.0)
    assert b is not None
    assert index.stats.row_evictions.as_dict() == {
        "attempts": 1, "evicted": 1, "pinned": 0, "non_durable": 0, "no_eligible": 0,
    }
    assert index.stats.ancestor_row_compactions == 1
    assert index.stats.retired_leaf_rows == 0
    node = index.node(a1)
    assert node.row is None and node.pages and index.node(a2).parent is node
    assert index.audit() == []


def test_pinned_outcome_when_readers_hold_every_candidate() -> None:
    index = make_index(1, 16)
    a1 = stored(index, prompt(1), 1)
    index.pin(a1)
    assert index.begin_store(KEY, prompt(5), 1, 1.0) is None
    assert index.stats.row_evictions.pinned == 1
    assert index.stats.store_failures == 1
    index.unpin(a1)
    assert index.begin_store(KEY, prompt(5), 1, 1.0) is not None
    assert index.stats.row_evictions.evicted == 1
    assert index.audit() == []


def test_non_durable_outcome_while_stores_are_in_flight() -> None:
    index = make_index(1, 16)
    a1 = stored(index, prompt(1), 1, complete=False)
    assert index.begin_store(KEY, prompt(5), 1, 1.0) is None
    assert index.stats.row_evictions.non_durable == 1
    index.complete_store(a1, 2.0)
    assert index.begin_store(KEY, prompt(5), 1, 3.0) is not None
    assert index.audit() == []


def test_no_eligible_outcome_when_only_the_stored_path_holds_rows() -> None:
    index = make_index(1, 16)
    a = prompt(1, 2)
    stored(index, a, 1)
    # Extending the path needs a row, and the only row is on that very path.
    assert index.begin_store(KEY, a, 2, 1.0) is None
    assert index.stats.row_evictions.no_eligible == 1
    assert index.audit() == []


def test_page_pressure_retires_leaves_but_never_compacts() -> None:
    index = make_index(4, 4)
    stored(index, prompt(1, 2, 3), 3, now=1.0)
    b = stored(index, prompt(5, 6), 2, now=2.0)
    ev = index.stats.page_evictions
    assert (ev.attempts, ev.evicted) == (1, 1)
    assert index.stats.row_evictions.attempts == 0
    assert [n.node_id for n in index.nodes()] == [b]


def test_page_pressure_does_not_compact_ancestors() -> None:
    index = make_index(4, 4)
    a = prompt(1, 2, 3)
    stored(index, a, 1)
    stored(index, a, 3, complete=False)
    # Two pages are needed, one is free; the only leaf awaits its store. Compacting the
    # ancestor would free a row, not a page, so the attempt ends non_durable.
    assert index.begin_store(KEY, prompt(7, 8), 2, 1.0) is None
    assert index.stats.page_evictions.as_dict() == {
        "attempts": 1, "evicted": 0, "pinned": 0, "non_durable": 1, "no_eligible": 0,
    }
    assert index.stats.ancestor_row_compactions == 0
    assert index.audit() == []


def test_too_large_stores_fail_without_an_attempt() -> None:
    index = make_index(2, 2)
    assert index.begin_store(KEY, prompt(1, 2, 3), 3, 0.0) is None
    assert index.stats.page_evictions.attempts == 0
    assert index.pool.row.free == 2


# -- property: slabs and tree always agree -----------------------------------------------------

block_ids = st.integers(min_value=0, max_value=2)
prompts = st.lists(block_ids, min_size=1, max_size=4)
store = st.tuples(st.just("store"), prompts, st.integers(1, 4), st.booleans())
ops = st.lists(
    st.one_of(
        store, store, store,
        st.tuples(st.just("complete"), st.integers(0, 50)),
        st.tuples(st.just("complete"), st.integers(0, 50)),
        st.tuples(st.just("read"), prompts, st.booleans()),
        st.tuples(st.just("release"), st.integers(0, 50)),
        st.tuples(st.just("evict"), st.sampled_from(["row", "page"])),
    ),
    min_size=20,
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(ops)
# A store that made room by retiring the only child of a rowless node on its own path once left
# that node as a rowless leaf (its pages unreachable) after the store split its edge.
@example([("store", [1], 1, False), ("store", [0], 1, False), *[("complete", 0)] * 6,
          ("store", [1, 1], 4, True), ("store", [0, 0, 0, 0], 4, False),
          ("store", [1, 1, 0], 3, True), ("complete", 0), ("store", [0], 1, True),
          ("complete", 0), ("store", [0], 1, False), *[("complete", 0)] * 3,
          ("store", [1, 0], 1, True)])
def test_slab_counts_stay_in_bounds_and_records_have_one_owner(script: list[tuple]) -> None:
    """Also what each miss reason claims about the history: `no_prefix`, no checkpoint on the
    prompt's path was ever stored under any key; `evicted`, one was stored under this key. A
    checkpoint ever stored on the path under this key gives a hit, `not_durable` or `evicted`."""
    index = make_index(3, 10)
    ever: dict[str, set[tuple[int, ...]]] = {KEY: set(), OTHER: set()}
    in_flight: list[int] = []
    readers: list[int] = []
    for now, op in enumerate(script):
        if op[0] == "store":
            _, blocks, depth, other_key = op
            key, depth = (OTHER if other_key else KEY), min(depth, len(blocks))
            node = index.begin_store(key, prompt(*blocks), depth, float(now))
            if node is not None:
                in_flight.append(node)
                ever[key].add(tuple(blocks[:depth]))
        elif op[0] == "complete" and in_flight:
            index.complete_store(in_flight.pop(op[1] % len(in_flight)), float(now))
        elif op[0] == "read":
            blocks, key = op[1], (OTHER if op[2] else KEY)
            result = index.lookup(key, prompt(*blocks), float(now))
            paths = {tuple(blocks[:d]) for d in range(1, len(blocks) + 1)}
            mine = bool(paths & ever[key])
            if mine:
                assert result.hit or result.reason in ("not_durable", "evicted"), result
            if result.reason == "evicted":
                assert mine
            if result.reason == "no_prefix":
                assert not paths & (ever[KEY] | ever[OTHER])
            if result.hit and result.node_id is not None:
                index.pin(result.node_id)
                readers.append(result.node_id)
        elif op[0] == "release" and readers:
            index.unpin(readers.pop(op[1] % len(readers)))
        elif op[0] == "evict":
            index.evict_once(op[1])
        assert index.audit() == []
        for slab in (index.pool.row, index.pool.page):
            assert 0 <= slab.free <= slab.capacity
        stats = index.stats
        for ev in (stats.row_evictions, stats.page_evictions):
            assert ev.attempts == ev.evicted + ev.pinned + ev.non_durable + ev.no_eligible
        assert stats.lookups == stats.lookup_hits + sum(stats.lookup_misses.values())
