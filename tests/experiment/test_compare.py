"""`helios-exporter compare` on constructed evidence, through the real command line."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from evidence_builder import GEOMETRY, IDENTITY, evidence, lane, phase, write

from exporter import cli

BASE = [0.400, 0.398, 0.402]
FAST = [0.330, 0.328, 0.332]  # 17.5 % faster
SMALL = [0.324, 0.322, 0.324]


def run(tmp_path: Path, baseline: dict[str, Any], candidate: dict[str, Any], *extra: str,
        capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    a = write(tmp_path / "a.json", baseline)
    b = write(tmp_path / "b.json", candidate)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(a), "--candidate", str(b), "--primary",
                  "probe-52", "--protected", "small-12", *extra])
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out + out.err


def test_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST), lane("small-12", SMALL)), capsys=capsys)
    assert code == 0, out
    assert "PASS" in out
    assert "change -17.5%: benefit 17.5% >= the required 5.0%: pass" in out
    # every denominator: requests per repetition and per lane, both arms
    assert out.count("       52       156") == 4
    assert "probe-52/forward-1" not in out  # the prime is not a repetition
    assert "0.4000 0.3980 0.4020" in out  # each repetition's mean
    assert "1.0%" in out  # spread of the baseline's repetitions: (0.402 - 0.398) / 0.4
    assert "p50/p95 are estimated from the latency histogram's buckets" in out
    assert "do not gate" in out


def test_too_little_benefit_fails_and_says_why(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    slight = [m * 0.97 for m in BASE]
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", slight), lane("small-12", SMALL)), capsys=capsys)
    assert code == 1, out
    assert "gate failed: lane probe-52 (primary): benefit 3.0% < the required 5.0%" in out


def test_a_protected_regression_fails_and_says_why(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    slower = [m * 1.05 for m in SMALL]
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST), lane("small-12", slower)), capsys=capsys)
    assert code == 1, out
    assert "gate failed: lane small-12 (protected): regression 5.0% > the allowed 3.0%" in out
    assert "probe-52 (primary)" not in out.split("gate failed")[1]


def test_thresholds_are_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slower = [m * 1.05 for m in SMALL]
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST), lane("small-12", slower)),
                    "--max-regression", "0.06", "--min-benefit", "0.17", capsys=capsys)
    assert code == 0, out
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST), lane("small-12", SMALL)),
                    "--min-benefit", "0.18", capsys=capsys)
    assert code == 1, out


def test_too_few_repetitions_is_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST[:2]), lane("small-12", SMALL)), capsys=capsys)
    assert code == 2, out
    assert "lane probe-52: 2 valid repetitions in the candidate arm, 3 needed" in out


def test_an_invalid_repetition_does_not_count(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    phases = lane("probe-52", FAST)
    phases[2] = phase("probe-52/2", [0.1] * 52, valid=False, generation="g-2")
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(phases, lane("small-12", SMALL)), capsys=capsys)
    assert code == 2, out
    assert "2 valid repetitions in the candidate arm" in out
    assert "probe-52/2: invalid (generation changed" in out
    # with a fourth valid repetition the lane is complete again, and the invalid one still ignored
    phases.append(phase("probe-52/4", [0.330] * 52))
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(phases, lane("small-12", SMALL)), capsys=capsys)
    assert code == 0, out
    assert "0.3300 0.3320 0.3300" in out
    assert "not counted (candidate): probe-52/2: invalid" in out


def test_open_phases_and_phases_without_requests_do_not_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    phases = lane("probe-52", FAST)
    phases[1] = phase("probe-52/1", [0.33] * 52, state="open")
    phases[3] = phase("probe-52/3", [])
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(phases, lane("small-12", SMALL)), capsys=capsys)
    assert code == 2, out
    assert "probe-52/1: still open" in out
    assert "probe-52/3: no finished requests" in out


def test_unmatched_denominators_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST, n=51), lane("small-12", SMALL)),
                    capsys=capsys)
    assert code == 2, out
    assert "lane probe-52: repetitions are not matched: 51, 52 requests per repetition" in out


def test_an_undeclared_identity_difference_refuses(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    other = {**IDENTITY, "checkpoint": "qwen3-next-w4a16-r4"}
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST, identity=other),
                             lane("small-12", SMALL, identity=other)), capsys=capsys)
    assert code == 2, out
    assert ("the arms differ in checkpoint (qwen3-next-w4a16-r3 vs qwen3-next-w4a16-r4), which "
            "was not declared") in out
    assert "--allow-difference checkpoint" in out
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST, identity=other),
                             lane("small-12", SMALL, identity=other)),
                    "--allow-difference", "checkpoint", capsys=capsys)
    assert code == 0, out
    assert "checkpoint    DIFFERS: qwen3-next-w4a16-r3  ->  qwen3-next-w4a16-r4" in out


def test_a_geometry_difference_must_be_declared(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    wider = {**GEOMETRY, "row": {**GEOMETRY["row"], "capacity": 640}}
    cand = evidence(lane("probe-52", FAST, slabs=wider), lane("small-12", SMALL, slabs=wider))
    base = evidence(lane("probe-52", BASE), lane("small-12", SMALL))
    code, out = run(tmp_path, base, cand, capsys=capsys)
    assert code == 2 and "the arms differ in geometry" in out
    code, out = run(tmp_path, base, cand, "--allow-difference", "geometry", capsys=capsys)
    assert code == 0, out
    code, out = run(tmp_path, base, base, "--allow-difference", "geometry", capsys=capsys)
    assert "declared, but both arms have" in out


def test_an_arm_that_mixes_engines_refuses(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    other = {**IDENTITY, "package": "helios-2.15.0"}
    code, out = run(tmp_path, evidence(lane("probe-52", BASE),
                                       lane("small-12", SMALL, identity=other)),
                    evidence(lane("probe-52", FAST), lane("small-12", SMALL)),
                    "--allow-difference", "package", capsys=capsys)
    assert code == 2, out
    assert "the baseline arm mixes engines: package is" in out


def test_a_change_within_the_spread_is_flagged(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    noisy = [0.36, 0.40, 0.44]
    code, out = run(tmp_path, evidence(lane("probe-52", noisy), lane("small-12", SMALL)),
                    evidence(lane("probe-52", [m * 0.93 for m in noisy]),
                             lane("small-12", SMALL)), capsys=capsys)
    assert code == 0
    assert "smaller than the spread between repetitions" in out


def test_p50_and_p95_come_from_the_buckets(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    spread = [0.31] * 40 + [0.44] * 12  # p50 in (0.3, 0.325], p95 in (0.425, 0.45]
    _, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence([phase(f"probe-52/{i}", spread) for i in (1, 2, 3)],
                             lane("small-12", SMALL)), capsys=capsys)
    row = next(line for line in out.splitlines() if line.strip().startswith("candidate")
               and "156" in line)
    mean, p50, p95 = (float(v) for v in re.findall(r"([0-9.]+) s\b", row))
    assert mean == pytest.approx((0.31 * 40 + 0.44 * 12) / 52)
    assert 0.3 < p50 <= 0.325 and 0.425 < p95 <= 0.45, row


@pytest.mark.parametrize("content", ["not json", "[]", '{"phases": 3}'])
def test_unreadable_evidence_is_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  content: str) -> None:
    (tmp_path / "bad.json").write_text(content)
    good = write(tmp_path / "good.json", evidence(lane("probe-52", BASE)))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(tmp_path / "bad.json"), "--candidate", str(good),
                  "--primary", "probe-52"])
    assert exit_info.value.code == 2
    assert "bad.json" in capsys.readouterr().err


def test_every_repetition_shows_what_was_sent_and_what_failed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST), lane("small-12", SMALL)), capsys=capsys)
    assert code == 0, out
    rows = [line.split() for line in out.split("repetitions (sent and failed")[1].splitlines()
            if line.startswith(("probe-52 ", "small-12 "))]
    assert len(rows) == 12  # two lanes, two arms, three repetitions
    assert rows[0][:6] == ["probe-52", "baseline", "probe-52/1", "52", "0", "52"]
    assert rows[-1][:6] == ["small-12", "candidate", "small-12/3", "52", "0", "52"]


@pytest.mark.parametrize("finished", [50, 52])
def test_a_repetition_with_failed_outputs_refuses(tmp_path: Path, finished: int,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    phases = lane("probe-52", FAST)
    # 52 sent, 2 failed; an engine may leave the failed ones out of its latency histogram (50
    # finished) or time its error answers too (52): either way the repetition is void.
    phases[2] = phase("probe-52/2", [0.330] * finished, sent=52, failed=2)
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(phases, lane("small-12", SMALL)), capsys=capsys)
    assert code == 2, out
    assert ("cannot compare: lane probe-52, candidate: probe-52/2: 2 of 52 requests failed "
            "(an output failure voids the repetition") in out
    row = next(line.split() for line in out.splitlines() if line.startswith("probe-52 ")
               and "probe-52/2" in line and "candidate" in line)
    assert row[3:6] == ["52", "2", str(finished)]  # sent, failed, finished


def test_a_repetition_without_a_probe_record_refuses(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, evidence(lane("probe-52", BASE, recorded=False),
                                       lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST), lane("small-12", SMALL)), capsys=capsys)
    assert code == 2, out
    assert ("lane probe-52, baseline: probe-52/1: no probe record, so its sent and failed "
            "requests are unknown (write the evidence with --probe-record") in out
    assert "no record" in out


def test_phases_bracketed_by_hand_compare_when_declared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Another load generator drove the engine between `phase begin|end`: no probe record. Declared
    # with --allow-unrecorded, the gate runs on the engine's denominators and says what it lacks.
    base = evidence(lane("probe-52", BASE, recorded=False), lane("small-12", SMALL, recorded=False))
    cand = evidence(lane("probe-52", FAST, recorded=False), lane("small-12", SMALL, recorded=False))
    code, out = run(tmp_path, base, cand, "--allow-unrecorded", capsys=capsys)
    assert code == 0, out
    assert "--allow-unrecorded: probe-52/1, probe-52/2, probe-52/3" in out
    assert "failed requests are unknown to this gate" in out
    # A recorded repetition with failed outputs still refuses under the flag.
    phases = lane("probe-52", FAST)
    phases[1] = phase("probe-52/1", [0.330] * 52, sent=52, failed=1)
    code, out = run(tmp_path, base, evidence(phases, lane("small-12", SMALL)),
                    "--allow-unrecorded", capsys=capsys)
    assert code == 2, out
    assert "1 of 52 requests failed" in out


def test_other_traffic_in_a_repetition_refuses(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    phases = lane("small-12", SMALL)
    phases[1] = phase("small-12/1", [0.324] * 13, sent=12)
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST), phases), capsys=capsys)
    assert code == 2, out
    assert ("small-12/1: the engine finished 13 requests, the probe sent 12: other traffic "
            "reached the engine during the phase") in out


def test_other_bytes_or_order_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", FAST, sequence="reversed"),
                             lane("small-12", SMALL)), capsys=capsys)
    assert code == 2, out
    assert "lane probe-52: the repetitions sent different bytes or another order" in out


def test_no_change_is_zero_percent_not_minus_zero(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, evidence(lane("probe-52", BASE), lane("small-12", SMALL)),
                    evidence(lane("probe-52", [m * 1.0001 for m in BASE]),
                             lane("small-12", SMALL)), capsys=capsys)
    assert code == 1, out
    assert "change 0.0%: benefit 0.0% < the required 5.0%: FAIL" in out
    assert "-0.0%" not in out and "+0.0%" not in out


@pytest.mark.parametrize(("doc", "field"), [
    ({"phases": [1, 2]}, "phases[0]: "),
    ({"phases": [{**phase("probe-52/1", [0.3]), "deltas": {"e2e_latency_seconds": {
        "count": "x", "sum": 0.3}}}]}, "phases[0].deltas.e2e_latency_seconds.count: "),
    ({"phases": [{**phase("probe-52/1", [0.3]), "begin": {"budget_bytes": "big"}}]},
     "phases[0].begin.budget_bytes: "),
    ({"phases": [{**phase("probe-52/1", [0.3]), "deltas": {"e2e_latency_seconds": {
        "count": 1, "sum": 0.3, "buckets": [["fast", 1]]}}}]},
     "phases[0].deltas.e2e_latency_seconds.buckets: bucket 0: bound 'fast' is not a number"),
    ({"phases": [phase("a/1", [0.3]), phase("a/1", [0.3])]}, "phases: the names a/1 occur"),
    ({"phases": [], "passes": [{"phase": "a/1", "sent": "52", "failed": 0,
                                "sequence_sha256": "0" * 64}]}, "passes[0].sent: "),
])
def test_malformed_evidence_is_refused_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict[str, Any],
        field: str) -> None:
    for p in doc["phases"]:
        if isinstance(p, dict):
            p.pop("_pass", None)
    bad = write(tmp_path / "bad.json", doc)
    good = write(tmp_path / "good.json", evidence(lane("probe-52", BASE)))
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(good), "--candidate", str(bad),
                  "--primary", "probe-52"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert f"helios-exporter compare: {bad}: not a usable evidence.json: {field}" in err
    assert "Traceback" not in err
