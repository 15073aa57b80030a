"""The restore state file's JSON: `encode` and a forward-compatible `decode`.

Format 1 only ever gains fields: a reader defaults a field it does not find (a file written by
an earlier release loads with its window, start and incumbent intact). A file written by a newer
release (a field, or a value of a known field, this release does not know) loads too
(`decode_report`): an unknown field is kept and written back unchanged (`encode(state,
extra)`), an unknown or ill-typed value is replaced by what says least (an unknown phase by the
one the window implies, a cause by `event`, an outcome by `unobserved`, any other value by its
default) and reported in `problems`, and never costs the open window: only a window without a
usable start is lost (nothing can be kept without it). A file that is not a JSON object with a
`state` object is an error: the store moves it aside.
A number JSON allows but this release cannot carry (NaN, Infinity, a float past the double's
range, an integer of more than MAX_INT_DIGITS digits) is read as `Unusable`: in a known field it
is an ill-typed value, in an unknown one the field is dropped and reported, so what is written
back can always be encoded (the encoder refuses non-finite numbers).
What one sidecar process watched is not written, and is not assumed at load: the fields marked
process-only in exporter/restore/model.py (`window.restarted`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from exporter.checked import count as _count
from exporter.checked import number as _number
from exporter.checked import obj as _obj
from exporter.checked import opt_count as _opt_count
from exporter.checked import opt_str as _opt_str
from exporter.labels import IDENTITY_FIELDS
from exporter.restore.model import (
    CAUSES,
    EVENT_KINDS,
    OUTCOMES,
    PHASES,
    Engine,
    LastWindow,
    RestoreState,
    Window,
    process_only,
)
from exporter.restore.window import restarted

T = TypeVar("T")

FORMAT_VERSION = 1
MAX_INT_DIGITS = 1000  # far below the 4,300 Python converts (a longer one raises ValueError)
_STATE_KEYS = frozenset(f.name for f in fields(RestoreState))
_WINDOW_KEYS = frozenset(f.name for f in fields(Window)) | {"went_away"}


@dataclass(frozen=True, slots=True)
class Extra:
    """Fields of a newer release, kept to be written back: the state's, and the open window's
    (while it is the same window: the same start)."""

    state: dict[str, Any] = field(default_factory=dict)
    window: dict[str, Any] = field(default_factory=dict)
    window_start: float | None = None


@dataclass(frozen=True, slots=True)
class Decoded:
    state: RestoreState
    problems: tuple[str, ...] = ()  # what was not understood, and what was used instead
    extra: Extra = field(default_factory=Extra)


class Unusable:
    """A JSON number this release cannot carry, as read (`text`)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text[:20] + ("..." if len(text) > 20 else "")

    def __repr__(self) -> str:
        return f"unusable number {self.text}"


def _float(text: str) -> float | Unusable:
    value = float(text)
    return value if math.isfinite(value) else Unusable(text)


def _int(text: str) -> int | Unusable:
    return Unusable(text) if len(text.lstrip("-")) > MAX_INT_DIGITS else int(text)


def _loads(data: bytes) -> Any:
    return json.loads(data, parse_constant=Unusable, parse_float=_float, parse_int=_int)


def _usable(value: Any) -> bool:
    """Whether `value` holds no Unusable anywhere (walked without recursion)."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, Unusable):
            return False
        if isinstance(v, dict):
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
    return True


def _kept(r: _Reader, raw: dict[str, Any], known: frozenset[str], where: str) -> dict[str, Any]:
    """The unknown fields of `raw` to write back: one holding a number this release cannot carry
    is dropped and reported."""
    out = {}
    for k, v in raw.items():
        if k in known:
            continue
        if _usable(v):
            out[k] = v
        else:
            r.problems.append(f"{where}{k}: a number that cannot be kept (NaN, Infinity or over "
                              f"{MAX_INT_DIGITS} digits); dropped")
    return out


def encode(state: RestoreState, extra: Extra | None = None) -> bytes:
    """The file's bytes; ValueError (or TypeError, RecursionError) when `extra` cannot be
    encoded (the store reports it as a write error)."""
    raw = asdict(state)
    for key in process_only(RestoreState):
        raw.pop(key)
    if raw["window"] is not None:
        for key in process_only(Window):
            raw["window"].pop(key)
    if extra is not None:
        raw = {**extra.state, **raw}
        window = state.window
        if raw["window"] is not None and window is not None and window.start == extra.window_start:
            raw["window"] = {**extra.window, **raw["window"]}
    doc = {"format": FORMAT_VERSION, "state": raw}
    return json.dumps(doc, sort_keys=True, allow_nan=False).encode()


class _Reader:
    """Reads one field at a time; a value it cannot use becomes the default and a problem."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def get(self, read: Callable[[], T], default: T, what: str) -> T:
        try:
            return read()
        except (ValueError, KeyError, TypeError) as exc:
            self.problems.append(f"{exc if str(exc).startswith(what) else f'{what}: {exc}'}; "
                                 f"read as {default!r}")
            return default


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


def _engine(r: _Reader, raw: Any, what: str) -> Engine | None:
    if raw is None:
        return None
    e = r.get(lambda: _obj(raw, what), None, what)
    if e is None:
        return None
    generation = e.get("generation")
    if not isinstance(generation, str):
        r.problems.append(f"{what}.generation: expected a string; {what} read as None")
        return None
    def text_of(key: str) -> str | None:
        return r.get(lambda: _opt_str(e.get(key), f"{what}.{key}"), None, f"{what}.{key}")

    text = {k: text_of(k) for k in IDENTITY_FIELDS}
    started = r.get(lambda: _opt_number(e.get("started_at"), f"{what}.started_at"), None,
                    f"{what}.started_at")
    return Engine(generation, text["image_digest"], text["container_id"], text["package"],
                  text["checkpoint"], started)


def _window(r: _Reader, w: dict[str, Any], phase: str | None) -> Window:
    """`w`'s window; ValueError only without a usable start (the one thing it cannot lack)."""
    def flag(key: str, default: bool) -> bool:
        return r.get(lambda: _flag(w.get(key, default), f"window.{key}"), default,
                     f"window.{key}")

    def opt(read: Callable[[Any, str], T], key: str) -> T | None:
        return r.get(lambda: read(w.get(key), f"window.{key}"), None, f"window.{key}")

    return Window(
        start=_number(w.get("start"), "window.start"),
        cause=r.get(lambda: _choice(w.get("cause"), CAUSES, "window.cause"), "event",
                    "window.cause"),
        incumbent=_engine(r, w.get("incumbent"), "window.incumbent"),
        last_inflight=opt(_opt_count, "last_inflight"),
        drained=flag("drained", False),
        seen_not_open=flag("seen_not_open", False),
        restored=_engine(r, w.get("restored"), "window.restored"),
        preflight=_some_flags(r, w.get("preflight"), "window.preflight"),
        restore_started=flag("restore_started", False),
        # 0.1.0 wrote `went_away` (the engine was unreachable in this window).
        incumbent_gone=r.get(lambda: _flag(w.get("incumbent_gone", w.get("went_away", False)),
                                           "window.incumbent_gone"), False,
                             "window.incumbent_gone"),
        lost=opt(_opt_count, "lost"),
        lost_at_cutoff=flag("lost_at_cutoff", False),
        reference=_engine(r, w.get("reference"), "window.reference"),
        start_exact=flag("start_exact", True),
        last_unrestored=opt(_opt_number, "last_unrestored"),
        # 0.1.0 did not write it: a window last seen down is unreachable until a poll says not.
        unreachable=flag("unreachable", phase == "down"),
    )


def _last_window(r: _Reader, raw: Any, what: str) -> LastWindow | None:
    if raw is None:
        return None
    lw = r.get(lambda: _obj(raw, what), None, what)
    if lw is None:
        return None
    end = r.get(lambda: _number(lw.get("end"), f"{what}.end"), None, f"{what}.end")
    if end is None:
        return None  # reported: without its end it proves nothing

    def opt(read: Callable[[Any, str], T], key: str) -> T | None:
        return r.get(lambda: read(lw.get(key), f"{what}.{key}"), None, f"{what}.{key}")

    def flag(key: str, default: bool) -> bool:
        return r.get(lambda: _flag(lw.get(key, default), f"{what}.{key}"), default,
                     f"{what}.{key}")

    cause = lw.get("cause")
    return LastWindow(
        start=opt(_opt_number, "start"),
        end=end,
        cause=None if cause is None else r.get(
            lambda: _choice(cause, CAUSES, f"{what}.cause"), None, f"{what}.cause"),
        outcome=r.get(lambda: _choice(lw.get("outcome"), OUTCOMES, f"{what}.outcome"),
                      "unobserved", f"{what}.outcome"),
        not_before=opt(_opt_number, "not_before"),
        # An unknown start_exact claims nothing: the start may have been earlier.
        start_exact=flag("start_exact", True),
        lost=opt(_opt_count, "lost"),
        incumbent=_engine(r, lw.get("incumbent"), f"{what}.incumbent"),
        reference=_engine(r, lw.get("reference"), f"{what}.reference"),
        restored=_engine(r, lw.get("restored"), f"{what}.restored"),
        nothing_restored=flag("nothing_restored", False),
    )


def _phase_of(window: Window | None) -> str:
    """The phase an unknown one is read as: what the window says least about."""
    if window is None:
        return "serving"
    return "down" if window.unreachable else "restoring" if window.restore_started else "draining"


def decode(data: bytes) -> RestoreState:
    """The state in `data` (`decode_report` without what it could not read)."""
    return decode_report(data).state


def decode_report(data: bytes) -> Decoded:
    """The state in `data`, what was not understood, and the unknown fields to keep;
    ValueError when `data` is not a state file at all."""
    doc = _loads(data)
    if not isinstance(doc, dict):
        raise ValueError("not a state file: expected a JSON object")
    r = _Reader()
    fmt = doc.get("format")
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < FORMAT_VERSION:
        raise ValueError(f"unknown state file format {fmt!r}")
    if fmt > FORMAT_VERSION:
        r.problems.append(f"format {fmt} (a newer release): read as format {FORMAT_VERSION}")
    raw = _obj(doc.get("state"), "state")
    raw_phase = raw.get("phase", "serving")
    phase = raw_phase if raw_phase in PHASES else None
    window = None
    extra = Extra(state=_kept(r, raw, _STATE_KEYS, ""))
    if raw.get("window") is not None:
        w = _obj(raw["window"], "window") if isinstance(raw["window"], dict) else None
        try:
            if w is None:
                raise ValueError("window: expected an object")
            window = _window(r, w, phase)
        except ValueError as exc:
            r.problems.append(f"{exc}: the window cannot be kept without its start")
        else:
            extra = Extra(extra.state, _kept(r, w, _WINDOW_KEYS, "window."), window.start)
    if phase is None or (window is None) != (phase == "serving"):
        r.problems.append(f"phase: {raw_phase!r} does not fit; read as {_phase_of(window)!r}")
        phase = _phase_of(window)
    event_ids = _event_ids(r, raw.get("event_ids"))
    event_kinds = _event_kinds(r, raw.get("event_kinds"), event_ids)
    state = restarted(RestoreState(
        phase=phase,  # type: ignore[arg-type]
        window=window,
        last_seen=_engine(r, raw.get("last_seen"), "last_seen"),
        # Written by earlier files (and forgotten by `restarted`): still type-checked.
        last_inflight=r.get(lambda: _opt_count(raw.get("last_inflight"), "last_inflight"), None,
                            "last_inflight"),
        checks=_some_flags(r, raw.get("checks"), "checks"),
        last_window=_last_window(r, raw.get("last_window"), "last_window"),
        event_ids=event_ids,
        event_kinds=event_kinds,
        judged=_last_window(r, raw.get("judged"), "judged"),
        reference=_engine(r, raw.get("reference"), "reference"),
        unplanned_restarts=r.get(lambda: _count(raw.get("unplanned_restarts", 0),
                                                "unplanned_restarts"), 0, "unplanned_restarts"),
        last_unplanned_restart=r.get(lambda: _opt_number(raw.get("last_unplanned_restart"),
                                                         "last_unplanned_restart"), None,
                                     "last_unplanned_restart"),
        outage_aborted=r.get(lambda: _flag(raw.get("outage_aborted", False), "outage_aborted"),
                             False, "outage_aborted"),
    ))
    problems = tuple(r.problems) + tuple(f"{k}: unknown field, kept" for k in extra.state) + \
        tuple(f"window.{k}: unknown field, kept" for k in extra.window)
    return Decoded(state, problems, extra)


def _event_ids(r: _Reader, raw: Any) -> tuple[str, ...]:
    """Every id that is a string (one that is not is reported, not the others lost)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        r.problems.append("event_ids: expected a list of strings; read as ()")
        return ()
    ids = tuple(i for i in raw if isinstance(i, str))
    if len(ids) != len(raw):
        r.problems.append(f"event_ids: {len(raw) - len(ids)} not a string; left out")
    return ids


def _event_kinds(r: _Reader, raw: Any, ids: tuple[str, ...]) -> dict[str, str]:
    """id -> event kind, for the ids kept (one that is not a kind is reported and left out)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        r.problems.append("event_kinds: expected an object; read as {}")
        return {}
    kept = set(ids)
    out = {k: v for k, v in raw.items() if k in kept and v in EVENT_KINDS}
    bad = [k for k, v in raw.items() if k in kept and v not in EVENT_KINDS]
    if bad:
        r.problems.append(f"event_kinds: {len(bad)} not an event kind; left out")
    return out


def _some_flags(r: _Reader, raw: Any, what: str) -> dict[str, bool]:
    """Every name -> true/false (one that is not is reported, not the others lost)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        r.problems.append(f"{what}: expected an object; read as {{}}")
        return {}
    out = {str(k): v for k, v in raw.items() if isinstance(v, bool)}
    for k in raw:
        if str(k) not in out:
            r.problems.append(f"{what}.{k}: expected true or false; left out")
    return out
