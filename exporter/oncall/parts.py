"""The record-like parts of the report: checks, pins, geometry rules, sources, engines, the last
window. Each reads its part of `/status` defensively (exporter.oncall.read)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from exporter.labels import SOURCES
from exporter.oncall.model import (
    FAILED,
    UNKNOWN,
    At,
    Block,
    Cell,
    Code,
    Fields,
    Para,
    Since,
    Table,
    Word,
    duration,
)
from exporter.oncall.read import code, field, mapping, number, passed, text
from exporter.restore.window import CHECKS

# Identity fields as /status names them, and as the page says them.
IDENTITY: Final = (("image_digest", "image digest"), ("container_id", "container id"),
                   ("package", "package"), ("checkpoint", "checkpoint"))
IDENTITY_CHECKS: Final = ("image", "container", "package", "checkpoint")
ENGINE_ROLES: Final = (("incumbent", "incumbent"), ("reference", "reference"),
                       ("restored", "restored"))
OUTCOME_WORDS: Final = {"in_time": Word("in_time", "good"), "late": Word("late", "bad"),
                        "aborted": Word("aborted", "warn"), "unobserved": Word("unobserved", "warn")}


@dataclass(frozen=True, slots=True)
class Row:
    """One judged thing: a check, a pin, a geometry rule, a source."""

    name: str
    result: Word
    expected: Cell = ()
    found: Cell = ()
    detail: Cell = ()  # a rule's arithmetic, a source's last error
    cells: tuple[Cell, ...] = ()  # further table cells (sources)

    def why(self) -> Cell:
        if not self.expected and not self.found:
            return ()
        return ("expected", *(self.expected or (UNKNOWN,)), "found", *(self.found or (UNKNOWN,)))

    @property
    def error(self) -> Cell:
        return self.detail


def minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds % 60 == 0 else duration(seconds)


def _ordered(names: list[str], known: tuple[str, ...]) -> list[str]:
    return [n for n in known if n in names] + sorted(n for n in names if n not in known)


# -- checks -------------------------------------------------------------------------------------
def check_rows(restore: Mapping[str, Any]) -> list[Row]:
    checks = mapping(restore.get("checks"))
    reasons: dict[str, Mapping[str, Any]] = {}
    failed = restore.get("failed_checks")
    for item in failed if isinstance(failed, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("check"), str):
            reasons[item["check"]] = item
    rows = []
    order = tuple(dict.fromkeys((*IDENTITY_CHECKS, *CHECKS)))
    for name in _ordered([str(k) for k in {**checks, **reasons}], order):
        reason = reasons.get(name)
        show = code if name in IDENTITY_CHECKS else text
        result = passed(checks.get(name, False if reason is not None else None))
        rows.append(Row(name, result,
                        expected=() if reason is None else (show(reason.get("expected")),),
                        found=() if reason is None else (show(reason.get("found")),)))
    return rows


def checks_blocks(restore: Mapping[str, Any], rows: list[Row]) -> tuple[Block, ...]:
    if not rows:
        return (Para(("No restore has been judged yet: the checks are computed when a window "
                      "closes.",)),)
    blocks: list[Block] = []
    judged = restore.get("checks_window")
    if isinstance(judged, Mapping):
        start, end = number(judged.get("start")), number(judged.get("end"))
        blocks.append(Para(("Checks of the window that started",
                            At(start) if start is not None else UNKNOWN, "and ended",
                            At(end) if end is not None else UNKNOWN, "; outcome",
                            _outcome(judged.get("outcome")))))
    else:
        blocks.append(Para(("Checks of the last window that closed (they stay until the next "
                            "one closes).",)))
    any_reason = "failed_checks" in restore
    blocks.append(Table(
        "Each check compares the restored engine with the one before the restore",
        ("check", "result", "expected", "found"),
        tuple(((Code(r.name),), (r.result,),
               r.expected or (("",) if r.result is not FAILED or any_reason else (UNKNOWN,)),
               r.found or (("",) if r.result is not FAILED or any_reason else (UNKNOWN,)))
              for r in rows)))
    return tuple(blocks)


# -- pins and geometry --------------------------------------------------------------------------
def pin_rows(status: Mapping[str, Any]) -> list[Row]:
    pins = status.get("pins")
    items: list[tuple[str, Mapping[str, Any]]] = []
    if isinstance(pins, list):
        items = [(str(p.get("pin")), p) for p in pins if isinstance(p, Mapping)]
    elif isinstance(pins, Mapping):
        items = [(str(k), mapping(v)) for k, v in pins.items()]
    return [Row(name, passed(p.get("ok")), expected=(_value(p.get("expected")),),
                found=(_value(p.get("found")),)) for name, p in items]


def _value(value: Any) -> Any:
    if isinstance(value, Mapping):  # per GPU, e.g. the power limit of each rank's GPU
        return ", ".join(f"{k}: {'unknown' if v is None else text(v)}"
                         for k, v in value.items()) or UNKNOWN
    return code(value) if isinstance(value, str) else text(value)


def _geometry(status: Mapping[str, Any]) -> Any:
    """`offload_geometry` (None: nothing to check); `...` when this /status has no such field."""
    return status.get("offload_geometry", ...)


def geometry_rows(status: Mapping[str, Any]) -> list[Row]:
    geometry = _geometry(status)
    rules = field(geometry, "rules") if isinstance(geometry, Mapping) else geometry
    if not isinstance(rules, list):
        return []
    return [Row(str(r.get("rule")), passed(r.get("ok")), expected=_records(r, "expected"),
                found=_records(r, "found"), detail=(text(r.get("detail")),))
            for r in rules if isinstance(r, Mapping)]


def _records(rule: Mapping[str, Any], key: str) -> Cell:
    """The layout rule's record bytes by slab kind (`row 163,586,048 B, page 1,048,576 B`, the
    expected ones with the layout's name); () for a rule without them."""
    values = rule.get(key)
    if not isinstance(values, Mapping) or not values:
        return ()
    shown = ", ".join(f"{k} {v:,} B" if isinstance(v, int) and not isinstance(v, bool)
                      else f"{k} unknown" for k, v in values.items())
    layout = rule.get("layout")
    if key == "expected" and isinstance(layout, str):
        return (shown, "by layout", code(layout))
    return (shown,)


def pins_blocks(status: Mapping[str, Any], pins: list[Row], rules: list[Row]) -> tuple[Block, ...]:
    blocks: list[Block] = []
    if "pins" not in status:
        blocks.append(Para((UNKNOWN, "pins: this sidecar's /status does not report them")))
    elif not pins:
        pinned = any(r.expected or r.found for r in rules)  # --expect-layout's rule
        layout = " (the model layout pin, --expect-layout, is shown below)" if pinned else ""
        blocks.append(Para(("No identity pins configured (--expect-image-digest, "
                            "--expect-package, --expect-checkpoint, --expect-ranks, "
                            f"--expect-power-limit-watts){layout}.",)))
    else:
        blocks.append(Table("Pins: what this run was set up with, against the engine polled",
                            ("pin", "result", "expected", "found"),
                            tuple(((Code(p.name),), (p.result,), p.expected, p.found)
                                  for p in pins)))
    geometry = _geometry(status)
    if geometry is ...:
        blocks.append(Para((UNKNOWN, "offload geometry: this sidecar's /status does not report "
                                     "it")))
    elif not rules:
        blocks.append(Para((UNKNOWN, "offload geometry: the snapshot carries no offload "
                                     "figures to check")))
    elif any(r.expected or r.found for r in rules):  # --expect-layout: the records beside
        blocks.append(Table("Offload geometry: does the snapshot's byte arithmetic hold, and "
                            "are its records the pinned layout's?",
                            ("rule", "result", "expected", "found", "arithmetic"),
                            tuple(((Code(r.name),), (r.result,), r.expected, r.found, r.detail)
                                  for r in rules)))
    else:
        blocks.append(Table("Offload geometry: does the snapshot's byte arithmetic hold?",
                            ("rule", "result", "arithmetic"),
                            tuple(((Code(r.name),), (r.result,), r.detail) for r in rules)))
    return tuple(blocks)


# -- sources ------------------------------------------------------------------------------------
def source_rows(status: Mapping[str, Any], now: float) -> list[Row]:
    sources = mapping(status.get("sources"))
    rows = []
    for name in _ordered([str(k) for k in sources], SOURCES):
        health = mapping(sources.get(name))
        result = Word("disabled", "neutral") if health.get("enabled") is False else passed(health.get("up"))
        last = number(health.get("last_success"))
        took = number(health.get("last_duration_seconds"))
        errors = mapping(health.get("errors"))
        total = sum(n for v in errors.values() if (n := number(v)) is not None)
        reason, error = health.get("last_reason"), health.get("last_error")
        detail: Cell = ()
        if result is FAILED or (reason or error):
            detail = tuple(p for p in (code(reason) if reason else None,
                                       text(error) if error else None) if p is not None)
        rows.append(Row(name, result, detail=detail, cells=(
            (At(last),) if last is not None else ("never",),
            (Since(now - last),) if last is not None else ("",),
            (f"{took:.3f} s",) if took is not None else ("",),
            (f"{total:g}",),
        )))
    return rows


def sources_table(rows: list[Row]) -> Table:
    return Table("Every source the sidecar polls, and when it last answered",
                 ("source", "state", "last success", "age", "last poll took", "errors",
                  "last error"),
                 tuple(((Code(r.name),), (r.result,), *r.cells, r.detail or ("",)) for r in rows),
                 empty="unknown: this /status lists no sources")


# -- engines, admission, the last window --------------------------------------------------------
def engines_table(caption: str, holder: Mapping[str, Any],
                  extra: tuple[tuple[str, Any], ...] = ()) -> Table:
    """The engines of a window side by side, one row per field, so that what changed across a
    restore reads along a row. Engines that are the same incarnation share a column
    ("incumbent = reference"); an identity field that differs from the first column says so."""
    engines: list[tuple[list[str], Mapping[str, Any]]] = []
    found = [(label, holder.get(key)) for key, label in ENGINE_ROLES] + list(extra)
    for label, engine in found:
        if not isinstance(engine, Mapping):
            continue
        same = next((labels for labels, seen in engines if dict(seen) == dict(engine)), None)
        if same is not None:
            same.append(label)
        else:
            engines.append(([label], engine))
    rows: list[tuple[Cell, ...]] = []
    for key, label in (("generation", "generation"), *IDENTITY):
        values = [engine.get(key) for _, engine in engines]
        rows.append(((label,), *(
            # A new generation is what a restore should bring: only identity changes are marked.
            (code(value), Word("differs", "warn")) if i and key != "generation"
            and value != values[0] else (code(value),)
            for i, value in enumerate(values))))
    return Table(caption, ("identity", *(" = ".join(labels) for labels, _ in engines)),
                 tuple(rows) if engines else (), empty="not known yet")


def admission_cell(admission: Mapping[str, Any]) -> Cell:
    inflight = admission.get("inflight_requests")
    age = number(admission.get("age_seconds"))
    return (code(admission.get("state")), ",", text(inflight), "in flight",
            *(("; seen", Since(age)) if age is not None else ()))


def _outcome(value: Any) -> Word:
    return OUTCOME_WORDS.get(value, UNKNOWN) if isinstance(value, str) else UNKNOWN


def last_window_blocks(restore: Mapping[str, Any]) -> tuple[Block, ...]:
    last = restore.get("last_window")
    verified = (("last verified", restore.get("last_verified_engine")),)
    if not isinstance(last, Mapping):
        return (Para(("No window has ended yet (as far as the state file remembers).",)),)
    start, end = number(last.get("start")), number(last.get("end"))
    rows: list[tuple[str, Cell]] = [
        ("outcome", (_outcome(last.get("outcome")),)),
        ("cause", (code(last.get("cause")),)),
        ("start", (At(start),) if start is not None else (UNKNOWN, "(nobody watched it open)")),
        ("end", (At(end),) if end is not None else (UNKNOWN,)),
    ]
    took = number(last.get("duration_seconds"))
    if took is None and start is not None and end is not None:
        took = end - start
    if took is not None:
        rows.append(("duration", (duration(took),)))
    evidence = last.get("evidence")
    if isinstance(evidence, Mapping):
        before, after = number(evidence.get("not_before")), number(evidence.get("not_after"))
        if before is not None and before == after:
            rows.append(("restore completed", (At(after), "(seen by the sidecar)")))
        else:
            rows.append(("restore completed", (
                "after", At(before) if before is not None else UNKNOWN,
                "and by", At(after) if after is not None else UNKNOWN)))
    if "lost_requests" in last:
        rows.append(("lost requests", (text(last.get("lost_requests")),)))
    reason = last.get("reason")
    if last.get("nothing_restored") is True or isinstance(reason, str):
        # No check was judged at this close: the checks shown belong to an earlier window.
        rows.append(("checks", (Word("not judged", "neutral"), text(reason))))
    return (Fields(tuple(rows)), engines_table("Engines of the last window", last, verified))

