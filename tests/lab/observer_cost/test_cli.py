"""observer-cost refuses what it cannot measure before anything is sent (exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tools.harness import PYTHON, ROOT

pytestmark = pytest.mark.e2e  # each test runs the command as a process


def run(tmp_path: Path, bodies: list[dict[str, object]], *extra: str,
        witness: tuple[str, ...] = ("--witness", "snapshot:simulator.trace.enabled"),
        ) -> subprocess.CompletedProcess[str]:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    token = tmp_path / "token"
    token.write_text("observer-Token-0123456789abcdef\n")
    return subprocess.run(
        [PYTHON, "-m", "commands", "observer-cost", "--engine-url", "http://127.0.0.1:9",
         "--sidecar", "http://127.0.0.1:9", "--token-file", str(token), "--corpus", str(corpus),
         "--on", "true", "--off", "true", "--out", str(tmp_path / "out"), *witness, *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("bodies", "extra", "message"), [
    ([{"prompt": "a", "max_tokens": 8}, {"prompt": "b", "max_tokens": 9}], (),
     "2 different max_tokens (8, 9): one length"),
    ([{"prompt": "a"}], (), "body 1 has no max_tokens >= 1: the fixture must fix the output length"),
    ([{"prompt": "a", "max_tokens": 8}], ("--concurrency", "1,1"), "give each concurrency once"),
    ([{"prompt": "a", "max_tokens": 8}], ("--name", "a/b"), "--name must be 1-40"),
])
def test_bad_input_exits_2_with_nothing_sent(tmp_path: Path, bodies: list[dict[str, object]],
                                             extra: tuple[str, ...], message: str) -> None:
    done = run(tmp_path, bodies, *extra)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert not (tmp_path / "out" / "plan.json").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (("--repetitions", "2"), "--repetitions / HELIOS_EXPORTER_REPETITIONS: at least 3 "
     "repetitions an arm (the observer-cost protocol: three off and three on per concurrency), got 2"),
    (("--repetitions", "1"), "at least 3 repetitions an arm"),
    (("--concurrency", "1"), "--concurrency 1: C1 and C4 must both be measured, each warmed on "
     "its own (the observer-cost protocol); C4 missing"),
    (("--concurrency", "4,8"), "C1 missing"),
    (("--warmup", "0"), "--warmup / HELIOS_EXPORTER_WARMUP: each concurrency is warmed before "
     "it is measured (the observer-cost protocol): at least 1 warm-up request, got 0"),
    (("--witness", "trace"), "--witness 'trace': give snapshot:PATH, "
     "metric:NAME{LABEL=\"V\"} or command:CMD"),
])
def test_a_run_the_protocol_would_not_accept_is_refused(tmp_path: Path, extra: tuple[str, ...],
                                                    message: str) -> None:
    done = run(tmp_path, [{"prompt": "a", "max_tokens": 8}], *extra)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert not (tmp_path / "out" / "plan.json").exists()


def test_without_a_witness_nothing_runs(tmp_path: Path) -> None:
    done = run(tmp_path, [{"prompt": "a", "max_tokens": 8}], witness=())
    assert done.returncode == 2 and "--witness" in done.stderr and "required" in done.stderr


def test_an_unreachable_sidecar_stops_it_before_the_plan_is_used(tmp_path: Path) -> None:
    done = run(tmp_path, [{"prompt": "a", "max_tokens": 8, "ignore_eos": True}])
    assert done.returncode == 1
    assert "cannot reach http://127.0.0.1:9" in done.stderr and "nothing was sent" in done.stderr
    assert "warning" not in done.stderr  # ignore_eos fixes the length
    assert not (tmp_path / "out" / "plan.json").exists()
