"""Miss reasons tell capacity from traffic: a checkpoint stored and later retired misses as
`evicted`; `no_prefix` means nothing on the prompt's path was ever stored (within the bounded
memory of retired checkpoints). The property over random scripts is in test_sim_index.py."""

from __future__ import annotations

from simulator.retired import RetiredPrefixes, chain_hash, prefix_hashes
from tests.simulator.test_sim_index import KEY, OTHER, TPP, make_index, prompt, stored


def test_a_retired_leaf_misses_as_evicted_not_no_prefix() -> None:
    index = make_index(2, 16)
    a, b = prompt(1, 2), prompt(3, 4)
    stored(index, a, 2, now=1.0)
    stored(index, b, 2, now=2.0)
    stored(index, prompt(5, 6), 2, now=3.0)  # row pressure: a, the least recent, is retired
    assert index.stats.retired_leaf_rows == 1
    assert all(n.blocks[0] != (1,) * TPP for n in index.nodes())  # no node of a is left
    assert index.lookup(KEY, a, 4.0).reason == "evicted"
    # A longer prompt through the retired checkpoint: the same capacity miss.
    assert index.lookup(KEY, prompt(1, 2, 9), 4.0).reason == "evicted"
    # Never stored anywhere.
    assert index.lookup(KEY, prompt(7, 8), 4.0).reason == "no_prefix"
    # The retired checkpoint was never at one block: no checkpoint of that prefix was stored.
    assert index.lookup(KEY, prompt(1, 9), 4.0).reason == "no_prefix"
    # Under another key the retired prefix is still a key mismatch, not "nothing stored".
    assert index.lookup(OTHER, a, 4.0).reason == f"key_mismatch:ckpt={KEY[:4]}"
    assert index.lookup(KEY, b, 4.0).hit
    assert index.audit() == []


def test_a_compacted_ancestor_later_pruned_still_misses_as_evicted() -> None:
    index = make_index(2, 16)
    a = prompt(1, 2)
    a1 = stored(index, a, 1, now=0.0)
    a2 = stored(index, a, 2, now=0.0)
    index.pin(a2)  # a reader holds the leaf: the attempt compacts a1's row instead
    assert index.begin_store(KEY, prompt(5), 1, 1.0) is not None
    assert index.node(a1).row is None and index.stats.ancestor_row_compactions == 1
    index.unpin(a2)
    stored(index, prompt(6), 1, now=2.0)  # retires a2, and with it the rowless a1
    assert a1 not in {n.node_id for n in index.nodes()}
    assert index.lookup(KEY, prompt(1, 7), 3.0).reason == "evicted"  # a1's prefix
    assert index.lookup(KEY, a, 3.0).reason == "evicted"


def test_a_stored_again_checkpoint_answers_for_itself() -> None:
    index = make_index(1, 16)
    a = prompt(1)
    stored(index, a, 1, now=1.0)
    stored(index, prompt(2), 1, now=2.0)  # retires a
    assert index.lookup(KEY, a, 3.0).reason == "evicted"
    again = index.begin_store(KEY, a, 1, 4.0)  # retires prompt(2)
    assert again is not None
    assert index.lookup(KEY, a, 5.0).reason == "not_durable"  # in flight, not "evicted"
    index.complete_store(again, 5.0)
    assert index.lookup(KEY, a, 6.0).hit
    assert len(index.retired) == 1  # prompt(2) only


def test_the_memory_is_bounded_and_forgets_the_oldest_first() -> None:
    index = make_index(1, 16, memory=2)
    for b in range(1, 5):  # each store retires the previous one: 1, 2 and 3 are retired
        stored(index, prompt(b), 1, now=float(b))
    assert len(index.retired) == 2 and index.retired.forgotten == 1
    assert index.lookup(KEY, prompt(1), 9.0).reason == "no_prefix"  # past the bound
    assert index.lookup(KEY, prompt(2), 9.0).reason == "evicted"
    assert index.lookup(KEY, prompt(3), 9.0).reason == "evicted"
    assert index.lookup(KEY, prompt(4), 9.0).hit


def test_keys_whose_entries_all_left_leave_no_root() -> None:
    index = make_index(1, 16)
    for i in range(50):  # one model name per request, each retiring the one before
        stored(index, prompt(1), 1, now=float(i), key=f"{i:04x}" + "0" * 12)
    index.lookup(KEY, prompt(1), 99.0)
    assert len(index._roots) == 1


def test_retired_prefixes_unit() -> None:
    memory = RetiredPrefixes(capacity=3)
    blocks = [(1,), (2,), (3,)]
    hashes = prefix_hashes(blocks)
    assert hashes[2] == chain_hash(chain_hash(0, blocks[:1]), blocks[1:])
    assert memory.deepest("k", hashes) == 0
    memory.add("k", hashes[0])
    memory.add("k", hashes[2])
    memory.add("j", hashes[1])
    assert memory.deepest("k", hashes) == 3
    assert memory.deepest("k", hashes[:2]) == 1
    assert memory.other_keys("k", hashes) == {"j"}
    assert memory.other_keys("j", hashes) == {"k"}
    memory.discard("k", hashes[2])
    memory.discard("k", hashes[2])  # absent: nothing happens
    assert memory.deepest("k", hashes) == 1 and len(memory) == 2
    memory.add("k", hashes[0])  # again: refreshed, not duplicated
    memory.add("x", 7)
    memory.add("y", 8)  # over capacity: the oldest ("j") goes
    assert len(memory) == 3 and memory.forgotten == 1
    assert memory.other_keys("k", hashes) == set()
    off = RetiredPrefixes(capacity=0)
    off.add("k", 1)
    assert len(off) == 0 and off.forgotten == 1
