"""The cases the planning notes say must never be admitted, each through the real command line
(`compare`) or the probe's verdict (`judge`), on constructed evidence (evidence_builder.py).

Each of these passed (exit 0, or a verdict) before the admission gate was rebuilt: a candidate
whose outputs stopped early, two declared changes at once, a budget declared away, an invalid
repetition replaced by an extra one, an extra repetition, a benefit inside the noise, another
client's traffic inside or between the probe's passes, a prime on a used incarnation, and a
same-order replay called order sensitivity.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from commands import cli
from lab.evidence.doc import judge
from tests.lab.evidence_builder import (
    BUDGET,
    WIDER,
    Arm,
    lanes,
    long_context,
    phase_of,
    probe_pair,
    semantic_verdict,
    write,
)

BASE = [0.400, 0.398, 0.402]
FAST = [0.330, 0.328, 0.332]  # 17.5 % faster
SMALL = [0.324, 0.322, 0.324]


def arms() -> tuple[Arm, Arm]:
    """The baseline and an allocator candidate (more rows, fewer pages, same 32 GiB)."""
    return lanes(Arm("base"), BASE, SMALL), lanes(Arm("cand", slabs=WIDER), FAST, SMALL)


def run(tmp_path: Path, baseline: dict[str, Any], candidate: dict[str, Any], *extra: str,
        capsys: pytest.CaptureFixture[str], semantic: bool = False) -> tuple[int, str]:
    a = write(tmp_path / "a.json", baseline)
    b = write(tmp_path / "b.json", candidate)
    flags = list(extra)
    if semantic:
        flags += ["--semantic-verdict", str(semantic_verdict(tmp_path / "s.json", a, b))]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(a), "--candidate", str(b), "--primary",
                  "probe-52", "--protected", "small-12", *long_context(baseline), *flags])
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out + out.err


def test_a_candidate_whose_outputs_stop_early_is_not_admitted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = arms()
    # Every candidate completion ends after 20 of its 32 tokens: less decode, so it looks faster.
    cand = Arm("cand", slabs=WIDER).lane("probe-52", FAST, tokens=20).lane(
        "small-12", SMALL, n=12, row_pressure=0).long()
    code, out = run(tmp_path, base.doc(), cand.doc(), "--allow-difference", "geometry",
                    capsys=capsys)
    assert code == 1, out
    assert re.search(r"strict output +FAILS: ", out), out
    assert "completion_tokens 20, the corpus fixed 32" in out
    assert "ADMITTED" not in out.replace("NOT ADMITTED", "")


def test_two_declared_differences_are_refused(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = arms()
    other = {**base.identity, "package": "helios-2.15.0+d2036807"}
    cand = Arm("cand", identity=other, slabs=WIDER).lane("probe-52", FAST).lane(
        "small-12", SMALL, n=12, row_pressure=0).long()
    code, out = run(tmp_path, base.doc(), cand.doc(), "--allow-difference", "geometry",
                    "--allow-difference", "package", capsys=capsys)
    assert code == 2, out
    assert "one change per comparison" in out


def test_the_budget_can_never_be_declared_away(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = arms()
    larger = Arm("cand", slabs=WIDER, budget=2 * BUDGET).lane("probe-52", FAST).lane(
        "small-12", SMALL, n=12, row_pressure=0).long()
    code, out = run(tmp_path, base.doc(), larger.doc(), "--allow-difference", "geometry",
                    "--allow-difference", "budget", capsys=capsys)
    assert code == 2, out
    assert "a larger cache allocation is a separate resource tradeoff" in out


def test_an_invalid_repetition_refuses_and_is_not_replaced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = arms()
    # Four candidate repetitions; the second ran across a restart. Dropping it and counting the
    # fourth would choose the evidence after seeing it.
    cand = Arm("cand", slabs=WIDER).lane("probe-52", [*FAST, 0.330]).lane(
        "small-12", SMALL, n=12, row_pressure=0).long()
    doc = cand.doc()
    bad = phase_of(doc, "probe-52/2")
    bad.update(valid=False, invalid_reasons=["generation changed from g-1 to g-2: the engine "
                                             "restarted during the phase"])
    code, out = run(tmp_path, base.doc(), doc, "--allow-difference", "geometry", capsys=capsys)
    assert code == 2, out
    assert "cannot compare: lane probe-52, candidate: repetition probe-52/2 is invalid" in out


def test_an_extra_repetition_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = arms()
    cand = Arm("cand", slabs=WIDER).lane("probe-52", [*FAST, 0.330]).lane(
        "small-12", SMALL, n=12, row_pressure=0).long()
    code, out = run(tmp_path, base.doc(), cand.doc(), "--allow-difference", "geometry",
                    capsys=capsys)
    assert code == 2, out
    assert ("lane probe-52: 3 repetitions in the baseline arm, 4 in the candidate arm: "
            "repetitions are matched one to one") in out


def test_a_benefit_inside_the_noise_is_not_admitted(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    noisy = [0.36, 0.40, 0.44]
    # Pooled 5.1 % faster, but the spread is 29 % and the first candidate repetition is slower
    # than the baseline repetition it is paired with.
    cand_means = [0.38, 0.325, 0.434]
    base = Arm("base").lane("probe-52", noisy).lane("small-12", SMALL, n=12, row_pressure=0).long()
    cand = Arm("cand", slabs=WIDER).lane("probe-52", cand_means).lane(
        "small-12", SMALL, n=12, row_pressure=0).long()
    code, out = run(tmp_path, base.doc(), cand.doc(), "--allow-difference", "geometry",
                    capsys=capsys)
    assert code == 1, out
    assert re.search(r"primary +FAILS: ", out), out
    assert "pair 1: +5.6%: a regression, not a benefit" in out


@pytest.mark.parametrize(("case", "why"), [
    ({"foreign_in_replay": 1}, "the engine finished 53 requests in the replay phase 'p/reverse-2', "
                               "the probe sent 52: another client's traffic"),
    ({"foreign_between": 2}, "2 lookups and 2 finished requests reached the engine between "
                             "'p/forward-1' and 'p/reverse-2'"),
    ({"before_prime": 5}, "the prime 'p/forward-1' began on an incarnation that had served 5 "
                          "lookups already: the prime needs a fresh incarnation"),
])
def test_traffic_the_probe_did_not_send_voids_its_verdict(case: dict[str, int],
                                                          why: str) -> None:
    phases, passes = probe_pair(**case)
    judged = judge(phases, "p/forward-1", "p/reverse-2", passes)
    assert judged["verdict"] == "invalid", judged
    assert why in judged["why"]
    clean_phases, clean_passes = probe_pair()
    assert judge(clean_phases, "p/forward-1", "p/reverse-2",
                 clean_passes)["verdict"] == "order_sensitive"


def test_a_same_order_replay_with_hits_is_reuse() -> None:
    phases, passes = probe_pair(orders=("forward", "forward"), hits=12)
    judged = judge(phases, "p/forward-1", "p/forward-2", passes)
    assert judged["verdict"] == "reuse", judged
    assert judged["reading"] == ("same order (forward -> forward): the replay reused what the "
                                 "prime stored; not evidence of order sensitivity")
