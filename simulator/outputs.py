"""What the simulated model answers: how many tokens, and which text.

The answer is a pure function of the checkpoint, the model name and the prompt's token ids, so
one body gets the same text from every incarnation, arm and run (an allocator change must not
change it; another checkpoint does). Like a real model, it stops on its own (an end-of-sequence
token) after a length of its own, between NATURAL_MIN and NATURAL_MAX tokens, unless the request
fixes the length the way vLLM and SGLang let it: `ignore_eos` (generate until `max_tokens`) or
`min_tokens` (no end of sequence before that many). `max_tokens` always caps it. A faulty engine
(`early_stop`) ends every completion after that many tokens, whatever was asked.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Final

NATURAL_MIN: Final = 8
NATURAL_MAX: Final = 256
WORDS: Final = ("the", "host", "tier", "keeps", "rows", "and", "pages", "for", "reuse", "later",
                "a", "prefix", "cache", "stores", "state", "restores")


def _seed(checkpoint: str, model: str, prompt: Sequence[int]) -> bytes:
    h = hashlib.sha256(f"{checkpoint}|{model}|".encode())
    h.update(struct.pack(f"<{len(prompt)}I", *prompt))
    return h.digest()


def natural_length(checkpoint: str, model: str, prompt: Sequence[int]) -> int:
    """Where the model would emit its end-of-sequence token for this prompt."""
    seed = _seed(checkpoint, model, prompt)
    return NATURAL_MIN + int.from_bytes(seed[:4], "little") % (NATURAL_MAX - NATURAL_MIN + 1)


def length(checkpoint: str, model: str, prompt: Sequence[int], max_tokens: int,
           min_tokens: int = 0, ignore_eos: bool = False,
           early_stop: int | None = None) -> tuple[int, str]:
    """Tokens generated and the finish reason (`length`: max_tokens reached; `stop`: an end of
    sequence, the model's or the fault's)."""
    n = max_tokens if ignore_eos else min(max_tokens, max(min_tokens,
                                                          natural_length(checkpoint, model,
                                                                         prompt)))
    if early_stop is not None:
        n = min(n, early_stop)
    return n, "length" if n == max_tokens else "stop"


def text(checkpoint: str, model: str, prompt: Sequence[int], tokens: int) -> str:
    """The first `tokens` words of the model's answer (one word a token)."""
    stream = hashlib.shake_256(_seed(checkpoint, model, prompt)).digest(max(tokens, 1))
    return " ".join(WORDS[b % len(WORDS)] for b in stream[:tokens])
