"""The experiment workflow through the real command line, against real processes on 127.0.0.1:
`helios-exporter simulate --scenario idle` at the generic geometry, `helios-exporter serve`
with a one-hour poll interval (so only the phase edges' own captures can see a probe's traffic),
and `helios-exporter probe | evidence | phase | compare` as an engineer runs them."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path

import httpx

from tests.helpers import promtool_check_metrics
from tests.lab.rig import Rig, cli, deltas, evidence
from tools.harness import PYTHON, ROOT, Procs, families, sample, wait_http, wait_until


def test_the_three_verdicts(procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)

    # 1. forward prime, reverse replay: the replay hits what survived the prime
    done = rig.probe(tmp_path / "rev", corpora["probe-52"], "--name", "rev")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "SIMULATED: the simulated engine answered these passes; the verdicts describe it, not "
        "Helios",
        "rev/forward-1 -> rev/reverse-2: order_sensitive (the reverse replay hit what the forward "
        "prime stored: supports order sensitivity)"]
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
    assert record["complete"] is True and record["stopped"] is None
    # every answer: the fixed 32 tokens, its output hash, and the whole answer in outputs.jsonl
    prime_requests = record["passes"][0]["requests"]
    assert {r["completion_tokens"] for r in prime_requests} == {32}
    assert all(r["expected_tokens"] == 32 and len(r["output_sha256"]) == 64
               for r in prime_requests)
    answers = [json.loads(line) for line in
               (tmp_path / "rev" / "outputs.jsonl").read_text().splitlines()]
    assert len(answers) == 104 and {a["status"] for a in answers} == {200}
    # the same body gets the same text in both orders: the outputs do not depend on the cache
    first = {r["sha256"]: r["output_sha256"] for r in record["passes"][0]["requests"]}
    assert {r["sha256"]: r["output_sha256"] for r in record["passes"][1]["requests"]} == first
    # the evidence carries the passes: what was sent, in which order, and what failed
    assert [(p["phase"], p["sent"], p["failed"]) for p in doc["passes"]] == [
        ("rev/forward-1", 52, 0), ("rev/reverse-2", 52, 0)]
    assert doc["passes"][1]["body_sha256"] == hashes[::-1]
    assert doc["passes"][1]["completion_tokens"] == 52 * 32
    assert doc["simulated"] is True  # the engine's answers said so (system_fingerprint)
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
    done = cli("evidence", "--sidecar", rig.sidecar, "--token-file", str(rig.client_token),
               "--out", str(out), "--probe",
               "rev/forward-1:rev/reverse-2", "--probe", "rev/forward-1:fwd/forward-2",
               "--prefix", "rev/", "--prefix", "fwd/")
    assert done.returncode == 0, done.stderr
    doc = evidence(out)
    assert [p["name"] for p in doc["phases"]] == ["rev/forward-1", "rev/reverse-2",
                                                  "fwd/forward-1", "fwd/forward-2"]
    assert [p["verdict"] for p in doc["probes"]] == ["order_sensitive", "invalid"]
    assert "different generations" in doc["probes"][1]["why"]
    assert doc["passes"] == []  # no probe record given: the passes are unknown, not empty


def test_a_failed_request_stops_the_probe_and_every_output_is_kept(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)
    lines = corpora["small-12"].read_bytes().splitlines()
    bad = b'{"model": "qwen3-next", "prompt": "too long", "max_tokens": 100000, "ignore_eos": true}'
    corpus = tmp_path / "with-a-bad-body.jsonl"
    corpus.write_bytes(b"\n".join([*lines[:5], bad, *lines[5:]]) + b"\n")
    done = rig.probe(tmp_path / "out", corpus, "--name", "bad")
    assert done.returncode == 1
    assert ("stopped: output-contract failure in bad/forward-1: request #5 (body "
            f"{hashlib.sha256(bad).hexdigest()[:12]}): HTTP 422; 1 of 6 sent failed") in done.stderr
    record = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert record["stopped"].startswith("output-contract failure in bad/forward-1")
    [only] = record["passes"]  # nothing was sent after the failure, no replay began
    assert len(only["requests"]) == 6
    [failure] = only["failures"]
    assert failure["status"] == 422 and "max_tokens" in failure["output"]
    answers = (tmp_path / "out" / "outputs.jsonl").read_text().splitlines()
    assert [json.loads(a)["status"] for a in answers] == [200] * 5 + [422]
    doc = evidence(tmp_path / "out")
    assert deltas(doc, "bad/forward-1")["requests"] == 5  # bracketed: the phase was ended
    assert doc["probes"] == []  # no replay, no verdict
    md = (tmp_path / "out" / "evidence.md").read_text()
    assert "Failed requests" in md

    # A corpus whose bodies do not fix their output length is refused before anything is sent.
    loose = tmp_path / "loose.jsonl"
    loose.write_bytes(lines[0].replace(b',"min_tokens":32,"ignore_eos":true', b"") + b"\n")
    done = rig.probe(tmp_path / "loose", loose, "--name", "loose")
    assert done.returncode == 2
    assert f"{loose}:1: the body does not fix its output length" in done.stderr


def test_an_engine_that_stops_early_breaks_the_output_contract(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path, "--early-stop", "20")
    done = rig.probe(tmp_path / "out", corpora["small-12"], "--name", "short")
    assert done.returncode == 1, done.stderr
    assert ("stopped: output-contract failure in short/forward-1: request #0 (body "
            in done.stderr)
    assert "completion_tokens 20, the body fixed 32" in done.stderr
    record = json.loads((tmp_path / "out" / "probe.json").read_text())
    [failure] = record["passes"][0]["failures"]
    assert failure["completion_tokens"] == 20 and '"completion_tokens":20' in failure["output"]


def test_engine_credentials_and_concurrency(procs: Procs, tmp_path: Path,
                                            corpora: dict[str, Path]) -> None:
    key = tmp_path / "engine-key"
    key.write_text("engine-Key-0123456789\n")
    rig = Rig(procs, tmp_path, "--api-key-file", str(key))
    done = rig.probe(tmp_path / "none", corpora["small-12"], "--name", "anon")
    assert done.returncode == 1
    assert ("stopped: authentication failure in anon/forward-1: request #0 (body " in
            done.stderr)
    assert "HTTP 401: the engine refused the credentials" in done.stderr
    rig.restart_engine()
    done = rig.probe(tmp_path / "c4", corpora["small-12"], "--name", "c4", "--concurrency", "4",
                     "--engine-token-file", str(key))
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "c4" / "probe.json").read_text())
    assert record["concurrency"] == 4 and record["engine_headers"] == ["Authorization"]
    assert "engine-Key" not in (tmp_path / "c4" / "probe.json").read_text()
    assert [p["sent"] for p in record["passes"]] == [12, 12]
    assert [r["position"] for r in record["passes"][1]["requests"]] == list(range(12))
    assert evidence(tmp_path / "c4")["probes"][0]["verdict"] == "order_sensitive"
    rig.restart_engine()
    done = rig.probe(tmp_path / "hdr", corpora["small-12"], "--name", "hdr", "--order", "forward",
                     "--engine-header", "Authorization: Bearer engine-Key-0123456789")
    assert done.returncode == 0, done.stderr


def test_the_prime_needs_a_fresh_incarnation_and_the_pins_hold(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)
    assert rig.probe(tmp_path / "a", corpora["small-12"], "--name", "a").returncode == 0
    again = rig.probe(tmp_path / "b", corpora["small-12"], "--name", "b")
    assert again.returncode == 1
    assert "stopped: b/forward-1: not a fresh incarnation (generation " in again.stderr
    assert "24 lookups served already" in again.stderr
    assert [p["sent"] for p in json.loads((tmp_path / "b" / "probe.json").read_text())[
        "passes"]] == [0]  # the phase begun was ended with nothing sent
    # --fresh-command gives the prime its own incarnation
    done = rig.probe(tmp_path / "c", corpora["small-12"], "--name", "c", "--fresh-command",
                     rig.fresh_command)
    assert done.returncode == 0, done.stderr

    (tmp_path / "pinned").mkdir()
    pinned = Rig(procs, tmp_path / "pinned", name="pinned",
                 sidecar_args=("--expect-package", "helios-9.9.9"))
    done = pinned.probe(tmp_path / "p", corpora["small-12"], "--name", "p")
    assert done.returncode == 1
    assert "stopped: pin failure at the begin of p/forward-1: package" in done.stderr


def test_another_client_s_traffic_during_the_probe_stops_it(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path, "--time-scale", "20")  # a pass of 52 takes about a second
    probe = subprocess.Popen(
        [PYTHON, "-m", "commands", "probe", "--engine-url", rig.engine, "--sidecar", rig.sidecar,
         "--token-file", str(rig.token), "--corpus", str(corpora["probe-52"]), "--out",
         str(tmp_path / "out"), "--name", "busy"], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: "busy/forward-1" in rig.phase_names(), 60, "the prime's phase")
        rig.send([corpora["small-12"].read_bytes().splitlines()[0]])  # someone else's request
        _, err = probe.communicate(timeout=240)
    finally:
        if probe.poll() is None:
            probe.kill()
    assert probe.returncode == 1, err
    assert "another client's traffic reached the engine" in err or \
        "nothing may be sent between passes" in err, err


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


DECLARE = ("--declare", "runtime=helios-2.14.0+47581cca", "--declare", "quantization=w4a16",
           "--declare", "speculation=off", "--declare", "recipe=tp2-c1", "--declare",
           "power_limit=none-simulated")


def test_compare_two_row_fraction_arms(procs: Procs, tmp_path: Path,
                                       corpora: dict[str, Path]) -> None:
    arms = {}
    for arm, fraction in (("base", "0.25"), ("wide", "0.3125")):
        rig = Rig(procs, tmp_path, "--row-fraction", fraction, name=arm)
        for lane in ("probe-52", "small-12"):
            # each repetition on its own fresh incarnation: a prime, then the measured replay
            done = rig.probe(tmp_path / arm / lane, corpora[lane], "--name", lane, "--order",
                             "forward,forward", "--repetitions", "3", "--fresh-command",
                             rig.fresh_command, *DECLARE)
            assert done.returncode == 0, done.stderr
        merged = rig.evidence(tmp_path / arm / "all", "--probe-record",
                              str(tmp_path / arm / "probe-52"),
                              str(tmp_path / arm / "small-12" / "probe.json"))
        assert merged.returncode == 0, merged.stderr
        arms[arm] = tmp_path / arm / "all" / "evidence.json"
        unrecorded = rig.evidence(tmp_path / arm / "unrecorded")
        assert unrecorded.returncode == 0, unrecorded.stderr
        arms[arm + "-unrecorded"] = tmp_path / arm / "unrecorded" / "evidence.json"

    semantic = ("--semantic-command", f"{PYTHON} -m simulator semantic-check")

    def compare(base: str, cand: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return cli("compare", "--baseline", str(arms[base]), "--candidate", str(arms[cand]),
                   "--primary", "probe-52", "--protected", "small-12", *extra)

    refused = compare("base", "wide", *semantic)
    assert refused.returncode == 2, refused.stdout
    assert "the arms differ in allocator" in refused.stdout
    # Every gate of the two lanes holds, but an allocator change also protects a page-heavy
    # long-context lane (the allocator plan), which these arms lack (docs/experiments.md section 6 runs it).
    passed = compare("base", "wide", "--allow-difference", "allocator", *semantic)
    assert passed.returncode == 1, passed.stdout
    assert passed.stdout.startswith("SIMULATED: ")
    assert passed.stdout.splitlines()[-1].startswith(
        "NOT ADMITTED: failed: lanes (simulated evidence); not checked by this gate: ")
    gates = {line.split()[0]: line for line in passed.stdout.split("gates:\n")[1].splitlines()
             if line.startswith("  ")}
    assert gates.pop("lanes").startswith("  lanes             FAILS: an allocator change needs "
                                         "a page-heavy long context protected lane")
    assert len(gates) == 8 and all(" holds: " in g for g in gates.values()), passed.stdout
    assert "768 answers are the simulated model's reference text" in gates["semantic"]
    # 640 rows hold all 52 bodies: the replays hit instead of missing as evicted, in every pair
    changes = [float(m) for m in re.findall(r"^probe-52 .* benefit ([0-9.]+)% >= 5\.0%: pass$",
                                            passed.stdout.split("pairs (")[1], re.M)]
    assert len(changes) == 3 and all(14 < c < 22 for c in changes), passed.stdout
    assert passed.stdout.count("    3       52       156     4,992 ") == 2
    assert passed.stdout.count("    3       12        36     1,152 ") == 2
    # every repetition on its own incarnation, with its denominators
    reps = [line.split() for line in passed.stdout.split("repetitions (")[1].split("pairs (")[0]
            .splitlines() if line.startswith(("probe-52 ", "small-12 "))]
    assert len(reps) == 12, passed.stdout
    for label in ("baseline", "candidate"):  # one incarnation per repetition within an arm
        assert len({r[3] for r in reps if r[1] == label}) == 6, passed.stdout
    assert {tuple(r[4:10]) for r in reps} == {("2", "52", "0", "52", "1,664", "1,664"),
                                              ("2", "12", "0", "12", "384", "384")}
    without = compare("base", "wide", "--allow-difference", "allocator")
    assert without.returncode == 1 and "not evaluated: semantic" in without.stdout
    # without the probe's records the sent and failed requests are unknown: no comparison
    unrecorded = compare("base-unrecorded", "wide-unrecorded", "--allow-difference", "allocator")
    assert unrecorded.returncode == 2, unrecorded.stdout
    assert "repetition probe-52/1 has no probe record" in unrecorded.stdout
    failed = compare("wide", "base", "--allow-difference", "allocator", *semantic)
    assert failed.returncode == 1, failed.stdout
    assert "  primary           FAILS: probe-52: pair 1: +" in failed.stdout
    assert "  counter evidence  FAILS: not shown in probe-52/1, probe-52/2, probe-52/3: " \
        in failed.stdout
