"""`helios-exporter compare` on constructed evidence, through the real command line: every gate,
every denominator, the thresholds, the repetitions, the strict and semantic gates. (The lanes,
the identity, and the evidence that cannot be compared: test_compare_lanes.py; the cases the
planning notes single out: test_gate.py.)"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from commands import cli
from tests.lab.compare.compare_run import BASE, FAST, SMALL, SOURCE, UNCHECKED, base_arm, cand_arm, gate, run
from tests.lab.evidence_builder import (
    DECLARED,
    IDENTITY,
    WIDER,
    Arm,
    counter,
    drop,
    pass_of,
    phase_of,
    recount,
    semantic_verdict,
    write,
)


def test_admitted_shows_every_gate_and_denominator(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, base_arm().doc(), cand_arm().doc(), capsys=capsys)
    assert code == 0, out
    assert out.splitlines()[-1] == f"ADMITTED: every gate holds{UNCHECKED} (exit 0)"
    for name in ("identity", "repetitions", "accounting", "strict output", "counter evidence",
                 "primary", "protected", "semantic"):
        assert gate(out, name).startswith("holds: "), name
    # denominators: repetitions, requests per repetition and per lane, output tokens, both arms
    assert out.count("    3       52       156     4,992 ") == 2
    assert out.count("    3       12        36     1,152 ") == 2
    pairs = [line.split() for line in out.split("pairs (")[1].splitlines()
             if line.startswith("probe-52 ")]
    assert [p[2] for p in pairs] == ["1", "2", "3"]
    assert pairs[0][7:9] == ["52/52", "1,664/1,664"]  # requests and output tokens of a pair
    assert "benefit 17.5% >= 5.0%: pass" in out
    assert "probe-52/1/forward-1" not in out.split("repetitions (")[1].split("pairs (")[0]
    assert "p50/p95 are estimated from the latency histogram's buckets" in out
    assert "(allocator; differs: allocator)" in gate(out, "identity")
    assert "480 requests" in gate(out, "strict output")


def test_without_a_semantic_gate_nothing_is_admitted(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, base_arm().doc(), cand_arm().doc(), capsys=capsys, semantic=False)
    assert code == 1, out
    assert gate(out, "semantic").startswith("not evaluated: no --semantic-command or "
                                            "--semantic-verdict given")
    assert out.splitlines()[-1] == f"NOT ADMITTED: not evaluated: semantic{UNCHECKED} (exit 1)"


def test_a_semantic_verdict_must_judge_these_files(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a.json", base_arm().doc())
    b = write(tmp_path / "b.json", cand_arm().doc())
    verdict = semantic_verdict(tmp_path / "s.json", a, b)
    write(tmp_path / "b.json", cand_arm(fast=[0.33, 0.33, 0.33]).doc())  # regenerated since
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(a), "--candidate", str(b), "--primary",
                  "probe-52", "--allow-difference", "allocator", "--semantic-verdict",
                  str(verdict)])
    out = capsys.readouterr().out
    assert exit_info.value.code == 1, out
    assert f"judged other evidence: its candidate_sha256 is not the SHA-256 of {b}" in out
    semantic_verdict(verdict, a, b, verdict="fail")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(a), "--candidate", str(b), "--primary",
                  "probe-52", "--allow-difference", "allocator", "--semantic-verdict",
                  str(verdict)])
    out = capsys.readouterr().out
    assert exit_info.value.code == 1 and gate(out, "semantic").startswith("FAILS: ")


@pytest.mark.e2e  # runs the semantic command
@pytest.mark.parametrize(("exit_code", "status"), [(0, "holds"), (1, "FAILS"),
                                                   (3, "not evaluated")])
def test_a_semantic_command_decides_by_its_exit_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], exit_code: int, status: str) -> None:
    script = tmp_path / "check.py"
    script.write_text("import json, sys\n"
                      "docs = [json.load(open(p)) for p in sys.argv[1:]]\n"
                      "print(f'checked {len(docs)} files, {len(docs[1][\"passes\"])} passes')\n"
                      f"sys.exit({exit_code})\n")
    code, out = run(tmp_path, base_arm().doc(), cand_arm().doc(), "--semantic-command",
                    f"{sys.executable} {script}", capsys=capsys, semantic=False)
    assert code == (0 if exit_code == 0 else 1), out
    assert gate(out, "semantic").startswith(f"{status}: `{sys.executable} {script}` exited "
                                            f"{exit_code}")
    assert "checked 2 files, 18 passes" in gate(out, "semantic")


def test_too_little_benefit_in_a_pair_fails_and_says_why(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, base_arm().doc(),
                    cand_arm(fast=[0.330, 0.385, 0.332]).doc(), capsys=capsys)
    assert code == 1, out
    assert "probe-52: pair 2: benefit 3.3% < 5.0%" in gate(out, "primary")
    assert "every matched pair at least 5.0% faster" in gate(out, "primary")


def test_a_protected_regression_fails_and_says_why(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    slower = [m * 1.05 for m in SMALL]
    code, out = run(tmp_path, base_arm().doc(), cand_arm(small=slower).doc(), capsys=capsys)
    assert code == 1, out
    assert gate(out, "protected").startswith(
        "FAILS: small-12: pair 1: +5.0%: more than the allowed 3.0% slower")
    assert gate(out, "primary").startswith("holds")


def test_thresholds_are_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slower = [m * 1.05 for m in SMALL]
    code, out = run(tmp_path, base_arm().doc(), cand_arm(small=slower).doc(),
                    "--max-regression", "0.06", "--min-benefit", "0.17", capsys=capsys)
    # every gate holds at those thresholds, but they are not the admission gate's: exploratory
    assert code == 1, out
    assert gate(out, "protected").startswith("holds: no matched pair more than 6.0% slower")
    assert out.splitlines()[-1].startswith(
        "EXPLORATORY: every gate holds at --min-benefit 17.0% and --max-regression 6.0%, not "
        "the admission gate's 5.0% and 3.0%: nothing is admitted")
    code, out = run(tmp_path, base_arm().doc(), cand_arm().doc(), "--min-benefit", "0.18",
                    capsys=capsys)
    assert code == 1, out


def test_too_few_repetitions_is_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = Arm("base").lane("probe-52", BASE[:2]).lane("small-12", SMALL, n=12, row_pressure=0)
    cand = cand_arm(fast=FAST[:2])
    code, out = run(tmp_path, base.doc(), cand.doc(), capsys=capsys)
    assert code == 2, out
    assert "lane probe-52: 2 repetitions in each arm, 3 needed" in out
    assert out.splitlines()[-1].startswith("CANNOT COMPARE")


def test_a_missing_repetition_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = Arm("cand", slabs=WIDER).lane("probe-52", [*FAST, 0.33]).lane(
        "small-12", SMALL, n=12, row_pressure=0).doc()
    drop(doc, "probe-52/2")
    drop(doc, "probe-52/2/forward-1")  # left out of the evidence
    code, out = run(tmp_path, base_arm().doc(), doc, capsys=capsys)
    assert code == 2, out
    assert "the repetitions are numbered 1, 3, 4: one that ran is missing" in out
    assert "the probe planned 4 repetitions, the evidence holds 3" in out


@pytest.mark.parametrize(("edit", "why"), [
    (lambda d: phase_of(d, "probe-52/2").update(state="open", valid=None),
     "repetition probe-52/2 is invalid: probe-52/2 is still open"),
    (lambda d: pass_of(d, "probe-52/2").update(failed=2, failures=[{"status": 500}] * 2),
     "repetition probe-52/2 is invalid: 2 of 52 requests of probe-52/2 failed"),
    (lambda d: pass_of(d, "probe-52/2/forward-1").update(sent=51),
     "repetition probe-52/2 is invalid: the engine finished 52 requests in probe-52/2/forward-1, "
     "the probe sent 51: another client's traffic"),
    (lambda d: phase_of(d, "probe-52/2")["begin"]["counters"].update({"lookups.total": 60}),
     "repetition probe-52/2 is invalid: 8 lookups and 0 finished requests reached the engine "
     "between 'probe-52/2/forward-1' and 'probe-52/2'"),
    (lambda d: phase_of(d, "probe-52/2/forward-1")["begin"]["counters"].update(
        {"lookups.total": 104}),
     "repetition probe-52/2 did not begin on a fresh incarnation: probe-52/2/forward-1 began "
     "after 104 lookups"),
    (lambda d: recount(d, "probe-52/2", **{"counters__lookups.hits": 60}),
     "repetition probe-52/2 is invalid: probe-52/2: its counters contradict each other: 60 hits "
     "above 52 lookups"),
    (lambda d: recount(d, "probe-52/2", **{"counters__host.prompt_tokens_reused": counter(
        d, "probe-52/2", "host.prompt_tokens_reused", "begin") + 10 ** 6}),
     "its counters contradict each other: 1,000,000 prompt tokens reused (snapshot) above the "
     "161,200 prompt tokens the engine's /metrics counted"),
    (lambda d: recount(d, "probe-52/2", requests=phase_of(d, "probe-52/2")["end"]["requests"]
                       - 1),
     "its counters contradict each other: 52 lookups (snapshot) but 51 finished requests "
     "(/metrics) with nothing in flight at either edge"),
    (lambda d: pass_of(d, "probe-52/2").update(completion_tokens=1600),
     "the engine's /metrics counted 1,664 generated tokens in probe-52/2, the probe received "
     "1,600"),
    (lambda d: [phase_of(d, n)[edge].update(generation="g-cand-probe-52-1")
                for n in ("probe-52/2", "probe-52/2/forward-1") for edge in ("begin", "end")],
     "repetitions probe-52/1 and probe-52/2 ran on one incarnation (g-cand-probe-52-1)"),
    (lambda d: pass_of(d, "probe-52/3").update(previous="probe-52/1"),
     "the probe ran probe-52/1 before probe-52/3, which the evidence does not hold"),
])
def test_an_unusable_repetition_refuses_and_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, why: str) -> None:
    doc = cand_arm().doc()
    edit(doc)
    code, out = run(tmp_path, base_arm().doc(), doc, capsys=capsys)
    assert code == 2, out
    assert why in out
    assert out.splitlines()[-1].startswith("CANNOT COMPARE")


def test_unmatched_denominators_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cand = Arm("cand", slabs=WIDER).lane("probe-52", FAST, n=51).lane("small-12", SMALL, n=12,
                                                                        row_pressure=0)
    code, out = run(tmp_path, base_arm().doc(), cand.doc(), capsys=capsys)
    assert code == 2, out
    assert "lane probe-52: repetitions are not matched: 51, 52 requests per repetition" in out


def test_other_bytes_or_order_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = cand_arm().doc()
    pass_of(doc, "probe-52/3")["sequence_sha256"] = "0" * 64
    code, out = run(tmp_path, base_arm().doc(), doc, capsys=capsys)
    assert code == 2, out
    assert "lane probe-52: the repetitions sent different bytes or another order" in out


def test_an_output_that_differs_fails_the_strict_gate(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    doc = cand_arm().doc()
    pass_of(doc, "small-12/2")["outputs"][3]["output_sha256"] = "f" * 64
    code, out = run(tmp_path, base_arm().doc(), doc, capsys=capsys)
    assert code == 1, out
    assert gate(out, "strict output").startswith(
        "FAILS: 1 of 480 requests differ between the arms: small-12/2 #3 (body ")
    assert "another output (output_sha256 differs)" in out
    assert gate(out, "primary").startswith("not evaluated: the outputs differ")


def test_a_change_that_may_change_the_text_leaves_it_to_the_semantic_gate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    declared = {**DECLARED, "quantization": "w8a16"}
    other = {**IDENTITY, "checkpoint": "qwen3-next-w8a16-r1"}
    doc = cand_arm(identity=other, slabs=None, declared=declared).doc()
    pass_of(doc, "small-12/2")["outputs"][3]["output_sha256"] = "f" * 64
    code, out = run(tmp_path, base_arm().doc(), doc, capsys=capsys, change="quantization")
    assert code == 0, out
    assert "1 output hashes differ (first: small-12/2 #3" in gate(out, "strict output")
    assert "the semantic gate judges those outputs" in gate(out, "strict output")
    # the length still binds (the probe received one token less, and the engine generated it)
    pass_of(doc, "small-12/2")["outputs"][4]["completion_tokens"] = 31
    pass_of(doc, "small-12/2")["completion_tokens"] -= 1
    recount(doc, "small-12/2", generation_tokens=phase_of(doc, "small-12/2")["end"][
        "generation_tokens"] - 1)
    code, out = run(tmp_path, base_arm().doc(), doc, capsys=capsys, change="quantization")
    assert code == 1 and gate(out, "strict output").startswith("FAILS: 1 of 480"), out


def test_an_undeclared_difference_refuses(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    other = {**IDENTITY, "checkpoint": "qwen3-next-w4a16-r4"}
    code, out = run(tmp_path, base_arm().doc(), cand_arm(identity=other).doc(), capsys=capsys)
    assert code == 2, out
    assert ("the arms differ in checkpoint (qwen3-next-w4a16-r3 vs qwen3-next-w4a16-r4), which "
            "the declared allocator change does not cover: one change per comparison") in out
    # a quantization arm may load another checkpoint, with the same geometry
    declared = {**DECLARED, "quantization": "w8a16"}
    code, out = run(tmp_path, base_arm().doc(),
                    cand_arm(identity=other, slabs=None, declared=declared).doc(),
                    capsys=capsys, change="quantization")
    assert code == 0, out
    assert re.search(r"checkpoint +engine +DIFFERS: allowed with the declared quantization "
                     "change: qwen3-next-w4a16-r3  ->  qwen3-next-w4a16-r4", out)


def test_a_new_build_must_be_declared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rebuilt = {**IDENTITY, "image_digest": "sha256:" + "b" * 64}
    code, out = run(tmp_path, base_arm().doc(), cand_arm(identity=rebuilt).doc(), capsys=capsys)
    assert code == 2, out
    assert "(the allocator change delivered as a new build: --new-build)" in out
    # a new build carries its source (probe --declare source_commit=... source_diff=...)
    code, out = run(tmp_path, base_arm().doc(), cand_arm(identity=rebuilt).doc(), "--new-build",
                    capsys=capsys)
    assert code == 1 and "source_commit, source_diff unknown in an arm" in gate(out, "identity")
    base = base_arm(declared={**DECLARED, **SOURCE}).doc()
    cand = cand_arm(identity=rebuilt, declared={**DECLARED, **SOURCE, "source_diff": "d" * 64})
    code, out = run(tmp_path, base, cand.doc(), "--new-build", capsys=capsys)
    assert code == 0, out
    assert gate(out, "identity").startswith("holds: one declared change (allocator; differs: "
                                            "image_digest, allocator, source_diff)")


def test_a_declared_change_must_be_there(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, base_arm().doc(), cand_arm(slabs=None).doc(), capsys=capsys)
    assert code == 2, out
    assert "--allow-difference allocator declared, but both arms have allocator page" in out


def test_no_declared_change_admits_nothing(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, base_arm().doc(), cand_arm(slabs=None).doc(), capsys=capsys,
                    change=None)
    assert code == 1, out
    assert gate(out, "identity").startswith("FAILS: no change declared")


def test_an_unknown_dimension_is_not_evaluated(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    silent = {k: v for k, v in DECLARED.items() if k != "power_limit"}
    code, out = run(tmp_path, base_arm(declared=silent).doc(), cand_arm(declared=silent).doc(),
                    capsys=capsys)
    assert code == 1, out
    assert gate(out, "identity").startswith("not evaluated: power_limit unknown in an arm")
    assert re.search(r"power_limit +unknown +unknown: unknown", out)


def test_power_limits_read_by_nvml_are_the_engine_s(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    docs = [base_arm().doc(), cand_arm().doc()]
    for doc in docs:
        for p in doc["phases"]:
            p["begin"]["power_limits_watts"] = {"GPU-0": 300.0, "GPU-1": 300.0}
    phase_of(docs[1], "small-12/3")["begin"]["power_limits_watts"]["GPU-1"] = 350.0
    code, out = run(tmp_path, *docs, capsys=capsys)
    assert code == 2, out
    assert "the candidate arm mixes engines: power_limit is 300 W and 300 W, 350 W" in out


def test_the_budget_never_differs_even_with_the_declared_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, base_arm().doc(), cand_arm(budget=2 << 35).doc(), capsys=capsys)
    assert code == 2, out
    assert ("the arms differ in budget (34,359,738,368 B vs 68,719,476,736 B): the total budget "
            "never may differ") in out
