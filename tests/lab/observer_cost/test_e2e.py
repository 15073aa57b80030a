"""`helios-exporter observer-cost` end to end: the simulated engine with its trace switch, a real
sidecar bracketing every step, the command as an engineer runs it (compressed: 200 times real
time, the fixture's 16 bodies a repetition).

With a known trace cost the judged interval (the engine's histogram) contains it at C1 and C4;
with none the difference is not resolved. Faults armed at known request numbers make exactly the
repetitions they land in invalid, each for its own reason, and the result refuses to conclude.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tools.harness import PYTHON, ROOT, Procs, wait_until

pytestmark = pytest.mark.e2e
TOKEN = "observer-Token-0123456789abcdef"
WITNESS = "snapshot:simulator.trace.enabled"


def stack(procs: Procs, work: Path, cost: float) -> tuple[str, str, Path]:
    token = work / "token"
    token.write_text(TOKEN + "\n")
    _, engine = procs.simulator("idle", "--seed", "1", "--time-scale", "200",
                                "--trace-cost", str(cost), name="engine")
    proc, sidecar = procs.sidecar(engine, "--events-token-file", str(token),
                                  "--poll-interval", "3600", state_dir=work / "state",
                                  name="sidecar", wait=False)
    wait_until(lambda: httpx.get(sidecar + "/readyz", timeout=2).status_code == 200,
               procs.ready_timeout, "sidecar /readyz", proc)
    return engine, sidecar, token


def observer_cost(engine: str, sidecar: str, token: Path, work: Path, *args: str,
                  ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    corpus = work / "fixture-1024.jsonl"
    corpus.write_text(subprocess.run([PYTHON, "-m", "simulator", "corpus", "fixture-1024"],
                                     cwd=ROOT, capture_output=True, text=True, check=True,
                                     timeout=60).stdout)
    trace = f"curl -fsS -XPOST {engine}/admin/trace -H content-type:application/json -d"
    out = work / "out"
    done = subprocess.run(
        [PYTHON, "-m", "commands", "observer-cost", "--engine-url", engine, "--sidecar", sidecar,
         "--token-file", str(token), "--corpus", str(corpus), "--out", str(out),
         "--on", trace + " '{\"enabled\": true}'", "--off", trace + " '{\"enabled\": false}'",
         "--witness", WITNESS, "--seed", "7", "--name", "t", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    doc = json.loads((out / "observer-cost.json").read_text())
    return done, doc


def test_a_five_percent_trace_cost_is_inside_the_interval_at_c1_and_c4(
        procs: Procs, tmp_path: Path) -> None:
    engine, sidecar, token = stack(procs, tmp_path, 0.05)
    done, doc = observer_cost(engine, sidecar, token, tmp_path)
    assert done.returncode == 0, done.stderr
    assert [r["concurrency"] for r in doc["results"]] == [1, 4]
    for r in doc["results"]:
        assert r["verdict"] == "cost_resolved", r["sentence"]
        assert r["resolved"] and r["low"] <= 0.05 <= r["high"], r
        assert r["high"] - r["low"] < 0.1  # an interval, not everything
        assert r["by_source"]["client"] is not None  # the client's view is reported beside it
    assert doc["simulated"] and doc["simulator_trace_cost"] == 0.05
    # Every step valid, each repetition its own phase on the sidecar, run in the planned order.
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert [s["phase"] for s in doc["steps"]] == [s["phase"] for s in plan["steps"]]
    assert all(s["valid"] for s in doc["steps"])
    phases = {p["name"] for p in httpx.get(
        sidecar + "/experiment/phases", timeout=10,
        headers={"Authorization": f"Bearer {TOKEN}"}).json()["phases"]}
    assert {s["phase"] for s in plan["steps"]} <= phases
    for c in (1, 4):
        arms = [s["arm"] for s in plan["steps"] if s["concurrency"] == c and s["arm"]]
        assert sorted(arms) == ["off"] * 3 + ["on"] * 3
        assert arms not in (["off"] * 3 + ["on"] * 3, ["on"] * 3 + ["off"] * 3)
    # The simulator said its trace was on in exactly the on repetitions.
    for s in doc["steps"]:
        assert s["begin"]["engine"]["trace"]["enabled"] is (s["arm"] == "on")
    md = (tmp_path / "out" / "observer-cost.md").read_text()
    assert md.startswith("# Observer cost: t (SIMULATED)") and "**SIMULATED evidence**" in md
    assert "![observer cost" in md
    assert (tmp_path / "out" / "observer-cost.png").stat().st_size > 10_000
    assert done.stdout.startswith("SIMULATED: the engine was the simulator")
    assert "C1: With the observer on, requests took longer" in done.stdout


def test_no_trace_cost_is_not_resolved_and_not_called_no_cost(
        procs: Procs, tmp_path: Path) -> None:
    engine, sidecar, token = stack(procs, tmp_path, 0.0)
    done, doc = observer_cost(engine, sidecar, token, tmp_path)
    assert done.returncode == 0, done.stderr
    for r in doc["results"]:
        assert r["verdict"] == "not_resolved" and not r["resolved"], r["sentence"]
        assert r["low"] < 0 < r["high"]
        assert "does not show that observing costs nothing" in r["sentence"]
    assert "no cost" not in (tmp_path / "out" / "observer-cost.md").read_text().lower()


def arm(engine: str, kind: str, after: int, **extra: Any) -> None:
    resp = httpx.post(engine + "/admin/fault", json={"kind": kind, "after_requests": after,
                                                     **extra}, timeout=10)
    assert resp.status_code == 200, resp.text


def test_a_drop_a_short_output_a_clock_jump_and_a_restart_each_invalidate_their_repetition(
        procs: Procs, tmp_path: Path) -> None:
    engine, sidecar, token = stack(procs, tmp_path, 0.05)
    # Requests 1-8 warm up; repetition k (in the order run) sends requests 8k+1 ... 8k+8.
    arm(engine, "drop", 10)  # request 11: repetition 1
    arm(engine, "short", 18)  # request 19: repetition 2
    arm(engine, "clock_jump", 26, seconds=30)  # request 27: repetition 3
    arm(engine, "restart", 34)  # request 35: repetition 4
    done, doc = observer_cost(engine, sidecar, token, tmp_path, "--requests", "8")
    assert done.returncode == 1, done.stderr
    reps = [s for s in doc["steps"] if s["arm"] is not None]
    failing = [{c["check"] for c in s["checks"] if c["ok"] is not True} for s in reps]
    assert failing[0] == {"failed_requests", "dropped_requests"}
    assert failing[1] == {"output_length"}
    assert failing[2] == {"clock_anchors"}
    # The restart also switched the trace off (every incarnation starts with it off).
    assert failing[3] - {"switch_verified"} == {"phase_valid", "dropped_requests",
                                                "incarnation"}
    assert ("switch_verified" in failing[3]) is (reps[3]["arm"] == "on")
    assert next(c for c in reps[3]["checks"] if c["check"] == "dropped_requests")["ok"] is None
    assert reps[3]["figures"]["engine"]["mean"] is None  # across a restart: no engine figure
    details = {c["check"]: c["detail"] for s in reps[:3] for c in s["checks"]
               if c["ok"] is not True}
    details["incarnation"] = next(c["detail"] for c in reps[3]["checks"]
                                  if c["check"] == "incarnation")
    assert "1 dropped" in details["dropped_requests"]
    assert "32 tokens" in details["output_length"]
    assert "engine's clock stepped by at least +29" in details["clock_anchors"]
    assert "the engine restarted" in details["incarnation"]
    # Every later repetition is of another incarnation than the run began with: invalid too.
    assert all("incarnation" in f for f in failing[4:])
    for r in doc["results"]:
        assert r["verdict"] == "cannot_conclude"
        assert r["estimate"] is None and r["low"] is None and not r["resolved"]
        assert [i["phase"] for i in r["invalid"]] == [
            s["phase"] for s in reps if s["concurrency"] == r["concurrency"]]
    assert not doc["conclusive"]
    # Kept and shown: every invalid repetition's figures are in the report.
    md = (tmp_path / "out" / "observer-cost.md").read_text()
    assert all(f"`{s['phase']}` | {s['arm']} | **no**" in md for s in reps)
    assert "C1: Cannot conclude: 6 repetition(s) are invalid" in done.stdout


def test_a_switch_the_engine_does_not_show_is_not_a_measurement(procs: Procs,
                                                                 tmp_path: Path) -> None:
    engine, sidecar, token = stack(procs, tmp_path, 0.05)
    corpus = tmp_path / "fixture.jsonl"
    corpus.write_text(subprocess.run([PYTHON, "-m", "simulator", "corpus", "fixture-1024"],
                                     cwd=ROOT, capture_output=True, text=True, check=True,
                                     timeout=60).stdout)

    def command(out: str, witness: str, on: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PYTHON, "-m", "commands", "observer-cost", "--engine-url", engine, "--sidecar",
             sidecar, "--token-file", str(token), "--corpus", str(corpus), "--out",
             str(tmp_path / out), "--on", on, "--off", "true", "--witness", witness,
             "--requests", "4", "--seed", "7", "--name", out],
            cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)

    # A witness the engine does not have: refused before anything is sent.
    done = command("absent", "snapshot:simulator.tracing", "true")
    assert done.returncode == 2, done.stderr
    assert ("--witness snapshot:simulator.tracing: the engine's snapshot has no "
            "simulator.tracing: the switch could not be verified") in done.stderr
    assert not (tmp_path / "absent" / "plan.json").exists()
    # An --on command that exits 0 and switches nothing: every on repetition is invalid.
    done = command("inert", WITNESS, "true")
    assert done.returncode == 1, done.stderr
    doc = json.loads((tmp_path / "inert" / "observer-cost.json").read_text())
    for r in doc["results"]:
        assert r["verdict"] == "cannot_conclude" and r["estimate"] is None
        assert {i["phase"].rsplit("/", 1)[1][:2] for i in r["invalid"]} == {"on"}
        assert all(i["failing"] == [
            "switch_verified: snapshot:simulator.trace.enabled was false after the switch and "
            "false after the repetition; the observer should have been on throughout"]
            for i in r["invalid"])
    assert all(s["valid"] for s in doc["steps"] if s["arm"] != "on")


def test_a_failing_switch_stops_the_run_and_the_report_says_so(procs: Procs,
                                                                tmp_path: Path) -> None:
    engine, sidecar, token = stack(procs, tmp_path, 0.0)
    out = tmp_path / "out"
    corpus = tmp_path / "fixture.jsonl"
    corpus.write_text(subprocess.run([PYTHON, "-m", "simulator", "corpus", "fixture-1024"],
                                     cwd=ROOT, capture_output=True, text=True, check=True,
                                     timeout=60).stdout)
    done = subprocess.run(
        [PYTHON, "-m", "commands", "observer-cost", "--engine-url", engine, "--sidecar", sidecar,
         "--token-file", str(token), "--corpus", str(corpus), "--out", str(out), "--on",
         "echo cannot reach the tracer; exit 3", "--off", "true", "--witness", WITNESS,
         "--requests", "4", "--seed", "7", "--name", "s"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr
    assert "stopping: the --on command before s/c1/on-1 exited 3" in done.stderr
    doc = json.loads((out / "observer-cost.json").read_text())
    assert not doc["complete"] and "exited 3" in doc["stopped"]
    c1, c4 = doc["results"]
    assert c1["verdict"] == c4["verdict"] == "cannot_conclude"
    plan = [s["phase"] for s in json.loads((out / "plan.json").read_text())["steps"]]
    # the repetition whose switch failed is invalid; those after it were not run
    assert [i["phase"] for i in c1["invalid"]] == ["s/c1/on-1"] and c4["invalid"] == []
    assert c1["not_run"] + c4["not_run"] == [p for p in plan[plan.index("s/c1/on-1") + 1:]
                                             if "warmup" not in p]
    ran = [s["phase"] for s in doc["steps"] if s.get("begin")]
    assert ran == plan[:plan.index("s/c1/on-1")]  # everything before the first on, no more
    assert all(s["stopped"] for s in doc["steps"] if s["phase"] not in ran
               and s["phase"] != "s/c1/on-1")
    assert "cannot reach the tracer" in (out / "switch.log").read_text()
    assert "**Incomplete**" in (out / "observer-cost.md").read_text()
