"""The cache-order probe through the engine's real HTTP app, at the generic geometry
(32 GiB, a quarter to rows: 512 rows of 16 MiB, 24576 pages of 1 MiB, 64 tokens a page, two ranks),
concurrency 1, the probe-52 corpus sent as is.

The expected counts are derived from the geometry, not recorded: probe-52 bodies have 48 usable
blocks and store 12 checkpoints each, so the prime overflows the rows by 52 * 12 - 512 = 112 and
retires the 112 // 12 = 9 oldest bodies whole (LRU, deepest checkpoint first).
"""

from __future__ import annotations

import pytest

from simulator.corpora import lane
from tests.simulator.harness import (
    OTHER_MODEL,
    Pass,
    corpus,
    counts,
    idle_engine,
    run_pass,
    run_passes,
    sent,
    served,
    with_row_fraction,
)

pytestmark = pytest.mark.anyio

PROBE = lane("probe-52")
STORES = 12
ROWS = 512


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def row_overflow(rows: int = ROWS) -> int:
    return PROBE.bodies * STORES - rows


def assert_page_headroom(p: Pass) -> None:
    for c in (p.begin, p.end):
        assert Pass.page_free_ratio(c) >= 0.25
    assert p.delta("evictions", "page", "attempts") == 0


async def test_geometry_is_generic() -> None:
    engine, clock = idle_engine()
    async with served(engine, clock) as client:
        snap = (await client.get("/debug/offload/snapshot")).json()
    slabs = snap["offload"]["slabs"]
    assert snap["offload"]["budget_bytes"] == 32 << 30
    assert (slabs["row"]["capacity"], slabs["row"]["record_bytes"]) == (ROWS, 16 << 20)
    assert (slabs["page"]["capacity"], slabs["page"]["record_bytes"]) == (24576, 1 << 20)
    assert len(snap["ranks"]) == 2
    assert engine.config.tokens_per_page == 64 and engine.config.stores_per_request == STORES


async def test_forward_prime_then_reverse_replay_hits() -> None:
    """Order sensitivity: replaying in reverse finds the bodies the prime left resident."""
    engine, clock = idle_engine()
    bodies = corpus("probe-52")
    prime, replay = await run_passes(engine, clock, (bodies, "forward"), (bodies, "reverse"))
    assert prime.hits == 0 and prime.misses == {"no_prefix": PROBE.bodies}
    assert prime.delta("evictions", "row", "attempts") == row_overflow()
    lost = row_overflow() // STORES
    assert replay.hits == PROBE.bodies - lost
    assert replay.misses == {"evicted": lost}
    assert replay.delta("host", "tokens_restored") > 0
    assert replay.mean_latency < prime.mean_latency
    assert engine.index.audit() == []


async def test_forward_prime_then_forward_replay_thrashes_the_rows() -> None:
    """Capacity: at 12 stores/request the forward replay always finds its body just retired."""
    engine, clock = idle_engine()
    bodies = corpus("probe-52")
    prime, replay, again = await run_passes(engine, clock, *[(bodies, "forward")] * 3)
    for p in (replay, again):
        assert p.hits == 0
        assert p.misses == {"evicted": PROBE.bodies}  # stored once, retired since: not no_prefix
        assert p.delta("host", "tokens_restored") == 0
        # No reuse beyond the chat template the GPU keeps.
        assert p.delta("host", "prompt_tokens_reused") == PROBE.bodies * 9
        # Row pressure grows with page headroom: every stored row cost an attempt.
        assert p.delta("evictions", "row", "attempts") == PROBE.bodies * STORES
        assert p.delta("evictions", "row", "evicted") == PROBE.bodies * STORES
        assert_page_headroom(p)
        assert p.end.offload["slabs"]["row"]["free"] == 0
    assert_page_headroom(prime)
    assert prime.delta("evictions", "row", "attempts") > 0
    assert abs(replay.mean_latency - prime.mean_latency) < 0.02 * prime.mean_latency
    assert engine.index.audit() == []


async def test_replay_under_another_model_misses_as_key_mismatch() -> None:
    """Incompatible keys: the same bodies under another `model` find nothing of theirs."""
    engine, clock = idle_engine()
    _, replay = await run_passes(engine, clock, (corpus("probe-52"), "forward"),
                                 (corpus("probe-52", OTHER_MODEL), "reverse"))
    primed_key = engine.key_for("qwen3-next")
    assert primed_key != engine.key_for(OTHER_MODEL)
    assert replay.hits == 0
    # Resident or retired since under the prime's key, every body is a key mismatch.
    assert replay.misses == {f"key_mismatch:ckpt={primed_key[:4]}": PROBE.bodies}


async def test_stores_per_request_decide_the_thrash() -> None:
    """Control: at 3 stores/request the same 52 bodies fit the rows and the forward replay hits."""
    engine, clock = idle_engine(stores_per_request=3)
    _, replay = await run_passes(engine, clock, *[(corpus("probe-52"), "forward")] * 2)
    assert replay.hits == PROBE.bodies and replay.misses == {}
    assert replay.end.offload["evictions"]["row"]["attempts"] == 0


async def test_completions_answer_usage_and_metrics_count_every_request() -> None:
    engine, clock = idle_engine()
    bodies = corpus("small-12")
    async with served(engine, clock) as client:
        p = await run_pass(client, bodies)
    for body, response in zip(bodies, p.responses, strict=True):
        request = sent(body)
        assert response["usage"] == {
            "prompt_tokens": len(request["prompt"]),
            "completion_tokens": request["max_tokens"],
            "total_tokens": len(request["prompt"]) + request["max_tokens"],
        }
        assert response["model"] == request["model"]
    n = len(bodies)
    assert p.metric("helios:num_requests_total") == n
    assert p.metric("helios:e2e_request_latency_seconds_count") == n
    assert p.metric("helios:prompt_tokens_total") == n * lane("small-12").prompt_tokens
    assert p.delta("lookups", "total") == n


async def test_a_seed_repeats_the_run_exactly() -> None:
    async def run(seed: int) -> tuple[dict[str, object], str]:
        engine, clock = idle_engine(seed=seed)
        async with served(engine, clock) as client:
            await run_pass(client, corpus("probe-52"), "forward")
            await run_pass(client, corpus("probe-52"), "reverse")
            offload = (await client.get("/debug/offload/snapshot")).json()["offload"]
            text = (await client.get("/metrics")).text
        # `_created` samples are wall-clock creation times of the registry's series.
        return offload, "\n".join(ln for ln in text.splitlines() if "_created" not in ln)

    first, again, other = await run(8), await run(8), await run(9)
    assert first == again
    # Another seed: the same counts (the model is deterministic) but other latency noise, and
    # so other times: the seconds of schema 3's histograms (their counts stay).
    assert counts(first[0]) == counts(other[0]) and first[1] != other[1]
    assert first[0] != other[0]



async def test_row_fraction_changes_the_probe_lane() -> None:
    """The allocator plan's arm: at the same 32 GiB, 640 rows hold the 624 the lane wants."""
    means, hits = {}, {}
    for fraction in (0.25, 0.3125):
        engine, clock = idle_engine(seed=4, **with_row_fraction(fraction))
        _, replay = await run_passes(engine, clock, *[(corpus("probe-52"), "forward")] * 2)
        means[fraction], hits[fraction] = replay.mean_latency, replay.hits
    assert hits == {0.25: 0, 0.3125: PROBE.bodies}
    assert means[0.3125] < 0.95 * means[0.25]  # past the admission gate's 5 % benefit


async def test_a_large_row_share_costs_the_long_context_lane() -> None:
    """The protected lane: 16 long bodies want half the pages. They fit at the default split and
    at 0.3125; at 0.75 (8192 pages) they thrash the pages, and the replay gets slower."""
    long_context = lane("long-context")
    replays = {}
    for fraction in (0.25, 0.3125, 0.75):
        engine, clock = idle_engine(seed=4, **with_row_fraction(fraction))
        _, replays[fraction] = await run_passes(
            engine, clock, *[(corpus("long-context"), "forward")] * 2
        )
    for fraction in (0.25, 0.3125):
        assert replays[fraction].hits == long_context.bodies
        assert replays[fraction].delta("evictions", "page", "attempts") == 0
    thrashed = replays[0.75]
    assert thrashed.hits == 0
    assert thrashed.misses == {"evicted": long_context.bodies}
    assert thrashed.delta("evictions", "page", "attempts") > 0
    assert thrashed.delta("evictions", "row", "attempts") == 0
    assert thrashed.mean_latency > 1.5 * replays[0.25].mean_latency
    assert abs(replays[0.3125].mean_latency / replays[0.25].mean_latency - 1) < 0.03
