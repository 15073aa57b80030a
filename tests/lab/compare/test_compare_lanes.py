"""`helios-exporter compare` on constructed evidence, through the real command line: every lane
gated, the counter evidence, the figures shown (quantiles, drops) and each way the evidence can
fail to make a comparison (test_compare.py has the gates themselves)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from commands import cli
from tests.lab.compare.compare_run import BASE, FAST, SMALL, UNCHECKED, base_arm, cand_arm, gate, run
from tests.lab.evidence_builder import (
    GPU_PREFIX,
    IDENTITY,
    LONG,
    PROMPT,
    WIDER,
    Arm,
    lanes,
    recount,
    semantic_verdict,
    write,
)


def test_every_lane_is_gated_whatever_the_command_line_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: the candidate regresses long-context, which the command line leaves
    out; it is gated as protected all the same."""
    slow = [m * 4.31 for m in LONG]  # +331 %
    a = write(tmp_path / "a.json", base_arm().doc())
    b = write(tmp_path / "b.json", lanes(Arm("cand", slabs=WIDER), FAST, SMALL, slow).doc())
    verdict = semantic_verdict(tmp_path / "s.json", a, b)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(a), "--candidate", str(b), "--primary",
                  "probe-52", "--protected", "small-12", "--allow-difference", "allocator",
                  "--semantic-verdict", str(verdict)])
    out = capsys.readouterr().out
    assert exit_info.value.code == 1, out
    assert "long-context (protected, not named: protected)" in gate(out, "lanes")
    assert gate(out, "protected").startswith(
        "FAILS: long-context: pair 1: +331.0%: more than the allowed 3.0% slower")
    assert out.splitlines()[-1] == f"NOT ADMITTED: failed: protected{UNCHECKED} (exit 1)"


def test_a_lane_in_one_arm_only_refuses(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    cand = cand_arm().lane("extra-8", SMALL, n=8, row_pressure=0)
    code, out = run(tmp_path, base_arm().doc(), cand.doc(), capsys=capsys)
    assert code == 2, out
    assert ("lane extra-8 is in the candidate arm only (no phase extra-8/r in the baseline "
            "arm): every lane present in either arm is gated") in out
    code, out = run(tmp_path, base_arm().doc(), cand_arm().doc(), "--protected", "nowhere",
                    capsys=capsys)
    assert code == 2 and "lane nowhere (named on the command line) is in neither arm" in out


def test_an_allocator_change_needs_both_protected_lane_kinds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = Arm("base").lane("probe-52", BASE).lane("small-12", SMALL, n=12, row_pressure=0)
    cand = Arm("cand", slabs=WIDER).lane("probe-52", FAST).lane("small-12", SMALL, n=12,
                                                                  row_pressure=0)
    code, out = run(tmp_path, base.doc(), cand.doc(), capsys=capsys)
    assert code == 1, out
    assert gate(out, "lanes").startswith(
        "FAILS: an allocator change needs a page-heavy long context protected lane, "
        "the baseline shows small working set: small-12; page-heavy long context: none")
    # the primary lane alone: nothing shows the change leaves the others alone
    base, cand = Arm("base").lane("probe-52", BASE), Arm("cand", slabs=WIDER).lane("probe-52", FAST)
    a, b = write(tmp_path / "a.json", base.doc()), write(tmp_path / "b.json", cand.doc())
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(a), "--candidate", str(b), "--primary",
                  "probe-52", "--allow-difference", "allocator", "--semantic-verdict",
                  str(semantic_verdict(tmp_path / "s.json", a, b))])
    out = capsys.readouterr().out
    assert exit_info.value.code == 1, out
    assert gate(out, "protected").startswith("not evaluated: no protected lane")
    assert out.splitlines()[-1] == ("NOT ADMITTED: failed: lanes; not evaluated: protected"
                                    f"{UNCHECKED} (exit 1)")


# A larger cache allocation under the same budget (the review's case): 28 GiB of slabs in the
# baseline, 32 GiB in the candidate; and slabs that do not fit the budget they report.
SMALLER = {"row": {"capacity": 512, "free": 0, "record_bytes": 16777216},
           "page": {"capacity": 20480, "free": 18000, "record_bytes": 1048576}}
OVER = {"row": {"capacity": 640, "free": 0, "record_bytes": 16777216},
        "page": {"capacity": 24576, "free": 22000, "record_bytes": 1048576}}


def test_more_of_the_same_budget_allocated_is_not_an_allocator_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, base_arm(slabs=SMALLER).doc(), cand_arm().doc(), capsys=capsys)
    assert code == 2, out
    assert ("the arms allocate different bytes (30,064,771,072 B vs 34,359,738,368 B, "
            "4,294,967,296 B apart, at least one record of each slab): the total budget never "
            "may differ") in out
    assert re.search(r"^  allocated +engine +DIFFERS: refused", out, re.M), out


def test_slabs_over_their_budget_cannot_be_compared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, base_arm().doc(), cand_arm(slabs=OVER).doc(), capsys=capsys)
    assert code == 2, out
    assert ("the candidate arm's slabs take 36,507,222,016 B of its 34,359,738,368 B budget: "
            "the slabs do not fit the budget") in out


def test_a_partition_change_may_move_the_unused_remainder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uneven = {"row": {"capacity": 511, "free": 0, "record_bytes": 16777216},
              "page": {"capacity": 24590, "free": 20000, "record_bytes": 1048576}}
    code, out = run(tmp_path, base_arm().doc(), cand_arm(slabs=uneven).doc(), capsys=capsys)
    assert code == 0, out
    assert re.search(r"^  allocated +engine +same total: 2,097,152 B apart, under one record "
                     r"of each slab", out, re.M), out


@pytest.mark.parametrize(("given", "said"), [
    (["budget"], "--allow-difference budget: the total budget never may differ"),
    (["package"], "a package is not a change of its own"),
    (["allocator", "speculation"], "allocator and speculation: one change per comparison"),
    (["sideways"], "'sideways' is not a change; choose one of runtime, quantization, "
                   "allocator, speculation"),
])
def test_declared_changes_are_one_of_four(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          given: list[str], said: str) -> None:
    flags = [f for g in given for f in ("--allow-difference", g)]
    code, out = run(tmp_path, base_arm().doc(), cand_arm().doc(), *flags, capsys=capsys,
                    change=None)
    assert code == 2 and said in out, out


def test_an_arm_that_mixes_engines_refuses(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    other = {**IDENTITY, "package": "helios-2.15.0"}
    base = Arm("base").lane("probe-52", BASE)
    base.identity = other
    base.lane("small-12", SMALL, n=12, row_pressure=0)
    code, out = run(tmp_path, base.doc(), cand_arm().doc(), capsys=capsys)
    assert code == 2, out
    assert "the baseline arm mixes engines: package is" in out


def test_counter_evidence_first_for_an_allocator_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calm = lanes(Arm("base"), BASE, SMALL)
    for p in calm.phases:
        for edge in ("begin", "end"):
            p[edge]["counters"]["evictions.row.attempts"] = 0
            p[edge]["row_pressure_with_page_headroom_total"] = 0
        p.pop("deltas")
    code, out = run(tmp_path, calm.doc(), cand_arm().doc(), capsys=capsys)
    assert code == 1, out
    assert gate(out, "counter evidence").startswith(
        "FAILS: not shown in probe-52/1, probe-52/2, probe-52/3: baseline probe-52: 0 "
        "row-pressure eviction attempts")
    docs = [base_arm().doc(), cand_arm().doc()]
    for p in docs[0]["phases"]:
        for edge in ("begin", "end"):
            p[edge]["row_pressure_with_page_headroom_total"] = None
        p.pop("deltas")
    code, out = run(tmp_path, *docs, capsys=capsys)
    assert code == 1 and gate(out, "counter evidence").startswith("not evaluated: "), out


def test_p50_and_p95_come_from_the_buckets(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    doc = cand_arm().doc()
    spread = [0.31] * 40 + [0.44] * 12  # p50 in (0.3, 0.325], p95 in (0.425, 0.45]
    from tests.lab.evidence_builder import histogram
    for r in (1, 2, 3):  # the prime's 52 requests at 0.45 s, then the measured pass's
        recount(doc, f"probe-52/{r}", e2e_latency_seconds=histogram([0.45] * 52 + spread))
    _, out = run(tmp_path, base_arm().doc(), doc, capsys=capsys)
    row = next(line for line in out.splitlines() if line.strip().startswith("candidate")
               and "156" in line)
    mean, p50, p95 = (float(v) for v in re.findall(r"([0-9.]+) s\b", row))
    assert mean == pytest.approx((0.31 * 40 + 0.44 * 12) / 52)
    assert 0.3 < p50 <= 0.325 and 0.425 < p95 <= 0.45, row


def test_phases_bracketed_by_hand_are_compared_but_never_admitted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = [base_arm().doc(), cand_arm().doc()]
    unrecorded = [{**d, "passes": []} for d in docs]
    code, out = run(tmp_path, *unrecorded, capsys=capsys)
    assert code == 2, out
    assert ("repetition probe-52/1 has no probe record: its sent and failed requests and "
            "outputs are unknown") in out
    code, out = run(tmp_path, *unrecorded, "--allow-unrecorded", capsys=capsys)
    assert code == 1, out
    assert gate(out, "strict output").startswith("not evaluated: no output hashes recorded")
    assert gate(out, "identity").startswith("not evaluated: runtime, quantization, speculation, "
                                            "power_limit, recipe unknown")


@pytest.mark.parametrize("content", ["not json", "[]", '{"phases": 3}'])
def test_unreadable_evidence_is_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  content: str) -> None:
    (tmp_path / "bad.json").write_text(content)
    good = write(tmp_path / "good.json", base_arm().doc())
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(tmp_path / "bad.json"), "--candidate", str(good),
                  "--primary", "probe-52"])
    assert exit_info.value.code == 2
    assert "bad.json" in capsys.readouterr().err


def test_no_change_is_zero_percent_not_minus_zero(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, base_arm().doc(), cand_arm(fast=[m * 1.0001 for m in BASE]).doc(),
                    capsys=capsys)
    assert code == 1, out
    assert "benefit 0.0% < 5.0%: FAIL" in out
    assert "-0.0%" not in out and "+0.0%" not in out


def test_simulated_evidence_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The label comes from the captured identity (the simulator's snapshot says
    identity.engine); the file's flag can add it, never take it away."""
    simulated = {**IDENTITY, "engine": "helios-simulator 0.1"}
    docs = [base_arm(identity=simulated).doc(), cand_arm(identity=simulated).doc()]
    for doc in docs:
        doc["simulated"] = False  # flipped by hand
    code, out = run(tmp_path, *docs, capsys=capsys)
    assert code == 0, out
    assert out.startswith("SIMULATED: the evidence comes from the simulated engine")
    assert out.splitlines()[-1] == ("ADMITTED: every gate holds (simulated evidence)"
                                    f"{UNCHECKED} (exit 0)")
    docs = [base_arm().doc(), cand_arm().doc()]
    docs[1]["simulated"] = True
    code, out = run(tmp_path, *docs, capsys=capsys)
    assert code == 0 and out.startswith("SIMULATED: "), out


@pytest.mark.parametrize(("doc", "field"), [
    ({"phases": [1, 2]}, "phases[0]: "),
    ({"phases": [{"name": "probe-52/1", "deltas": {"e2e_latency_seconds": {
        "count": "x", "sum": 0.3}}}]}, "phases[0].deltas.e2e_latency_seconds.count: "),
    ({"phases": [{"name": "probe-52/1", "begin": {"budget_bytes": "big"}}]},
     "phases[0].begin.budget_bytes: "),
    ({"phases": [{"name": "probe-52/1", "deltas": {"e2e_latency_seconds": {
        "count": 1, "sum": 0.3, "buckets": [["fast", 1]]}}}]},
     "phases[0].deltas.e2e_latency_seconds.buckets: bucket 0: bound 'fast' is not a number"),
    ({"phases": [{"name": "a/1"}, {"name": "a/1"}]}, "phases: the names a/1 occur"),
    ({"phases": [{"name": "probe-52/1", "deltas": {"stores_dropped_full": "7"}}]},
     "phases[0].deltas.stores_dropped_full: "),
    ({"phases": [{"name": "probe-52/1", "deltas": {"blocked_tokens": {"evicted": -1}}}]},
     "phases[0].deltas.blocked_tokens.evicted: "),
    ({"phases": [], "passes": [{"phase": "a/1", "sent": "52", "failed": 0,
                                "sequence_sha256": "0" * 64}]}, "passes[0].sent: "),
    ({"phases": [], "passes": [{"phase": "a/1", "sent": 52, "failed": 0,
                                "sequence_sha256": "0" * 64,
                                "outputs": [{"sha256": "0" * 64, "completion_tokens": "32"}]}]},
     "passes[0].outputs[0].completion_tokens: "),
])
def test_malformed_evidence_is_refused_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict[str, Any],
        field: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    good = write(tmp_path / "good.json", base_arm().doc())
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(good), "--candidate", str(bad),
                  "--primary", "probe-52"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert f"helios-exporter compare: {bad}: not a usable evidence.json: {field}" in err
    assert "Traceback" not in err


def lanes_row(out: str, lane: str, arm: str) -> list[str]:
    """The cells of one arm's row of the lanes table (the lane's name is on the baseline's)."""
    table = out.split("lanes (")[1].split("\n\n", maxsplit=1)[0].splitlines()
    at = next(i for i, line in enumerate(table) if line.startswith(f"{lane} "))
    line = table[at] if arm == "baseline" else table[at + 1]
    assert line.split()[2 if arm == "baseline" else 0] == arm, line
    return line.split()


STORE_NOTE = "the candidate dropped stores where the baseline did not"


def test_compare_shows_drops_and_blocked_tokens_per_arm(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = base_arm(v3=True).doc()
    cand = Arm("cand", slabs=WIDER, v3=True).lane("probe-52", FAST, hits=43, drops=(0, 1, 0)) \
        .lane("small-12", SMALL, n=12, row_pressure=0).long().doc()
    code, out = run(tmp_path, base, cand, capsys=capsys)
    assert code == 0, out  # a note, never a gate
    blocked = 3 * 52 * (PROMPT - GPU_PREFIX)  # every measured lookup of the baseline missed
    assert lanes_row(out, "probe-52", "baseline")[-4:] == ["0/0/0", f"{blocked:,}", "(100.0%",
                                                           "evicted)"]
    assert lanes_row(out, "probe-52", "candidate")[-4:] == [
        "0/3/0", f"{3 * 9 * (PROMPT - GPU_PREFIX):,}", "(100.0%", "evicted)"]
    assert "dropped f/i/x: host stores dropped full / dropped ineligible / failed" in out
    assert STORE_NOTE not in out  # dropped ineligible follows from the corpus
    assert "store outcomes unknown" not in out


@pytest.mark.parametrize(("base_drops", "cand_drops", "note"), [
    ((0, 0, 0), (4, 0, 0), "(dropped full 0 -> 12, measured passes summed)"),
    ((0, 0, 0), (0, 0, 1), "(failed 0 -> 3, measured passes summed)"),
    ((0, 0, 0), (2, 0, 1), "(dropped full 0 -> 6; failed 0 -> 3, measured passes summed)"),
    ((1, 0, 0), (4, 0, 0), None),  # the baseline dropped full too
    ((0, 0, 0), (0, 5, 0), None),
])
def test_a_candidate_that_drops_stores_the_baseline_kept_is_noted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], base_drops: tuple[int, int, int],
        cand_drops: tuple[int, int, int], note: str | None) -> None:
    base = Arm("base", v3=True).lane("probe-52", BASE, drops=base_drops).lane(
        "small-12", SMALL, n=12, row_pressure=0).long()
    cand = Arm("cand", slabs=WIDER, v3=True).lane("probe-52", FAST, drops=cand_drops).lane(
        "small-12", SMALL, n=12, row_pressure=0).long()
    code, out = run(tmp_path, base.doc(), cand.doc(), capsys=capsys)
    assert code == 0, out
    shown = "/".join(f"{3 * n:,}" for n in cand_drops)
    assert lanes_row(out, "probe-52", "candidate")[-4] == shown
    notes = [line for line in out.splitlines() if STORE_NOTE in line]
    if note is None:
        assert notes == [], out
    else:
        assert notes == [f"note: lane probe-52: {STORE_NOTE} {note}: it kept less in the host "
                         "tier"], out


def test_drops_unknown_in_an_arm_are_shown_unknown_never_0(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a schema 1 baseline: no store outcomes, no blocked tokens; the candidate drops
    cand = Arm("cand", slabs=WIDER, v3=True).lane("probe-52", FAST, drops=(4, 0, 0)).lane(
        "small-12", SMALL, n=12, row_pressure=0).long()
    code, out = run(tmp_path, base_arm().doc(), cand.doc(), capsys=capsys)
    assert code == 0, out
    assert lanes_row(out, "probe-52", "baseline")[-2:] == ["-", "-"]
    assert lanes_row(out, "probe-52", "candidate")[-4] == "12/0/0"
    assert STORE_NOTE not in out
    assert ("note: store outcomes unknown in lane probe-52, small-12, long-context (an arm's engine snapshot "
            "has no host.store_outcomes, schema 1): whether the candidate drops stores the "
            "baseline kept is not known") in out
