from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.corpora import FIRST_ID, LANES, TEMPLATE, VOCAB, lane, write_corpus
from simulator.engine import EngineConfig
from simulator.index import PrefixIndex
from simulator.slabs import SlabPool

ROOT = Path(__file__).resolve().parents[2]

# SHA-256 of each corpus file as `python -m simulator corpus NAME` writes it. A change here changes what every
# recorded probe sent: make it on purpose, and say so in the commit.
PINNED = {
    "probe-52": "fca2f413265559794df0c6ff6b7f1f549bb9ede6f837b0396007d2fb0f567f91",
    "control-52": "708e63fa4374ec0b76a09f2d0270169a50e30b03fe2a56280f51fc1c6aef22b5",
    "small-12": "fb374be6488c931afa2a5a088c473593711c7be51d123b609cb36f12abc3d6af",
    "long-context": "dfc36ea53fb95d918e7d095ba6c8de34a500485c1f20d35927ba2127df8a2b8f",
    "fixture-1024": "2795b49cd24714afc0383f940a2942af9c27d68e5c381b71a0824a31c2f6e30f",
}


def text(name: str, model: str | None = None) -> str:
    out = io.StringIO()
    n = write_corpus(name, out, model) if model else write_corpus(name, out)
    assert n == lane(name).bodies
    return out.getvalue()


@pytest.mark.parametrize("name", sorted(LANES))
def test_corpora_are_pinned_byte_for_byte(name: str) -> None:
    assert set(PINNED) == set(LANES)
    assert hashlib.sha256(text(name).encode()).hexdigest() == PINNED[name]


@pytest.mark.parametrize("name", sorted(LANES))
def test_bodies_are_distinct_completion_requests(name: str) -> None:
    spec = lane(name)
    bodies = [json.loads(line) for line in text(name).splitlines()]
    assert len(bodies) == spec.bodies
    for body in bodies:
        assert set(body) == {"model", "prompt", "max_tokens", "min_tokens", "ignore_eos",
                             "temperature"}
        assert body["model"] == "qwen3-next" and body["temperature"] == 0
        # the output length is fixed: no end of sequence before max_tokens
        assert body["max_tokens"] == body["min_tokens"] == spec.max_tokens
        assert body["ignore_eos"] is True
        prompt = body["prompt"]
        assert len(prompt) == spec.prompt_tokens and tuple(prompt[: len(TEMPLATE)]) == TEMPLATE
        assert all(FIRST_ID <= t < VOCAB for t in prompt[len(TEMPLATE) :])
    # Distinct from the first block on: no two bodies share a stored prefix.
    firsts = {tuple(b["prompt"][:64]) for b in bodies}
    assert len(firsts) == spec.bodies


def test_lanes_share_no_body() -> None:
    seen: set[tuple[int, ...]] = set()
    for name in LANES:
        spec = lane(name)
        heads = {tuple(spec.prompt(i)[:64]) for i in range(spec.bodies)}
        assert not heads & seen, name
        seen |= heads


def test_the_model_field_is_the_only_difference_under_another_model() -> None:
    base = text("small-12").splitlines()
    other = text("small-12", "qwen3-next-lora-support").splitlines()
    for a, b in zip(base, other, strict=True):
        ja, jb = json.loads(a), json.loads(b)
        assert jb.pop("model") == "qwen3-next-lora-support"
        ja.pop("model")
        assert ja == jb


def test_lane_demands_at_the_generic_geometry() -> None:
    """What the lanes are for, in rows and pages at 12 stores/request (docs/simulator.md)."""
    pool = SlabPool()
    index = PrefixIndex(pool, EngineConfig.tokens_per_page)
    stores = 12

    def demand(name: str) -> tuple[int, int]:
        spec = lane(name)
        return spec.bodies * stores, spec.bodies * index.usable_blocks(spec.prompt_tokens)

    rows, pages = pool.row.capacity, pool.page.capacity
    assert (rows, pages) == (512, 24576)
    assert demand("probe-52") == (624, 2496)  # rows overflow, pages ~90 % free
    assert demand("control-52") == demand("probe-52")
    assert demand("small-12")[0] < rows
    lc_rows, lc_pages = demand("long-context")
    assert lc_rows < rows and pages / 2 == lc_pages  # half the page slab
    # The observer-cost fixture fits: warmed once, every repetition's requests hit the host tier.
    assert demand("fixture-1024") == (192, 240)


def test_unknown_corpus_is_rejected() -> None:
    with pytest.raises(ValueError, match="probe-52"):
        lane("probe-53")
    with pytest.raises(IndexError):
        lane("small-12").prompt(12)


@pytest.mark.e2e
def test_write_corpus_from_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "corpus", "small-12"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    assert done.stdout == text("small-12")
    other = subprocess.run(
        [sys.executable, "-m", "simulator", "corpus", "small-12", "--model", "other-model"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    assert other.stdout == text("small-12", "other-model")
