"""The experiments' lanes as corpora: JSONL files of completion request bodies, generated exactly.

Every body is an OpenAI-style completion request a real engine accepts as is::

    {"model": "qwen3-next", "prompt": [151644, 8948, ...], "max_tokens": 32, "min_tokens": 32,
     "ignore_eos": true, "temperature": 0}

The output length is fixed the way the restore preflight fixes it (exporter/restore/preflight.py):
`max_tokens` caps it, and `min_tokens` equal to it with `ignore_eos` (vLLM and SGLang sampling
parameters) keep the engine from stopping sooner, so every request of a lane decodes exactly
`max_tokens` tokens and an engine that stops early breaks the contract instead of looking fast.

The prompt is token ids, not text, so no tokenizer stands between the corpus and the engine's
blocks: body ``i`` of a lane is the chat template followed by ids drawn from SHAKE-256 of the
lane's name and ``i``. Nothing depends on Python's random module or the machine, so a corpus and
its bodies' SHA-256 are the same everywhere, every time (the tests pin them).

``python -m simulator corpus NAME > NAME.jsonl`` writes one (``--model`` sets the model field).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

# Every prompt starts with the same short chat template (Qwen's ids for "<|im_start|>system\nYou
# are a helpful assistant."), which the engine's GPU-resident cache always reuses: the control
# runs' 9 prompt tokens a request (docs/experiments.md).
TEMPLATE: tuple[int, ...] = (151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13)
VOCAB = 150_000
# Ids below this are left to special and very common tokens.
FIRST_ID = 1000
DEFAULT_MODEL = "qwen3-next"


@dataclass(frozen=True)
class Lane:
    name: str
    bodies: int
    prompt_tokens: int
    max_tokens: int
    what: str

    def prompt(self, i: int) -> list[int]:
        if not 0 <= i < self.bodies:
            raise IndexError(f"{self.name} has {self.bodies} bodies, not {i + 1}")
        n = self.prompt_tokens - len(TEMPLATE)
        stream = hashlib.shake_256(f"helios-sim-corpus/{self.name}/{i}".encode()).digest(4 * n)
        span = VOCAB - FIRST_ID
        return [*TEMPLATE, *(x % span + FIRST_ID for x in struct.unpack(f"<{n}I", stream))]

    def body(self, i: int, model: str = DEFAULT_MODEL) -> dict[str, Any]:
        # Ask for exactly max_tokens (vLLM/SGLang's ignore_eos and min_tokens, as the restore
        # preflight does), so that an output of another length is a failure, not the model's choice.
        return {"model": model, "prompt": self.prompt(i), "max_tokens": self.max_tokens,
                "min_tokens": self.max_tokens, "ignore_eos": True, "temperature": 0}

    def lines(self, model: str = DEFAULT_MODEL) -> Iterator[str]:
        """The corpus as JSONL lines (compact JSON, the bytes whose SHA-256 identify a body)."""
        for i in range(self.bodies):
            yield json.dumps(self.body(i, model), separators=(",", ":"))


# A lane is one line here; its bodies follow from its name. 3100 tokens = 48 usable blocks of
# 64; at 12 stores per request each body wants 12 rows and 48 pages, so 52 bodies want 624 of
# the 512 rows a quarter of 32 GiB holds but only 2496 of its 24576 pages. 12 bodies (144 rows)
# fit. The long-context lane turns it around: 16 bodies of 768 usable blocks want 192 rows but
# 12288 pages, half the page slab: it fits at the default split and thrashes once rows take
# more than 62.5 % of the budget.
LANES: dict[str, Lane] = {
    lane.name: lane
    for lane in (
        Lane("probe-52", 52, 3100, 32,
             "the cache-order probe: prime forward, replay reverse (or forward)"),
        Lane("control-52", 52, 3100, 32,
             "a fresh 52-body prime/forward control with bodies the probe never sent"),
        Lane("small-12", 12, 3100, 32,
             "a small working set that fits the rows: replays hit"),
        Lane("long-context", 16, 49_216, 32,
             "page-heavy long context: few rows, half the page slab"),
        # The observer-cost protocol's retained fixture: decode-heavy (64 output tokens, 0.64 s of a
        # simulated request's 0.65 s), so that an observer's cost per generated token shows.
        Lane("fixture-1024", 16, 1024, 64,
             "observer cost: 1024-token prompts, exactly 64 output tokens"),
    )
}


def lane(name: str) -> Lane:
    try:
        return LANES[name]
    except KeyError:
        raise ValueError(f"unknown corpus {name!r}; choose one of {', '.join(LANES)}") from None


def write_corpus(name: str, out: TextIO, model: str = DEFAULT_MODEL) -> int:
    """Write corpus ``name`` as JSONL to ``out``; the number of bodies."""
    n = 0
    for line in lane(name).lines(model):
        out.write(line + "\n")
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simulator corpus",
        description="Write a corpus (JSONL of completion request bodies) to stdout.",
        epilog="\n".join(f"{name}: {spec.bodies} bodies of {spec.prompt_tokens} tokens, "
                         f"{spec.what}" for name, spec in LANES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", choices=tuple(LANES), help="the corpus")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="the bodies' model field; another value changes the engine's "
                        "checkpoint key (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        write_corpus(args.name, sys.stdout, args.model)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader left; say nothing more to a closed pipe
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
