"""`helios-exporter probe` against an SGLang- and a vLLM-shaped engine through the real command
line: `simulate --scenario idle --flavor sglang|vllm` (POST /v1/completions as those engines
serve it, /metrics in their shape, no snapshot) and `serve --engine-kind` of the same kind.
The replay's reuse is read from the host tokens restored; what the engine does not export is
named, and the verdict it would need it for is not_evaluated, never a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab.rig import Rig, evidence
from tools.harness import Procs

pytestmark = pytest.mark.e2e


def test_sglang_verdict_is_not_evaluated_and_names_the_restart_identity(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path, "--flavor", "sglang", sidecar_args=("--engine-kind", "sglang"))
    done = rig.probe(tmp_path / "out", corpora["small-12"], "--name", "sg")
    assert done.returncode == 0, done.stderr
    doc = evidence(tmp_path / "out")
    [pair] = doc["probes"]
    assert pair["verdict"] == "not_evaluated", pair
    assert any("restart identity" in m for m in pair["missing"]), pair
    assert pair["host_tokens_restored"] > 0  # read from SGLang's load-back counter
    replay = next(p for p in doc["phases"] if p["name"] == pair["replay"])
    assert replay["deltas"]["hits"] is None  # SGLang counts no lookup hits: absent, not 0
    not_checked = {c["check"]: c["missing"] for c in doc["engine"]["not_checked"]}
    assert "identity" in not_checked["identity held through the probe"]
    assert "eviction causes" in not_checked["row pressure with page headroom"]
    out = done.stdout
    assert "sg/forward-1 -> sg/reverse-2: not_evaluated (not evaluated: sglang does not export " \
           "a generation with restart identity" in out, out
    assert "not checked on sglang: identity held through the probe" in out
    assert "**not_evaluated**" in (tmp_path / "out" / "evidence.md").read_text()


def test_vllm_reuse_is_read_from_the_host_tokens_restored(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path, "--flavor", "vllm", sidecar_args=("--engine-kind", "vllm"))
    done = rig.probe(tmp_path / "out", corpora["small-12"], "--name", "vl")
    assert done.returncode == 0, done.stderr
    [pair] = evidence(tmp_path / "out")["probes"]
    # vLLM exports its process start: the generation has restart identity, the replay's reuse
    # is read from the tokens the host tier supplied.
    assert pair["verdict"] == "order_sensitive", pair
    assert pair["reuse_from"].startswith("host tokens restored") and pair["host_tokens_restored"] > 0
