"""The experiment workflow through the real command line, against real processes on 127.0.0.1:
`helios-exporter simulate --scenario idle` at the generic geometry, `helios-exporter serve`
with a one-hour poll interval (so only the phase edges' own captures can see a probe's traffic),
and `helios-exporter probe | evidence | phase | compare` as an engineer runs them."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import httpx
from rig import Rig, cli, deltas, evidence

from tests.helpers import promtool_check_metrics
from tools.harness import Procs, families, sample, wait_http


def test_the_three_verdicts(procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)

    # 1. forward prime, reverse replay: the replay hits what survived the prime
    done = rig.probe(tmp_path / "rev", corpora["probe-52"], "--name", "rev")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("rev/forward-1 -> rev/reverse-2: order_sensitive (the "
                                   "reverse replay hit what the forward prime stored: supports "
                                   "order sensitivity)")
    doc = evidence(tmp_path / "rev")
    assert doc["probes"] == [{"prime": "rev/forward-1", "replay": "rev/reverse-2",
                              "verdict": "order_sensitive", "orders": ["forward", "reverse"],
                              "reading": "the reverse replay hit what the forward prime stored: "
                                         "supports order sensitivity"}]
    prime, replay = deltas(doc, "rev/forward-1"), deltas(doc, "rev/reverse-2")
    assert (prime["lookups"], prime["hits"], prime["misses"]["no_prefix"]) == (52, 0, 52)
    assert (replay["lookups"], replay["hits"], replay["misses"]["evicted"]) == (52, 43, 9)
    assert replay["host_tokens_restored"] > 0
    record = json.loads((tmp_path / "rev" / "probe.json").read_text())
    hashes = [hashlib.sha256(line).hexdigest()
              for line in corpora["probe-52"].read_bytes().splitlines()]
    assert [r["sha256"] for r in record["passes"][0]["requests"]] == hashes
    assert [r["sha256"] for r in record["passes"][1]["requests"]] == hashes[::-1]
    assert record["corpus"]["body_sha256"] == hashes
    assert record["complete"] is True
    # the evidence carries the passes: what was sent, in which order, and what failed
    assert [(p["phase"], p["sent"], p["failed"]) for p in doc["passes"]] == [
        ("rev/forward-1", 52, 0), ("rev/reverse-2", 52, 0)]
    assert doc["passes"][1]["body_sha256"] == hashes[::-1]
    assert (tmp_path / "rev" / "evidence.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (tmp_path / "rev" / "evidence.md").read_text()
    assert "| `rev/reverse-2` | yes | 52 | 52 | 43 | 43" not in md  # hits column, not misses
    assert "| `rev/reverse-2` | yes | 52 | 52 | 43 | 9 evicted |" in md
    assert "![" in md and "evidence.png" in md

    # 2. a fresh engine, forward prime and forward replay at 12 stores per request: rows thrash
    rig.restart_engine()
    done = rig.probe(tmp_path / "fwd", corpora["probe-52"], "--name", "fwd", "--order",
                     "forward,forward")
    assert done.returncode == 0, done.stderr
    doc = evidence(tmp_path / "fwd")
    assert doc["probes"][0]["verdict"] == "no_reuse"
    replay = deltas(doc, "fwd/forward-2")
    assert (replay["hits"], replay["misses"]["evicted"], replay["misses"]["no_prefix"]) == (0, 52, 0)
    assert replay["host_stores"] == 52 * 12
    assert replay["row_pressure_attempts"] == replay["row_pressure_with_page_headroom"] == 624
    assert replay["page_pressure_attempts"] == 0
    phase = next(p for p in doc["phases"] if p["name"] == "fwd/forward-2")
    for edge in ("begin", "end"):
        page = phase[edge]["slabs"]["page"]
        assert page["free"] / page["capacity"] > 0.9

    # 3. a fresh engine, the replay under another model: the keys differ
    rig.restart_engine()
    done = rig.probe(tmp_path / "key", corpora["probe-52"], "--name", "key", "--order",
                     "forward,forward", "--replay-corpus", str(corpora["other"]))
    assert done.returncode == 0, done.stderr
    doc = evidence(tmp_path / "key")
    assert doc["probes"][0]["verdict"] == "incompatible_keys"
    replay = deltas(doc, "key/forward-2")
    assert (replay["hits"], replay["misses"]["key_mismatch"]) == (0, 52)
    assert list(replay["misses_raw"]) == [next(iter(replay["misses_raw"]))]
    assert next(iter(replay["misses_raw"])).startswith("key_mismatch:ckpt=")

    # The evidence command judges any pair; one across a restart cannot be judged.
    out = tmp_path / "all"
    done = cli("evidence", "--sidecar", rig.sidecar, "--out", str(out), "--probe",
               "rev/forward-1:rev/reverse-2", "--probe", "rev/forward-1:fwd/forward-2",
               "--prefix", "rev/", "--prefix", "fwd/")
    assert done.returncode == 0, done.stderr
    doc = evidence(out)
    assert [p["name"] for p in doc["phases"]] == ["rev/forward-1", "rev/reverse-2",
                                                  "fwd/forward-1", "fwd/forward-2"]
    assert [p["verdict"] for p in doc["probes"]] == ["order_sensitive", "invalid"]
    assert "different generations" in doc["probes"][1]["why"]
    assert doc["passes"] == []  # no probe record given: the passes are unknown, not empty


def test_a_failed_request_is_kept_and_never_stops_the_record(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)
    lines = corpora["small-12"].read_bytes().splitlines()
    bad = b'{"model": "qwen3-next", "prompt": "too long an answer", "max_tokens": 100000}'
    corpus = tmp_path / "with-a-bad-body.jsonl"
    corpus.write_bytes(b"\n".join([*lines[:5], bad, *lines[5:]]) + b"\n")
    done = rig.probe(tmp_path / "out", corpus, "--name", "bad")
    assert done.returncode == 1
    assert "2 requests failed" in done.stderr  # the bad body, once per pass
    record = json.loads((tmp_path / "out" / "probe.json").read_text())
    for p in record["passes"]:
        assert len(p["requests"]) == 13
        [failure] = p["failures"]
        assert failure["status"] == 422 and "max_tokens" in failure["output"]
        assert failure["sha256"] == hashlib.sha256(bad).hexdigest()
    assert [f["position"] for p in record["passes"] for f in p["failures"]] == [5, 7]
    doc = evidence(tmp_path / "out")
    assert deltas(doc, "bad/forward-1")["requests"] == 12  # the engine finished the other 12
    # a probe with failed outputs proves nothing about the cache: no verdict but `invalid`
    [pair] = doc["probes"]
    assert pair["verdict"] == "invalid"
    assert pair["why"] == ("1 of 13 requests of the prime pass 'bad/forward-1' failed (their "
                           "outputs are in probe.json); 1 of 13 requests of the replay pass "
                           "'bad/reverse-2' failed (their outputs are in probe.json)")
    md = (tmp_path / "out" / "evidence.md").read_text()
    assert "Failed requests" in md and "**invalid** | cannot be judged: 1 of 13" in md


def test_an_open_phase_survives_a_sigkill_and_counts_exactly_its_requests(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)
    assert rig.phase("end", "never").returncode == 1
    done = rig.phase("begin", "durable/1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["capture"]["counters"]["lookups.total"] == 0
    text = httpx.get(rig.sidecar + "/metrics", timeout=10).text
    assert sample(families(text), "helios_experiment_phase_open", phase="durable/1") == 1.0
    promtool_check_metrics(text.encode())

    rig.sidecar_proc.kill()  # SIGKILL: no shutdown code runs
    bodies = corpora["small-12"].read_bytes().splitlines()
    rig.send(bodies[:5])  # while the sidecar is away
    rig.start_sidecar()
    wait_http(rig.sidecar + "/readyz", 30)
    again = rig.phase("begin", "durable/1")
    assert again.returncode == 1 and "409" in again.stderr
    rig.send(bodies[5:9])
    done = rig.phase("end", "durable/1")
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)["phase"]["deltas"]
    assert (d["lookups"], d["requests"]) == (9, 9)  # the 5 sent while it was down count too
    assert rig.phase("end", "durable/1").returncode == 1
    assert "helios_experiment_phase_open" not in httpx.get(rig.sidecar + "/metrics").text


def test_compare_two_row_fraction_arms(procs: Procs, tmp_path: Path,
                                       corpora: dict[str, Path]) -> None:
    arms = {}
    for arm, fraction in (("base", "0.25"), ("wide", "0.3125")):
        rig = Rig(procs, tmp_path, "--row-fraction", fraction, name=arm)
        for lane in ("probe-52", "small-12"):
            done = rig.probe(tmp_path / arm / lane, corpora[lane], "--name", lane, "--order",
                             "forward", "--repetitions", "3")
            assert done.returncode == 0, done.stderr
        merged = rig.evidence(tmp_path / arm / "all", "--probe-record",
                              str(tmp_path / arm / "probe-52"),
                              str(tmp_path / arm / "small-12" / "probe.json"))
        assert merged.returncode == 0, merged.stderr
        arms[arm] = tmp_path / arm / "all" / "evidence.json"
        unrecorded = rig.evidence(tmp_path / arm / "unrecorded")
        assert unrecorded.returncode == 0, unrecorded.stderr
        arms[arm + "-unrecorded"] = tmp_path / arm / "unrecorded" / "evidence.json"

    def compare(base: str, cand: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return cli("compare", "--baseline", str(arms[base]), "--candidate", str(arms[cand]),
                   "--primary", "probe-52", "--protected", "small-12", *extra)

    refused = compare("base", "wide")
    assert refused.returncode == 2, refused.stdout
    assert "the arms differ in geometry" in refused.stdout
    passed = compare("base", "wide", "--allow-difference", "geometry")
    assert passed.returncode == 0, passed.stdout
    change = float(passed.stdout.split("change ")[1].split("%")[0])
    assert -22 < change < -14  # 640 rows hold all 52 bodies: hits instead of evicted misses
    assert passed.stdout.count("    3        52       156 ") == 2
    assert passed.stdout.count("    3        12        36 ") == 2
    # every repetition's denominators: sent and failed (the probe's record), finished (engine)
    reps = [line.split() for line in passed.stdout.splitlines()
            if line.startswith(("probe-52 ", "small-12 ")) and " s  " in line
            and "/" in line.split()[2]]
    assert len(reps) == 12, passed.stdout
    assert {tuple(r[3:6]) for r in reps} == {("52", "0", "52"), ("12", "0", "12")}
    # without the probe's records the sent and failed requests are unknown: no comparison
    unrecorded = compare("base-unrecorded", "wide-unrecorded", "--allow-difference", "geometry")
    assert unrecorded.returncode == 2, unrecorded.stdout
    assert "probe-52/1: no probe record" in unrecorded.stdout
    failed = compare("wide", "base", "--allow-difference", "geometry")
    assert failed.returncode == 1, failed.stdout
    assert "gate failed: lane probe-52 (primary)" in failed.stdout
