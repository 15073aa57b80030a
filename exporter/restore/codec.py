"""The restore state file's JSON: `encode` and a strict, forgiving-of-age `decode`.

Format 1 only ever gains fields: a reader defaults a field it does not find (a file written by
an earlier release loads with its window, start and incumbent intact) and ignores fields it
does not know. Anything present but ill-typed is an error: the store moves the file aside.
What one sidecar process watched (failure streaks, whether it saw the restore incomplete, the
in-flight count of its last snapshot) is not written, and is not assumed at load: see
`window.restarted`.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from exporter.checked import count as _count
from exporter.checked import number as _number
from exporter.checked import obj as _obj
from exporter.checked import opt_count as _opt_count
from exporter.checked import opt_str as _opt_str
from exporter.restore.model import CAUSES, OUTCOMES, PHASES, Engine, LastWindow, RestoreState, Window
from exporter.restore.window import restarted

FORMAT_VERSION = 1
_PROCESS_ONLY = ("unreachable_since", "seen_since_start", "last_inflight")


def encode(state: RestoreState) -> bytes:
    raw = asdict(state)
    for key in _PROCESS_ONLY:
        raw.pop(key)
    if raw["window"] is not None:
        raw["window"].pop("watched")
    doc = {"format": FORMAT_VERSION, "state": raw}
    return json.dumps(doc, sort_keys=True, allow_nan=False).encode()


def _opt_number(raw: Any, what: str) -> float | None:
    return None if raw is None else _number(raw, what)


def _flag(raw: Any, what: str) -> bool:
    if not isinstance(raw, bool):
        raise ValueError(f"{what}: expected true or false")
    return raw


def _choice(raw: Any, allowed: tuple[str, ...], what: str) -> Any:
    if raw not in allowed:
        raise ValueError(f"{what}: expected one of {', '.join(allowed)}")
    return raw


def _flags(raw: Any, what: str) -> dict[str, bool]:
    return {str(k): _flag(v, f"{what}.{k}") for k, v in _obj(raw or {}, what).items()}


def _engine(raw: Any, what: str) -> Engine | None:
    if raw is None:
        return None
    e = _obj(raw, what)
    generation = e["generation"]
    if not isinstance(generation, str):
        raise ValueError(f"{what}.generation: expected a string")
    text = {k: _opt_str(e.get(k), f"{what}.{k}")
            for k in ("image_digest", "container_id", "package", "checkpoint")}
    return Engine(generation, text["image_digest"], text["container_id"], text["package"],
                  text["checkpoint"], _opt_number(e.get("started_at"), f"{what}.started_at"))


def _window(raw: Any, phase: str) -> Window:
    w = _obj(raw, "window")
    return Window(
        start=_number(w["start"], "window.start"),
        cause=_choice(w["cause"], CAUSES, "window.cause"),
        incumbent=_engine(w.get("incumbent"), "window.incumbent"),
        last_inflight=_opt_count(w.get("last_inflight"), "window.last_inflight"),
        drained=_flag(w.get("drained", False), "window.drained"),
        seen_not_open=_flag(w.get("seen_not_open", False), "window.seen_not_open"),
        restored=_engine(w.get("restored"), "window.restored"),
        preflight=_flags(w.get("preflight"), "window.preflight"),
        restore_started=_flag(w.get("restore_started", False), "window.restore_started"),
        # 0.1.0 wrote `went_away` (the engine was unreachable in this window).
        incumbent_gone=_flag(w.get("incumbent_gone", w.get("went_away", False)),
                             "window.incumbent_gone"),
        lost=_opt_count(w.get("lost"), "window.lost"),
        lost_at_cutoff=_flag(w.get("lost_at_cutoff", False), "window.lost_at_cutoff"),
        reference=_engine(w.get("reference"), "window.reference"),
        start_exact=_flag(w.get("start_exact", True), "window.start_exact"),
        last_unrestored=_opt_number(w.get("last_unrestored"), "window.last_unrestored"),
        # 0.1.0 did not write it: a window last seen down is unreachable until a poll says not.
        unreachable=_flag(w.get("unreachable", phase == "down"), "window.unreachable"),
    )


def _last_window(raw: Any, what: str) -> LastWindow | None:
    if raw is None:
        return None
    lw = _obj(raw, what)
    cause = lw.get("cause")
    return LastWindow(
        start=_opt_number(lw.get("start"), f"{what}.start"),
        end=_number(lw["end"], f"{what}.end"),
        cause=None if cause is None else _choice(cause, CAUSES, f"{what}.cause"),
        outcome=_choice(lw["outcome"], OUTCOMES, f"{what}.outcome"),
        not_before=_opt_number(lw.get("not_before"), f"{what}.not_before"),
        start_exact=_flag(lw.get("start_exact", True), f"{what}.start_exact"),
        lost=_opt_count(lw.get("lost"), f"{what}.lost"),
        incumbent=_engine(lw.get("incumbent"), f"{what}.incumbent"),
        reference=_engine(lw.get("reference"), f"{what}.reference"),
        restored=_engine(lw.get("restored"), f"{what}.restored"),
        nothing_restored=_flag(lw.get("nothing_restored", False), f"{what}.nothing_restored"),
    )


def decode(data: bytes) -> RestoreState:
    """The state in `data`; ValueError (or KeyError) on anything but a well-typed state file."""
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
        raise ValueError("unknown state file format")
    raw = _obj(doc["state"], "state")
    phase = _choice(raw.get("phase", "serving"), PHASES, "phase")
    window = None if raw.get("window") is None else _window(raw["window"], phase)
    event_ids = raw.get("event_ids") or []
    if not isinstance(event_ids, list) or not all(isinstance(i, str) for i in event_ids):
        raise ValueError("event_ids: expected a list of strings")
    return restarted(RestoreState(
        phase=phase,
        window=window,
        last_seen=_engine(raw.get("last_seen"), "last_seen"),
        # Written by earlier files (and forgotten by `restarted`): still type-checked.
        last_inflight=_opt_count(raw.get("last_inflight"), "last_inflight"),
        checks=_flags(raw.get("checks"), "checks"),
        last_window=_last_window(raw.get("last_window"), "last_window"),
        event_ids=tuple(event_ids),
        judged=_last_window(raw.get("judged"), "judged"),
        reference=_engine(raw.get("reference"), "reference"),
        unplanned_restarts=_count(raw.get("unplanned_restarts", 0), "unplanned_restarts"),
        last_unplanned_restart=_opt_number(raw.get("last_unplanned_restart"),
                                           "last_unplanned_restart"),
        outage_aborted=_flag(raw.get("outage_aborted", False), "outage_aborted"),
    ))
