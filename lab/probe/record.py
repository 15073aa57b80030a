"""probe.json: the probe's record of what it sent, kept on disk while it runs, read by `evidence`.

The record is the only place the bodies' hashes, the exact order and the failed outputs exist,
so it must never be lost: `prepare_out` proves `--out` writable before the first phase begins,
`Recorder` rewrites the file (atomically: a reader sees the old or the new record, never half)
from the start, every few seconds and after every pass, and once more whatever way the probe
ends. `evidence_passes` turns a record into the `passes` of evidence.json, which is how
`evidence --probe-record` and the probe itself carry sent, failed, hashes and order to `compare`.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from exporter import jsonfile
from lab.evidence.schema import SchemaError, check_record

RECORD_FILE = "probe.json"
OUTPUTS_FILE = "outputs.jsonl"  # every answer the engine gave, one JSON line each
SAVE_EVERY = 2.0  # seconds between rewrites while requests go out


class RecordError(ValueError):
    """An output directory or a probe record cannot be used; the message says why."""


def prepare_out(out: Path, *, fresh_record: bool = False) -> None:
    """Create `out` and prove it writable (by writing in it: permissions alone do not say, e.g.
    for root or on a read-only mount). `fresh_record`: refuse a folder that holds a probe record
    already, which a second probe would overwrite."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".helios-write-test-"):
            pass
    except OSError as exc:
        raise RecordError(f"--out {out}: cannot write there: {exc.strerror or exc}") from None
    if fresh_record:
        for name in (RECORD_FILE, OUTPUTS_FILE):
            if (out / name).exists():
                raise RecordError(f"--out {out} holds a probe record already ({name}): give "
                                  "each probe its own --out")


def write_json(path: Path, doc: Mapping[str, Any], *, sort_keys: bool = False) -> None:
    """Replace `path` atomically with the document (a temporary file beside it, then rename),
    created as `open()` would create it (the umask's permissions)."""
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, allow_nan=False, sort_keys=sort_keys)
            f.write("\n")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class Recorder:
    """Keeps `path` up to date with `document()` while the probe runs."""

    def __init__(self, path: Path, document: Callable[[], Mapping[str, Any]],
                 say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
                 clock: Callable[[], float] = time.monotonic, every: float = SAVE_EVERY) -> None:
        self.path, self._document, self._say, self._clock = path, document, say, clock
        self._every = every
        self._last: float | None = None
        self._failing = False

    def save(self, force: bool = False) -> Path | None:
        """Write the record now (`force`) or when the last write is `every` seconds old; the
        path written, None when nothing was (due or possible)."""
        now = self._clock()
        if not force and self._last is not None and now - self._last < self._every:
            return None
        self._last = now
        try:
            write_json(self.path, self._document())
        except OSError as exc:
            if not self._failing:
                self._say(f"probe: cannot write {self.path}: {exc.strerror or exc}; the record "
                          "is kept in memory and written again")
            self._failing = True
            return None
        self._failing = False
        return self.path

    def final(self) -> Path | None:
        """The last write; when `path` cannot be written, the record goes to a file in the
        temporary folder instead (and says where): it is never dropped."""
        if self.save(force=True) is not None:
            return self.path
        try:
            fd, rescue = tempfile.mkstemp(prefix="helios-probe-", suffix=".json")
            os.close(fd)
            write_json(Path(rescue), self._document())
        except OSError as exc:
            self._say(f"probe: cannot write the record anywhere ({exc.strerror or exc})")
            return None
        self._say(f"probe: the record is in {rescue} (not in {self.path})")
        return Path(rescue)


def evidence_passes(record: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    """The passes of a probe record as evidence.json carries them: everything but the per-request
    lines, with the body hashes in the order sent, and the record they came from."""
    out = []
    for p in record["passes"]:
        summary = {k: v for k, v in p.items() if k != "requests"}
        if summary.get("body_sha256") is None:  # records of older probes have them per request
            summary["body_sha256"] = [r["sha256"] for r in p.get("requests", ())]
        summary["record"] = source
        out.append(summary)
    return out


def record_path(given: Path) -> Path:
    """`--probe-record` names a probe.json or the folder (a probe's --out) that holds one."""
    return given / RECORD_FILE if given.is_dir() else given


def read_passes(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The passes of every record, each phase once (RecordError on a file that is missing or
    malformed, or on two records that disagree about one phase)."""
    passes: dict[str, dict[str, Any]] = {}
    for given in paths:
        path = record_path(given)
        try:
            doc = jsonfile.read(path, f"probe record {path}")
            check_record(doc)
        except jsonfile.JsonInputError as exc:
            raise RecordError(str(exc)) from None
        except SchemaError as exc:
            raise RecordError(f"probe record {path}: {exc}") from None
        for p in evidence_passes(doc, str(path)):
            seen = passes.get(p["phase"])
            if seen is not None and _fingerprint(seen) != _fingerprint(p):
                raise RecordError(f"probe records {seen['record']} and {path} disagree about "
                                  f"phase {p['phase']}: which one ran it?")
            passes.setdefault(p["phase"], p)
    return list(passes.values())


def _fingerprint(p: Mapping[str, Any]) -> str:
    what = [p["phase"], p["sent"], p["failed"], p["sequence_sha256"]]
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()
