"""`helios-exporter compare` through the real command line on constructed evidence
(evidence_builder.py): the arms the tests start from and how a test runs the command and reads a
gate's line (tests/lab/compare/test_compare*.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from commands import cli
from tests.lab.evidence_builder import (
    WIDER,
    Arm,
    lanes,
    long_context,
    semantic_verdict,
    write,
)

SOURCE = {"source_commit": "47581cca" + "0" * 32, "source_diff": "c" * 64}
UNCHECKED = ("; not checked by this gate: functional acceptance, allocation-safety review, "
             "numerical restore review (no --team-record)")
BASE = [0.400, 0.398, 0.402]
FAST = [0.330, 0.328, 0.332]  # 17.5 % faster
SMALL = [0.324, 0.322, 0.324]


def base_arm(**kwargs: Any) -> Arm:
    return lanes(Arm("base", **kwargs), BASE, SMALL)


def cand_arm(fast: list[float] = FAST, small: list[float] = SMALL, **kwargs: Any) -> Arm:
    kwargs.setdefault("slabs", WIDER)
    return lanes(Arm("cand", **kwargs), fast, small)


def run(tmp_path: Path, baseline: dict[str, Any], candidate: dict[str, Any], *extra: str,
        capsys: pytest.CaptureFixture[str], change: str | None = "allocator",
        semantic: bool = True) -> tuple[int, str]:
    a = write(tmp_path / "a.json", baseline)
    b = write(tmp_path / "b.json", candidate)
    flags = list(extra) + (["--allow-difference", change] if change else [])
    if semantic:
        flags += ["--semantic-verdict", str(semantic_verdict(tmp_path / "s.json", a, b))]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(a), "--candidate", str(b), "--primary",
                  "probe-52", "--protected", "small-12", *long_context(baseline), *flags])
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out + out.err


def gate(out: str, name: str) -> str:
    """The status and detail a gate line prints."""
    match = re.search(rf"^  {re.escape(name)} +(.*)$", out, re.M)
    assert match, out
    return match.group(1)
