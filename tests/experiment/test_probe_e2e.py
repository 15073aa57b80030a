"""The experiment workflow through the real command line, against real processes on 127.0.0.1:
`helios-exporter simulate --scenario idle` at the production geometry, `helios-exporter serve`
with a one-hour poll interval (so only the phase edges' own captures can see a probe's traffic),
and `helios-exporter probe | evidence | phase | compare` as an engineer runs them."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from simulator.corpora import write_corpus
from tests.helpers import promtool_check_metrics
from tools.harness import PYTHON, ROOT, Procs, families, sample, wait_http

TOKEN = "probe-Token-0123456789abcdef"
OTHER_MODEL = "qwen3-next-lora-support"
# Same identity in every arm, so that only the declared difference separates them.
IDENTITY = ("--seed", "1", "--image-digest", "sha256:" + "ab" * 32, "--container-id", "4be1c0ffee12")


def cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "exporter", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, check=False)


class Rig:
    """One simulated engine and one sidecar with the phases API enabled."""

    def __init__(self, procs: Procs, work: Path, *engine_args: str, name: str = "a") -> None:
        self.procs, self.work = procs, work
        self.token = work / "token"
        self.token.write_text(TOKEN + "\n")
        self.engine_proc, self.engine = procs.simulator(
            "idle", "--time-scale", "1000", *IDENTITY, *engine_args, name=f"engine-{name}")
        self.state = work / f"state-{name}"
        self.name = name
        self.start_sidecar()

    def start_sidecar(self) -> None:
        self.sidecar_proc, self.sidecar = self.procs.sidecar(
            self.engine, "--events-token-file", str(self.token), "--poll-interval", "3600",
            state_dir=self.state, name=f"sidecar-{self.name}-{len(self.procs.procs)}")

    def restart_engine(self) -> None:
        httpx.post(self.engine + "/admin/restart", json={"container": "same"}, timeout=10)

    def probe(self, out: Path, corpus: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return cli("probe", "--engine-url", self.engine, "--sidecar", self.sidecar,
                   "--token-file", str(self.token), "--corpus", str(corpus), "--out", str(out),
                   *args)

    def phase(self, action: str, name: str) -> subprocess.CompletedProcess[str]:
        return cli("phase", action, name, "--sidecar", self.sidecar, "--token-file",
                   str(self.token))

    def send(self, bodies: list[bytes]) -> None:
        with httpx.Client(base_url=self.engine, timeout=30) as client:
            for body in bodies:
                resp = client.post("/v1/completions", content=body,
                                   headers={"content-type": "application/json"})
                assert resp.status_code == 200, resp.text


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("corpora")
    out = {}
    for name, lane, model in (("probe-52", "probe-52", None), ("other", "probe-52", OTHER_MODEL),
                              ("small-12", "small-12", None)):
        with (d / f"{name}.jsonl").open("w") as f:
            write_corpus(lane, f, *(model,) if model else ())
        out[name] = d / f"{name}.jsonl"
    return out


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    p = Procs(tmp_path / "procs")
    yield p
    p.stop_all()


def evidence(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "evidence.json").read_text())
    return doc


def deltas(doc: dict[str, Any], name: str) -> dict[str, Any]:
    phase = next(p for p in doc["phases"] if p["name"] == name)
    assert phase["valid"] is True, phase["invalid_reasons"]
    d: dict[str, Any] = phase["deltas"]
    return d


def test_the_three_verdicts(procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)

    # 1. forward prime, reverse replay: the replay hits what survived the prime
    done = rig.probe(tmp_path / "rev", corpora["probe-52"], "--name", "rev")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "rev/forward-1 -> rev/reverse-2: order_sensitive"
    doc = evidence(tmp_path / "rev")
    assert doc["probes"] == [{"prime": "rev/forward-1", "replay": "rev/reverse-2",
                              "verdict": "order_sensitive"}]
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
    assert doc["probes"][0]["verdict"] == "order_sensitive"
    assert "Failed requests" in (tmp_path / "out" / "evidence.md").read_text()


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
        merged = cli("evidence", "--sidecar", rig.sidecar, "--out", str(tmp_path / arm / "all"))
        assert merged.returncode == 0, merged.stderr
        arms[arm] = tmp_path / arm / "all" / "evidence.json"

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
    failed = compare("wide", "base", "--allow-difference", "geometry")
    assert failed.returncode == 1, failed.stdout
    assert "gate failed: lane probe-52 (primary)" in failed.stdout
