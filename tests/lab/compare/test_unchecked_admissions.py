"""Each case that `compare` once admitted (exit 0) without having checked it, through the
real command line on constructed evidence: every one is now not admitted (exit 1) or cannot be
compared (exit 2), and the output names the reason."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from commands import cli
from tests.lab.evidence_builder import (
    DECLARED,
    IDENTITY,
    WIDER,
    Arm,
    lanes,
    pass_of,
    phase_of,
    semantic_verdict,
    write,
)

BASE = [0.400, 0.398, 0.402]
FAST = [0.330, 0.328, 0.332]
SMALL = [0.324, 0.322, 0.324]
SOURCE = {"source_commit": "47581cca" + "0" * 32, "source_diff": "c" * 64}


def arms(**cand: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    cand.setdefault("slabs", WIDER)
    return lanes(Arm("base"), BASE, SMALL).doc(), lanes(Arm("cand", **cand), FAST, SMALL).doc()


def run(tmp_path: Path, baseline: dict[str, Any], candidate: dict[str, Any], *flags: str,
        capsys: pytest.CaptureFixture[str],
        lanes_: tuple[str, ...] = ("--protected", "small-12", "--protected", "long-context"),
        ) -> tuple[int, str]:
    a = write(tmp_path / "a.json", baseline)
    b = write(tmp_path / "b.json", candidate)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(a), "--candidate", str(b), "--primary",
                  "probe-52", *lanes_, "--allow-difference", "allocator", "--semantic-verdict",
                  str(semantic_verdict(tmp_path / "s.json", a, b)), *flags])
    out = capsys.readouterr()
    return int(exit_info.value.code or 0), out.out + out.err


def gate(out: str, name: str) -> str:
    match = re.search(rf"^  {re.escape(name)} +(.*)$", out, re.M)
    assert match, out
    return match.group(1)


def test_the_arms_as_built_are_admitted(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The cases below are each one edit away from an admitted comparison."""
    code, out = run(tmp_path, *arms(), capsys=capsys)
    assert code == 0, out


def test_a_lane_left_off_the_command_line_is_gated(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = arms()
    cand = lanes(Arm("cand", slabs=WIDER), FAST, SMALL, [0.350 * 4.31] * 3).doc()
    code, out = run(tmp_path, base, cand, capsys=capsys, lanes_=("--protected", "small-12"))
    assert code == 1, out
    assert "long-context: pair 1: +331.0%: more than the allowed 3.0% slower" in gate(
        out, "protected")


def test_accounting_on_null_token_totals_is_not_evaluated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An engine without generated and prompt token totals and in-flight counts."""
    docs = arms()
    for doc in docs:
        for p in doc["phases"]:
            for edge in ("begin", "end"):
                p[edge].update(generation_tokens=None, prompt_tokens=None, inflight=None)
            p.pop("deltas")
    code, out = run(tmp_path, *docs, capsys=capsys)
    assert code == 1, out
    said = gate(out, "accounting")
    assert said.startswith("not evaluated: inputs missing or null: baseline probe-52/1/forward-1:"
                           " begin.prompt_tokens null"), said
    assert "not evaluated: " in out.splitlines()[-1] and "accounting" in out.splitlines()[-1]


def test_a_new_build_of_another_release_is_a_second_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = {**IDENTITY, "image_digest": "sha256:" + "b" * 64, "package": "helios-2.15.0+d2036807"}
    declared = {**DECLARED, **SOURCE}
    base = lanes(Arm("base", declared=declared), BASE, SMALL).doc()
    # without its source declared: not evaluated
    code, out = run(tmp_path, base, arms(identity=other)[1], "--new-build", capsys=capsys)
    assert code == 1 and "source_commit, source_diff unknown" in gate(out, "identity"), out
    # declared from the same commit: the package says another release
    cand = lanes(Arm("cand", slabs=WIDER, identity=other,
                     declared={**declared, "source_diff": "d" * 64}), FAST, SMALL).doc()
    code, out = run(tmp_path, base, cand, "--new-build", capsys=capsys)
    assert code == 2, out
    assert ("the candidate's package helios-2.15.0+d2036807 is another release than the "
            "baseline's helios-2.14.0+47581cca (version or commit): a runtime change as well as "
            "the declared allocator change") in out
    assert "names commit d2036807, its declared source_commit is 47581cca" in out
    # declared honestly from the other commit
    cand = lanes(Arm("cand", slabs=WIDER, identity=other, declared={
        **declared, "source_commit": "d2036807" + "0" * 32, "source_diff": "d" * 64}),
        FAST, SMALL).doc()
    code, out = run(tmp_path, base, cand, "--new-build", capsys=capsys)
    assert code == 2 and "another commit is a runtime change" in out, out


def test_hand_edited_summaries_refuse_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = arms()
    edits = [
        (lambda d: phase_of(d, "probe-52/2")["deltas"]["e2e_latency_seconds"].update(sum=15.0),
         "candidate phase probe-52/2: deltas.e2e_latency_seconds.sum is 15.0 in the file, its "
         "captures give 17.056"),
        (lambda d: phase_of(d, "probe-52/2")["deltas"]["e2e_latency_seconds"].update(sum=-1.0),
         "deltas.e2e_latency_seconds.sum is -1.0 in the file"),
        (lambda d: pass_of(d, "small-12/1").update(completion_tokens=380),
         "candidate pass small-12/1.completion_tokens is 380 in the file, its per-request "
         "records give 384"),
    ]
    for edit, why in edits:
        doc = copy.deepcopy(cand)
        edit(doc)
        code, out = run(tmp_path, base, doc, capsys=capsys)
        assert code == 2 and why in out, out
        assert out.splitlines()[-1].startswith("CANNOT COMPARE")


def test_valid_true_on_an_invalid_phase_refuses(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = arms()
    phase = phase_of(cand, "probe-52/2")
    phase["end"]["generation"] = "g-restarted"  # the engine restarted; the file says valid
    code, out = run(tmp_path, base, cand, capsys=capsys)
    assert code == 2, out
    assert ("candidate phase probe-52/2: valid is true in the file, but its captures say: "
            "generation changed from g-cand-probe-52-2 to g-restarted") in out


def test_a_negative_latency_sum_in_the_captures_is_invalid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = arms()
    phase = phase_of(cand, "probe-52/2")
    phase["end"]["e2e_latency_seconds"]["sum"] = phase["begin"]["e2e_latency_seconds"]["sum"] - 1
    phase.pop("deltas")
    code, out = run(tmp_path, base, cand, capsys=capsys)
    assert code == 2, out
    assert "engine e2e latency sum decreased within one generation" in out


def test_the_simulated_label_comes_from_the_captured_identity(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    simulated = {**IDENTITY, "engine": "helios-simulator"}
    base = lanes(Arm("base", identity=simulated), BASE, SMALL).doc()
    cand = lanes(Arm("cand", slabs=WIDER, identity=simulated), FAST, SMALL).doc()
    for doc in (base, cand):
        doc["simulated"] = False
    code, out = run(tmp_path, base, cand, capsys=capsys)
    assert code == 0 and out.startswith("SIMULATED: "), out
    assert "ADMITTED: every gate holds (simulated evidence)" in out.splitlines()[-1]


def test_larger_pages_half_as_many_are_a_geometry_change(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    huge = {"row": {"capacity": 512, "free": 0, "record_bytes": 16777216},
            "page": {"capacity": 12288, "free": 10000, "record_bytes": 2097152}}
    code, out = run(tmp_path, *arms(slabs=huge), capsys=capsys)
    assert code == 2, out
    assert ("the arms differ in their slabs' records (page 1,048,576 B, row 16,777,216 B vs "
            "page 2,097,152 B, row 16,777,216 B): a change in record size or in the slabs "
            "themselves is a geometry change") in out


@pytest.mark.parametrize(("flags", "said"), [
    (("--min-benefit", "0", "--max-regression", "0.99"), "EXPLORATORY: every gate holds at "
     "--min-benefit 0.0% and --max-regression 99.0%, not the admission gate's 5.0% and 3.0%: "
     "nothing is admitted"),
    (("--min-benefit", "0.05", "--max-regression", "0.99"), "EXPLORATORY"),
])
def test_other_thresholds_are_exploratory(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          flags: tuple[str, ...], said: str) -> None:
    code, out = run(tmp_path, *arms(), *flags, capsys=capsys)
    assert code == 1, out
    assert out.splitlines()[-1].startswith(said)


def test_one_attempt_with_headroom_is_not_counter_evidence(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = arms()
    for p in base["phases"]:
        if p["name"].startswith("probe-52/"):  # of each pass's 624 attempts, one with headroom
            prime = p["name"].endswith("forward-1")
            p["begin"]["row_pressure_with_page_headroom_total"] = 0 if prime else 1
            p["end"]["row_pressure_with_page_headroom_total"] = 1 if prime else 2
            p.pop("deltas")
    code, out = run(tmp_path, base, cand, capsys=capsys)
    assert code == 1, out
    assert gate(out, "counter evidence").startswith(
        "FAILS: not shown in probe-52/1, probe-52/2, probe-52/3: baseline probe-52: 1,872 "
        "row-pressure eviction attempts, 3 of them (0.2%)")


def test_phases_that_disagree_by_one_page_cannot_be_compared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = arms()
    phase_of(cand, "small-12/2")["begin"]["slabs"]["page"]["capacity"] -= 1
    code, out = run(tmp_path, base, cand, capsys=capsys)
    assert code == 2, out
    assert "the candidate arm mixes engines: allocated is" in out
    assert "Traceback" not in out


@pytest.mark.parametrize("where", ["evidence", "verdict", "record", "corpus"])
def test_deeply_nested_json_is_a_message_never_a_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    if where == "record":
        from lab.probe.record import RecordError, read_passes
        (tmp_path / "probe.json").write_text(deep)
        with pytest.raises(RecordError, match="nested 100000 deep, more than the 64 read"):
            read_passes([tmp_path])
        return
    if where == "corpus":
        from lab.probe.corpus import CorpusError, read_corpus
        (tmp_path / "c.jsonl").write_text(deep + "\n")
        with pytest.raises(CorpusError, match="nested 100000 deep"):
            read_corpus(tmp_path / "c.jsonl")
        return
    a, b = arms()
    pa, pb = write(tmp_path / "a.json", a), write(tmp_path / "b.json", b)
    flags = ["--semantic-verdict", str(tmp_path / "v.json")]
    (tmp_path / "v.json").write_text(deep)
    if where == "evidence":
        pb.write_text(deep)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--baseline", str(pa), "--candidate", str(pb), "--primary",
                  "probe-52", "--allow-difference", "allocator", *flags])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    if where == "evidence":
        assert exit_info.value.code == 2
        assert f"helios-exporter compare: {pb}: nested 100000 deep, more than the 64 read" in out.err
    else:
        assert exit_info.value.code == 1
        assert "nested 100000 deep" in gate(out.out, "semantic")


def test_the_last_line_says_what_was_not_checked_unless_the_records_are_given(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(tmp_path, *arms(), capsys=capsys)
    assert code == 0
    assert out.splitlines()[-1] == (
        "ADMITTED: every gate holds; not checked by this gate: functional acceptance, "
        "allocation-safety review, numerical restore review (no --team-record) (exit 0)")
    flags = []
    for kind in ("functional-acceptance", "allocation-safety", "restore-review"):
        (tmp_path / f"{kind}.md").write_text(f"{kind}: signed off\n")
        flags += ["--team-record", f"{kind}={tmp_path / kind}.md"]
    code, out = run(tmp_path, *arms(), *flags, capsys=capsys)
    assert code == 0, out
    assert out.splitlines()[-1] == ("ADMITTED: every gate holds; the team's records of "
                                    "functional acceptance and review are given (above) (exit 0)")
    import hashlib
    digest = hashlib.sha256(b"allocation-safety: signed off\n").hexdigest()
    assert f"  allocation-safety review   {digest}  {tmp_path}/allocation-safety.md" in out
    code, out = run(tmp_path, *arms(), "--team-record", f"restore-review={tmp_path}/none",
                    capsys=capsys)
    assert code == 2 and "--team-record restore-review:" in out and "Traceback" not in out


def test_the_simulators_semantic_check_reads_deep_json_as_unreadable(tmp_path: Path) -> None:
    from simulator.semantic import check

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    code, said = check([deep, deep])
    assert code == 2 and "nested 100000 deep, more than the 64 read" in said


@pytest.mark.parametrize(("text", "ok"), [
    ("source_commit=47581cca", True), ("source_commit=" + "a" * 40, True),
    ("source_commit=HEAD", False), ("source_diff=" + "c" * 64, True),
    ("source_diff=" + "c" * 63, False), ("source_diff=latest", False),
])
def test_a_declared_source_is_a_commit_and_a_diff_hash(text: str, ok: bool) -> None:
    from lab.compare.identity import parse_declaration

    if ok:
        assert parse_declaration(text) == tuple(text.split("=", 1))
    else:
        with pytest.raises(ValueError, match="--declare source_"):
            parse_declaration(text)


def test_the_evidence_report_says_simulated_from_the_captures() -> None:
    from lab.evidence.doc import build

    doc = lanes(Arm("base", identity={**IDENTITY, "engine": "helios-simulator"}), BASE,
                SMALL).doc()
    assert build(doc["phases"])["simulated"] is True
    assert build(arms()[0]["phases"])["simulated"] is False
