"""TSDB blocks of a fleet's history for bench/scale/scale.py, made by `promtool tsdb
create-blocks-from openmetrics` from bench/scale/series.py's model.

A store holds the blocks of engine groups (100 engines each by default) under <store>/gNNN/, and
meta.json: the anchor the scenarios are placed around, and how far each group is covered. Groups
are built once and reused: the 100-engine run uses group 0, the 1,000-engine run groups 0-9, and
a later run only backfills what time has added (`extend`). A Prometheus gets a fresh TSDB of hard
links to the blocks (`assemble`), so whatever it compacts or deletes leaves the store intact.

Each OpenMetrics file covers one group and at most one 2 h block range, so promtool writes one
block per file and reads it twice (time bounds, then samples), and no file outgrows the disk (a
100-engine, 2 h file is about 4 GB). The next file is written while promtool reads the current
one; both run under `nice`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.benchlib import PYTHON, ROOT
from bench.scale import series as scale_series

BLOCK_S = 7200  # promtool's (and Prometheus's) smallest block range
NICE = ["nice", "-n", "10"]


@dataclass(frozen=True)
class Piece:
    """One OpenMetrics file: a group's engines over [start, end), some families or all."""

    group: int
    start: float
    end: float
    families: tuple[str, ...] | None


def split(group: int, start: float, end: float,
          families: tuple[str, ...] | None = None) -> Iterator[Piece]:
    """[start, end) cut at block-range boundaries."""
    t = start
    while t < end:
        edge = min(end, (math.floor(t / BLOCK_S) + 1) * BLOCK_S)
        yield Piece(group, t, edge, families)
        t = edge


class Store:
    def __init__(self, path: Path, group_size: int, hours: float, history_hours: float,
                 history_families: Sequence[str], seed: int = 7) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.meta_path = path / "meta.json"
        wanted = {"model": scale_series.fingerprint(), "group_size": group_size, "hours": hours,
                  "history_hours": history_hours, "history_families": sorted(history_families), "seed": seed}
        meta: dict[str, Any] = {}
        if self.meta_path.exists():
            meta = json.loads(self.meta_path.read_text())
            if not _serves(meta, wanted):
                raise SystemExit(f"{path} holds blocks of another model ({meta}); use another "
                                 "--store or delete it")
        else:
            meta = {**wanted, "anchor": time.time(), "groups": {}}
        self.meta = meta
        self._save()

    @property
    def anchor(self) -> float:
        return float(self.meta["anchor"])

    def _save(self) -> None:
        self.meta_path.write_text(json.dumps(self.meta, indent=2) + "\n")

    def group_dir(self, group: int) -> Path:
        return self.path / f"g{group:03d}"

    def covered(self, group: int) -> float | None:
        entry = self.meta["groups"].get(str(group))
        return None if entry is None else float(entry)

    def pieces(self, groups: Sequence[int], until: float) -> list[Piece]:
        """What is missing for `groups` to be covered up to `until`."""
        out: list[Piece] = []
        a, hours = self.anchor, float(self.meta["hours"])
        history = tuple(self.meta["history_families"])
        for g in groups:
            covered = self.covered(g)
            if covered is None:
                begin = a - hours * 3600
                lead = begin - float(self.meta["history_hours"]) * 3600
                if history and lead < begin:
                    out += split(g, lead, begin, history)
                covered = begin
            if until > covered:
                out += split(g, covered, until)
        return out

    def extend(self, groups: Sequence[int], until: float, workdir: Path,
               log: Any = print) -> dict[str, float]:
        """Backfill `groups` up to `until`; returns samples written and seconds spent."""
        pieces = self.pieces(groups, until)
        if not pieces:
            return {"files": 0, "samples": 0, "seconds": 0.0}
        workdir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        samples = 0
        running: tuple[subprocess.Popen[bytes], Path, Piece] | None = None
        for i, piece in enumerate(pieces):
            path = workdir / f"piece-{i % 2}.om"
            samples += self._write(piece, path)
            if running is not None:
                self._finish(*running)
            log(f"  promtool: group {piece.group} {_utc(piece.start)}-{_utc(piece.end)} "
                f"({'history' if piece.families else 'all families'})")
            out = self.group_dir(piece.group)
            out.mkdir(exist_ok=True)
            proc = subprocess.Popen([*NICE, "promtool", "tsdb", "create-blocks-from",
                                     "openmetrics", "-q", str(path), str(out)],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            running = (proc, path, piece)
        if running is not None:
            self._finish(*running)
        return {"files": len(pieces), "samples": samples, "seconds": time.monotonic() - t0}

    def _write(self, piece: Piece, path: Path) -> int:
        size = int(self.meta["group_size"])
        cmd = [*NICE, PYTHON, str(ROOT / "bench" / "scale" / "series.py"), "write", str(path),
               "--engines", str(size), "--first", str(piece.group * size),
               "--anchor", repr(self.anchor), "--seed", str(self.meta["seed"]),
               "--start", repr(piece.start), "--end", repr(piece.end)]
        if piece.families:
            cmd += ["--families", *piece.families]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"scale_series.py write failed:\n{done.stderr[-2000:]}")
        return int(done.stdout.split()[-1])

    def _finish(self, proc: subprocess.Popen[bytes], path: Path, piece: Piece) -> None:
        out, _ = proc.communicate()
        path.unlink(missing_ok=True)
        if proc.returncode != 0:
            raise RuntimeError(f"promtool failed on {piece}:\n{out.decode(errors='replace')[-2000:]}")
        if piece.families is None:
            groups = self.meta["groups"]
            groups[str(piece.group)] = max(float(groups.get(str(piece.group), 0)), piece.end)
            self._save()

    def assemble(self, groups: Sequence[int], tsdb: Path) -> int:
        """A fresh TSDB directory of hard links to the groups' blocks; returns the block count."""
        if tsdb.exists():
            shutil.rmtree(tsdb)
        tsdb.mkdir(parents=True)
        n = 0
        for g in groups:
            for block in sorted(self.group_dir(g).iterdir()):
                if (block / "meta.json").exists():
                    shutil.copytree(block, tsdb / block.name, copy_function=os.link)
                    n += 1
        return n


def _serves(meta: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """A store serves a run when it holds the same model, and history for at least the
    families (and hours) the run's rules and dashboards read further back (a store built for
    other rules may hold history for more families)."""
    same = ("model", "group_size", "hours", "seed")
    return ({k: meta.get(k) for k in same} == {k: wanted[k] for k in same}
            and set(wanted["history_families"]) <= set(meta.get("history_families") or [])
            and float(meta.get("history_hours") or 0) >= float(wanted["history_hours"]))


def _utc(t: float) -> str:
    return time.strftime("%H:%M", time.gmtime(t))
