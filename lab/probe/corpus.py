"""A corpus: the completion bodies the probe and observer-cost send, one JSON object a line, each
kept byte for byte as the file holds it, and the output length each body fixes (`max_tokens`
with `min_tokens` equal to it, or `ignore_eos`)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter import jsonfile
from lab.probe.send import Body


class CorpusError(ValueError):
    """The corpus file cannot be used; nothing was sent."""


@dataclass(frozen=True)
class Corpus:
    path: Path
    bodies: tuple[bytes, ...]  # exactly the bytes of each line, without its newline
    expected: tuple[int | None, ...] = ()  # the output length each body fixes (None: none)
    lines: tuple[int, ...] = ()  # each body's line number in the file

    @property
    def hashes(self) -> tuple[str, ...]:
        return tuple(hashlib.sha256(b).hexdigest() for b in self.bodies)

    def sendable(self) -> list[Body]:
        expected = self.expected or (None,) * len(self.bodies)
        return [Body(raw, sha, n) for raw, sha, n in zip(self.bodies, self.hashes, expected,
                                                         strict=True)]

    def require_fixed_lengths(self) -> None:
        """CorpusError naming the first body that does not fix its output length."""
        for n, line in zip(self.expected, self.lines, strict=True):
            if n is None:
                raise CorpusError(
                    f"{self.path}:{line}: the body does not fix its output length: give "
                    '"max_tokens" with "min_tokens" equal to it or "ignore_eos": true (an '
                    "engine that stops early would look faster; python -m simulator corpus "
                    "writes bodies that fix it)")


def fixed_length(body: Mapping[str, Any]) -> int | None:
    """The output length a completion body fixes, or None."""
    n = body.get("max_tokens")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        return None
    if body.get("ignore_eos") is True or body.get("min_tokens") == n:
        return n
    return None


def read_corpus(path: Path) -> Corpus:
    """Every non-blank line must be a JSON object (a completion body)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None
    bodies, expected, lines = [], [], []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        line = raw.removesuffix(b"\r")
        if not line.strip():
            continue
        try:
            body = jsonfile.loads(line, f"{path}:{lineno}")
        except jsonfile.JsonInputError as exc:
            raise CorpusError(str(exc)) from None
        if not isinstance(body, dict):
            raise CorpusError(f"{path}:{lineno}: a body must be a JSON object")
        bodies.append(line)
        expected.append(fixed_length(body))
        lines.append(lineno)
    if not bodies:
        raise CorpusError(f"{path}: no bodies")
    return Corpus(path, tuple(bodies), tuple(expected), tuple(lines))
