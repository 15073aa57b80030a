"""probe.json on disk: checked before anything is sent, kept current while the probe runs, never
dropped; read back by `evidence --probe-record`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lab.probe.record import RECORD_FILE, Recorder, RecordError, prepare_out, read_passes

SHA = "ab" * 32


def record(phase: str = "a/forward-1", failed: int = 0) -> dict[str, Any]:
    return {"format": 1, "name": "a", "complete": True, "passes": [
        {"phase": phase, "order": "forward", "sent": 2, "failed": failed,
         "sequence_sha256": SHA, "failures": [],
         "requests": [{"position": 0, "sha256": "01" * 32}, {"position": 1, "sha256": "02" * 32}]}]}


def test_prepare_out_makes_the_folder_and_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    prepare_out(tmp_path / "new" / "deeper")
    assert (tmp_path / "new" / "deeper").is_dir()
    assert list((tmp_path / "new" / "deeper").iterdir()) == []  # the write test left nothing
    (tmp_path / "file").write_text("x")
    with pytest.raises(RecordError, match="cannot write there: Not a directory"):
        prepare_out(tmp_path / "file" / "out")
    (tmp_path / "new" / RECORD_FILE).write_text("{}")
    prepare_out(tmp_path / "new")  # evidence may write beside a record
    with pytest.raises(RecordError, match="holds a probe record already"):
        prepare_out(tmp_path / "new", fresh_record=True)


def test_the_recorder_writes_at_most_every_two_seconds_unless_forced(tmp_path: Path) -> None:
    now = [0.0]
    doc = {"n": 0}
    recorder = Recorder(tmp_path / RECORD_FILE, lambda: dict(doc), clock=lambda: now[0])
    assert recorder.save(force=True) == tmp_path / RECORD_FILE
    doc["n"] = 1
    now[0] = 1.0
    assert recorder.save() is None  # not due
    assert json.loads((tmp_path / RECORD_FILE).read_text()) == {"n": 0}
    now[0] = 2.5
    assert recorder.save() is not None
    assert json.loads((tmp_path / RECORD_FILE).read_text()) == {"n": 1}
    assert [p.name for p in tmp_path.iterdir()] == [RECORD_FILE]  # no temporary files left


def test_a_record_that_cannot_be_written_where_it_belongs_is_rescued(tmp_path: Path) -> None:
    said: list[str] = []
    out = tmp_path / "out"
    out.mkdir()
    recorder = Recorder(out / RECORD_FILE, lambda: {"kept": True}, say=said.append)
    shutil.rmtree(out)  # the folder went away while the probe ran
    assert recorder.save(force=True) is None
    assert said == [f"probe: cannot write {out / RECORD_FILE}: No such file or directory; the "
                    "record is kept in memory and written again"]
    rescued = recorder.final()
    assert rescued is not None and rescued != out / RECORD_FILE
    try:
        assert json.loads(rescued.read_text()) == {"kept": True}
        assert said[-1] == f"probe: the record is in {rescued} (not in {out / RECORD_FILE})"
    finally:
        rescued.unlink()


def test_read_passes_takes_files_or_folders_and_refuses_disagreement(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / RECORD_FILE).write_text(json.dumps(record()))
    (tmp_path / "same.json").write_text(json.dumps(record()))
    [summary] = read_passes([tmp_path / "p", tmp_path / "same.json"])
    assert "requests" not in summary
    assert summary["body_sha256"] == ["01" * 32, "02" * 32]  # from the requests of an older record
    assert summary["record"] == str(tmp_path / "p" / RECORD_FILE)
    (tmp_path / "other.json").write_text(json.dumps(record(failed=1)))
    with pytest.raises(RecordError, match="disagree about phase a/forward-1"):
        read_passes([tmp_path / "p", tmp_path / "other.json"])
    (tmp_path / "bad.json").write_text(json.dumps({"format": 1, "name": "a", "passes": [{}]}))
    with pytest.raises(RecordError, match=r"bad.json: passes\[0\].phase: Field required"):
        read_passes([tmp_path / "bad.json"])
    (tmp_path / "text.json").write_text("not json")
    with pytest.raises(RecordError, match=r"text\.json: "):
        read_passes([tmp_path / "text.json"])
