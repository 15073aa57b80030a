"""What the experiment commands do with bad circumstances, through the real command line against
real processes: an engine that answers nothing, an --out that cannot be written, phase names in
use, a malformed probe record. Nothing is sent before the command knows it can keep the record,
and nothing it measured is called a verdict when it measured nothing."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.lab.rig import Rig, cli, evidence
from tools.harness import Procs, free_port


def test_a_probe_whose_requests_all_fail_has_no_verdict(procs: Procs, tmp_path: Path,
                                                        corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)
    dead = f"http://127.0.0.1:{free_port()}"
    done = rig.probe(tmp_path / "out", corpora["small-12"], "--name", "dead", engine=dead)
    assert done.returncode == 1, done.stderr
    assert "stopped: request failure in dead/forward-1: request #0 (body " in done.stderr
    assert "ConnectError: " in done.stderr
    assert done.stdout == ""  # no replay ran: no verdict at all
    doc = evidence(tmp_path / "out")
    assert doc["probes"] == [] and [p["sent"] for p in doc["passes"]] == [1]

    # `evidence` on the probe's own --out merges its probe.json; a pair it cannot judge says why
    again = rig.evidence(tmp_path / "out", "--probe", "dead/forward-1:dead/reverse-2")
    assert again.returncode == 0, again.stderr
    regenerated = evidence(tmp_path / "out")
    assert [p["failed"] for p in regenerated["passes"]] == [1]
    [pair] = regenerated["probes"]
    assert pair["verdict"] == "invalid" and "replay phase 'dead/reverse-2' not found" in pair["why"]
    again = rig.evidence(tmp_path / "out", "--probe", "dead/forward-1:dead/forward-1")
    assert again.returncode == 0, again.stderr
    [pair] = evidence(tmp_path / "out")["probes"]
    assert pair["verdict"] == "invalid"  # not no_reuse: nothing was stored, nothing was asked
    assert ("the prime phase 'dead/forward-1' saw 0 lookups and 0 finished requests at the "
            "engine: nothing was measured") in pair["why"]
    md = (tmp_path / "out" / "evidence.md").read_text()
    assert "| **invalid** | cannot be judged: the prime phase 'dead/forward-1' saw 0 lookups" in md
    assert "nothing the prime stored was reused" not in md


def test_an_unwritable_out_stops_the_probe_before_anything_is_sent(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    done = rig.probe(blocker / "out", corpora["small-12"], "--name", "w")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"helios-exporter probe: --out {blocker / 'out'}: cannot write "
                                   "there: Not a directory")
    assert rig.phase_names() == []  # no phase begun, so the names are free
    lookups = httpx.get(rig.engine + "/debug/offload/snapshot", timeout=10).json()
    assert lookups["offload"]["lookups"]["total"] == 0  # and nothing sent

    done = rig.probe(tmp_path / "out", corpora["small-12"], "--name", "w")
    assert done.returncode == 0, done.stderr  # the same names, no 409
    record = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert record["complete"] is True and [p["sent"] for p in record["passes"]] == [12, 12]

    # a second probe into the same folder would overwrite the first one's record
    again = rig.probe(tmp_path / "out", corpora["small-12"], "--name", "w2")
    assert again.returncode == 2 and "holds a probe record already" in again.stderr
    # names in use are refused before anything is sent, not with a 409 halfway
    taken = rig.probe(tmp_path / "out2", corpora["small-12"], "--name", "w")
    assert taken.returncode == 2, taken.stderr
    assert "has phases named w/forward-1, w/reverse-2 already" in taken.stderr
    assert rig.phase_names() == ["w/forward-1", "w/reverse-2"]


def test_evidence_refuses_what_it_cannot_use_before_asking_the_sidecar(
        procs: Procs, tmp_path: Path) -> None:
    rig = Rig(procs, tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    done = rig.evidence(blocker / "out")
    assert done.returncode == 2
    assert done.stderr.strip() == (f"helios-exporter evidence: --out {blocker / 'out'}: cannot "
                                   "write there: Not a directory")

    bad = tmp_path / "bad" / "probe.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({"format": 1, "name": "x", "passes": [
        {"phase": "x/forward-1", "sent": 52, "failed": "none",
         "sequence_sha256": "0" * 64}]}))
    done = rig.evidence(tmp_path / "e", "--probe-record", str(bad.parent))
    assert done.returncode == 2
    assert f"probe record {bad}: passes[0].failed: Input should be a valid integer" in done.stderr
    assert "Traceback" not in done.stderr
    done = rig.evidence(tmp_path / "e", "--probe-record", str(tmp_path / "missing.json"))
    assert done.returncode == 2 and "No such file or directory" in done.stderr


def test_a_record_of_phases_the_sidecar_does_not_have_is_said(
        procs: Procs, tmp_path: Path, corpora: dict[str, Path]) -> None:
    rig = Rig(procs, tmp_path)
    assert rig.probe(tmp_path / "p", corpora["small-12"], "--name", "s",
                     "--order", "forward").returncode == 0
    record = json.loads((tmp_path / "p" / "probe.json").read_text())
    record["passes"][0]["phase"] = "elsewhere/forward-1"
    (tmp_path / "other.json").write_text(json.dumps(record))
    done = cli("evidence", "--sidecar", rig.sidecar, "--token-file", str(rig.client_token),
               "--out", str(tmp_path / "e"),
               "--probe-record", str(tmp_path / "p"), str(tmp_path / "other.json"))
    assert done.returncode == 0, done.stderr
    assert "1 recorded passes are not among the sidecar's phases (left out): " \
           "elsewhere/forward-1" in done.stderr
    assert [p["phase"] for p in evidence(tmp_path / "e")["passes"]] == ["s/forward-1"]
