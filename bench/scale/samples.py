"""The scale benchmark's samples at one instant (bench/scale/series.py): what each series of an
engine of bench/scale/fleet.py reads at time t, as a sidecar's would. A pure function of (engine,
time); `Plans` keeps each engine's fixed samples while its state lasts."""

from __future__ import annotations

import math
import sys
import zlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: `bench` importable
from bench.scale.fleet import (
    FIXED_WORDS,
    GROWTH_REFERENCE_S,
    POLL_INTERVAL,
    REQUEST_CUTOFF,
    RESTORE_BOUND,
    WINDOW_ONLY,
    Engine,
    Template,
    Window,
    templates,
)


def _num(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


@dataclass(frozen=True, slots=True)
class _State:
    phase: str
    window: Window | None  # open at t
    last: Window | None  # closed before t
    gpu1_up: bool
    generation: tuple[float, str]
    events: tuple[tuple[str, str, int], ...]
    unplanned: int  # generation changes outside a window so far

    @property
    def engine_up(self) -> bool:
        return self.phase != "down"


def _state(e: Engine, t: float) -> _State:
    w = e.window
    open_w = last = None
    phase = "serving"
    if w is not None and t >= w.start:
        if w.duration is None or t < w.start + w.duration:
            open_w, phase = w, w.phase(t)
        else:
            last = w
    if last is None and e.past_window is not None:
        last = Window(e.sidecar_start, e.past_window)  # closed before the time range
    gpu1 = e.gpu_lost_at is None or t < e.gpu_lost_at
    back = None if w is None else w.back
    unplanned = sum(1 for start, _ in e.generations[1:] if start <= t and start != back)
    return _State(phase, open_w, last, gpu1, e.generation(t), _events(e, t), unplanned)


# Kinds of the samples whose value changes from scrape to scrape (the rest is fixed per state).
_GROW, _SWING, _NOW, _DOWN_ERRORS = range(4)
Dynamic = tuple[str, int, float, float, bool]  # series, kind, a, b, integral


def _plan(e: Engine, st: _State, families: frozenset[str] | None
          ) -> tuple[list[str], list[Dynamic]]:
    """Engine `e` in state `st`: the fixed samples as "series value", and the changing ones."""
    fixed: list[str] = []
    dynamic: list[Dynamic] = []
    gen_start, gen = st.generation
    base = e.labels
    phase = (e.index % 97) / 97 * 2 * math.pi
    for tpl in templates():
        if families is not None and tpl.family not in families:
            continue
        labels = base + (f',generation="{gen}"' if tpl.generation else "")
        for k, v in tpl.labels:
            labels += f',{k}="{e.uuids[int(tpl.gpu or 0)] if k == "uuid" else v}"'
        series = f"{tpl.name}{{{labels}}}"
        got = _value(e, tpl, st, gen_start, phase)
        if got is None:
            continue
        if isinstance(got, tuple):
            dynamic.append((series, *got))
        else:
            fixed.append(f"{series} {_num(got)}")
    if families is None or "up" in families:
        n = len(fixed) + len(dynamic)
        fixed += [f"up{{{base}}} 1", f"scrape_samples_scraped{{{base}}} {n}",
                  f"scrape_samples_post_metric_relabeling{{{base}}} {n}",
                  f"scrape_series_added{{{base}}} 0"]
        dynamic.append((f"scrape_duration_seconds{{{base}}}", _SWING, 0.003, phase, False))
    return fixed, dynamic


def _value(e: Engine, tpl: Template, st: _State, gen_start: float,
           phase: float) -> float | tuple[int, float, float, bool] | None:
    """A fixed value, (kind, a, b, integral) for a changing one, or None: not exported."""
    name, golden = tpl.name, tpl.value
    integral = golden == int(golden)
    if tpl.family.startswith("helios_restore_"):
        return _restore_value(tpl, st)
    if tpl.gpu == "1" and not st.gpu1_up:
        return 0.0 if name == "helios_gpu_up" else (1.0 if name == "helios_gpu_rank_info" else None)
    labels = dict(tpl.labels)
    engine_source = labels.get("source", "").startswith("engine")
    if name == "helios_engine_up" or (name == "helios_exporter_source_up" and engine_source):
        return 1.0 if st.engine_up else 0.0
    if name == "helios_engine_admission_open":
        return 1.0 if st.phase == "serving" else 0.0
    if name == "helios_engine_unplanned_restarts_total":
        return float(st.unplanned)
    if tpl.cumulative:
        golden = _host_tier_value(e.host_tier, name, labels, golden)
        if (name == "helios_exporter_source_errors_total" and labels.get("reason") == "connect"
                and engine_source and e.window is not None):
            return (_DOWN_ERRORS, 0.0, 0.0, True)
        since = gen_start if tpl.generation else e.sidecar_start
        return (_GROW, golden * e.speed / GROWTH_REFERENCE_S, since, integral)
    if name.endswith("_timestamp_seconds") or name.endswith("start_time_seconds"):
        if name.startswith(("helios_monitoring_generation", "helios_engine_process")):
            return gen_start
        if name == "process_start_time_seconds":
            return e.sidecar_start
        return (_NOW, 0.0, 0.0, False)
    if golden in (0.0, 1.0) or any(w in name for w in FIXED_WORDS):
        return golden
    return (_SWING, golden, phase + zlib.crc32(name.encode()) % 7, integral)


@cache
def _reused_tokens() -> float:
    return next(t.value for t in templates() if t.name == "helios_offload_prompt_tokens_reused_total")


def _host_tier_value(tier: str, name: str, labels: dict[str, str], golden: float) -> float:
    """The golden value of a host-tier counter for an engine of this tier."""
    if name == "helios_offload_host_store_outcomes_total" and labels.get("outcome") in (
            "dropped_full", "failed"):
        return golden if tier == "dropping" else 0.0
    if name == "helios_offload_host_tokens_restored_total" or (
            name == "helios_offload_prompt_tokens_total" and labels.get("source") == "host_restored"):
        return 0.0 if tier == "no_reuse" else _reused_tokens()
    return golden


def _dynamic(e: Engine, kind: int, a: float, b: float, integral: bool, t: float) -> float:
    if kind == _GROW:
        value = a * max(0.0, t - b)
    elif kind == _SWING:
        value = a * (1 + 0.05 * math.sin(t / 600 + b))
    elif kind == _NOW:
        return t - 1.0
    else:
        assert e.window is not None
        return float(math.floor(_down_seconds(e.window, t) / POLL_INTERVAL))
    return math.floor(value) if integral and kind == _GROW else (
        round(value) if integral else value)


def _down_seconds(w: Window, t: float) -> float:
    span = w.duration if w.duration is not None else 2400.0
    lo, hi = w.start + 0.3 * span, w.start + 0.4 * span
    return max(0.0, min(t, hi) - lo)


def _restore_value(tpl: Template, st: _State) -> float | None:
    name = tpl.name
    labels = dict(tpl.labels)
    w = st.window
    if name == "helios_restore_window_open":
        return 1.0 if w else 0.0
    if name == "helios_restore_phase":
        return 1.0 if labels.get("phase") == st.phase else 0.0
    if tpl.family in WINDOW_ONLY:
        if w is None:
            return None
        if name == "helios_restore_window_start_timestamp_seconds":
            return w.start
        if name == "helios_restore_deadline_timestamp_seconds":
            bound = labels.get("bound")
            return w.start + (REQUEST_CUTOFF if bound == "request_cutoff" else RESTORE_BOUND)
        if name == "helios_restore_window_cause":
            return 1.0 if labels.get("cause") == w.cause else 0.0
        return 0.0
    if name.startswith("helios_restore_last_window") or name == "helios_restore_check_ok":
        # Of the last closed window, kept while a later one is open.
        last = st.last
        if last is None or last.duration is None:
            return None
        late = last.duration > RESTORE_BOUND
        if name == "helios_restore_check_ok":
            return 0.0 if late and labels.get("check") == "image" else 1.0
        if name == "helios_restore_last_window_duration_seconds":
            return last.duration
        if name == "helios_restore_last_window_start_timestamp_seconds":
            return last.start
        if name == "helios_restore_last_window_end_timestamp_seconds":
            return last.start + last.duration
        return 1.0 if labels.get("outcome") == ("late" if late else "in_time") else 0.0
    if name == "helios_restore_events_total":
        key = (labels.get("event", ""), labels.get("result", ""))
        return float(sum(n for kind, result, n in st.events if (kind, result) == key))
    return tpl.value if tpl.value in (0.0, 1.0) else 0.0


def _events(e: Engine, t: float) -> tuple[tuple[str, str, int], ...]:
    """Accepted events of the engine's window by t."""
    w = e.window
    if w is None:
        return ()
    span = w.duration if w.duration is not None else 2400.0
    closed = None if w.duration is None else w.start + w.duration
    return tuple((kind, "accepted", 1) for kind, at in (
        ("drain_started", w.start), ("restore_started", w.start + 0.4 * span),
        ("window_closed", closed)) if at is not None and t >= at)


class Plans:
    """`_plan` per (engine, state), computed once: a state lasts many scrapes."""

    def __init__(self, families: frozenset[str] | None = None) -> None:
        self.families = families
        # The latest state's plan per engine: time moves forward, so a state change replaces it.
        self._plans: dict[int, tuple[_State, list[str], list[Dynamic]]] = {}

    def lines(self, e: Engine, t: float, suffix: str) -> list[str]:
        """Engine e's samples at t as lines, each ending in `suffix`."""
        st = _state(e, t)
        cached = self._plans.get(e.index)
        if cached is None or cached[0] != st:
            cached = self._plans[e.index] = (st, *_plan(e, st, self.families))
        _, fixed, dynamic = cached
        out = [f + suffix for f in fixed]
        out += [f"{series} {_num(_dynamic(e, kind, a, b, integral, t))}{suffix}"
                for series, kind, a, b, integral in dynamic]
        return out


def samples(e: Engine, t: float, families: frozenset[str] | None = None) -> list[tuple[str, str]]:
    """(series, value) of engine `e` at time t; series is `name{labels}`."""
    return [tuple(line.rsplit(" ", 1)) for line in Plans(families).lines(e, t, "")]  # type: ignore[misc]
