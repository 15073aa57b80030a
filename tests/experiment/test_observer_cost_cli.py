"""observer-cost refuses what it cannot measure before anything is sent (exit 2)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tools.harness import PYTHON, ROOT

pytestmark = pytest.mark.e2e  # each test runs the command as a process


def run(tmp_path: Path, bodies: list[dict[str, object]], *extra: str,
        ) -> subprocess.CompletedProcess[str]:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    token = tmp_path / "token"
    token.write_text("observer-Token-0123456789abcdef\n")
    return subprocess.run(
        [PYTHON, "-m", "exporter", "observer-cost", "--engine-url", "http://127.0.0.1:9",
         "--sidecar", "http://127.0.0.1:9", "--token-file", str(token), "--corpus", str(corpus),
         "--on", "true", "--off", "true", "--out", str(tmp_path / "out"), *extra],
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


def test_one_repetition_an_arm_is_refused(tmp_path: Path) -> None:
    done = run(tmp_path, [{"prompt": "a", "max_tokens": 8}], "--repetitions", "1")
    assert done.returncode == 2 and "--repetitions / HELIOS_EXPORTER_REPETITIONS: must be 2 or more, got 1" \
        in done.stderr


def test_an_unreachable_sidecar_stops_it_before_the_plan_is_used(tmp_path: Path) -> None:
    done = run(tmp_path, [{"prompt": "a", "max_tokens": 8, "ignore_eos": True}])
    assert done.returncode == 1
    assert "cannot reach http://127.0.0.1:9" in done.stderr and "nothing was sent" in done.stderr
    assert "warning" not in done.stderr  # ignore_eos fixes the length
    assert not (tmp_path / "out" / "plan.json").exists()
