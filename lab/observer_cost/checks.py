"""Is a repetition valid? The observer-cost protocol's conditions, each evaluated and named;
pure functions of the records run.py wrote.

| check | holds when |
| --- | --- |
| `switch` | the observer's --on/--off command exited 0 before the repetition |
| `switch_verified` | `--witness` showed the observer on or off, as the arm asks, at both edges |
| `bracketed` | the sidecar took both phase edges |
| `phase_valid` | the sidecar found the phase valid (one generation, no counter went back) |
| `failed_requests` | every request was answered 200 with a completion |
| `output_length` | every completion has exactly the fixture's length (`usage.completion_tokens`) |
| `dropped_requests` | the engine finished exactly the requests sent (its latency histogram's count) |
| `ranks` | the snapshot lists every rank (`--ranks`), the same ranks and GPUs as the run began with |
| `incarnation` | the engine's generation, start time and container are those the run began with |
| `clock_anchors` | no clock stepped (below) |

Clock anchors: at both edges the client reads its wall and monotonic clocks around the sidecar's
capture (whose `at` is the sidecar's clock) and around a GET of the engine's snapshot (its `clock`
object, else the HTTP `Date` header, whole seconds). A repetition is invalid when the client's
wall clock moved against its monotonic clock, the sidecar's or the engine's clock moved against
the client's monotonic clock between the edges, or the engine's wall clock moved against its own
process clock, by more than the tolerance.

A check that could not be evaluated (the engine sends no clock, a capture is missing) is `None`,
never a pass: a repetition is valid only when every check holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lab.observer_cost.witness import judge

DEFAULT_CLOCK_TOLERANCE = 0.25  # seconds a clock may move against another within a repetition
DATE_RESOLUTION = 1.0  # an HTTP Date header counts whole seconds


def _check(name: str, ok: bool | None, detail: str = "") -> dict[str, Any]:
    return {"check": name, "ok": ok, "detail": detail}


def valid(checks: Sequence[Mapping[str, Any]]) -> bool:
    return bool(checks) and all(c["ok"] is True for c in checks)


def failing(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each check that does not hold, as `name: detail` (unevaluated ones say so)."""
    return [f"{c['check']}: {c['detail'] or ('not evaluated' if c['ok'] is None else 'failed')}"
            for c in checks if c["ok"] is not True]


def reference(steps: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The engine as the run's first step (the first warm-up) saw it at its begin edge: what
    every edge must match. From the warm-up on, not the first repetition: an engine restarted
    after its warm-up has lost what the warm-up warmed."""
    for step in steps:
        begin = step.get("begin")
        if begin is None:
            continue
        engine = begin.get("engine") or {}
        if engine.get("generation") is None:
            return None
        return {k: engine.get(k) for k in ("generation", "started_at", "container_id", "ranks")}
    return None


def checks(step: Mapping[str, Any], ref: Mapping[str, Any] | None, output_tokens: int,
           ranks: int | None = None,
           tolerance: float = DEFAULT_CLOCK_TOLERANCE) -> list[dict[str, Any]]:
    """Every check of one step (warm-up or repetition), in the order of the module's table."""
    sw = step.get("switch")
    begin, end, load = step.get("begin"), step.get("end"), step.get("load")
    if sw is None:  # the run stopped before this step: nothing of it was checked
        out = [_check("switch", None, "not run"), _check("switch_verified", None, "not run")]
    else:
        out = [_check("switch", sw.get("error") is None,
                      "" if sw.get("error") is None else f"--{sw['arm']} {sw['error']}")]
        if sw.get("error") is not None:
            out.append(_check("switch_verified", None, "the switch command failed"))
        else:
            out.append(_check("switch_verified", *judge(step.get("witness"), step.get("arm")
                                                        or "off")))
    if begin is None or load is None:
        return [*out, _check("bracketed", False, step.get("stopped") or "not run")]
    problems = [f"{e['action']}: {e['error']}" for e in (begin, end) if e and e.get("error")]
    if end is None:
        problems.append("end: not reached")
    out.append(_check("bracketed", not problems, "; ".join(problems)))
    phase = (end or {}).get("phase")
    if phase is None:
        out.append(_check("phase_valid", None, "the sidecar's end answer has no phase"))
    else:
        reasons = phase.get("invalid_reasons")
        out.append(_check("phase_valid", phase.get("valid") is True,
                          "; ".join(map(str, reasons)) if isinstance(reasons, list) else ""))
    requests = load["requests"]
    out += [_failed(requests), _length(requests, output_tokens), _dropped(requests, phase),
            _ranks(begin, end, ref, ranks), _incarnation(begin, end, ref),
            _clocks(begin, end, tolerance)]
    return out


def _failed(requests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    bad = [r for r in requests if not r.get("ok")]
    if not bad:
        return _check("failed_requests", True)
    first = bad[0]
    return _check("failed_requests", False,
                  f"{len(bad)} of {len(requests)} requests failed (the first, request "
                  f"{first['position'] + 1}: {first.get('error')})")


def _length(requests: Sequence[Mapping[str, Any]], expected: int) -> dict[str, Any]:
    answered = [r for r in requests if r.get("ok")]
    unknown = [r for r in answered if r.get("completion_tokens") is None]
    wrong = [r for r in answered
             if r.get("completion_tokens") is not None and r["completion_tokens"] != expected]
    parts = []
    if wrong:
        lengths = sorted({r["completion_tokens"] for r in wrong})
        parts.append(f"{len(wrong)} of {len(answered)} outputs were not {expected} tokens long "
                     f"({', '.join(map(str, lengths[:5]))} tokens; the first, request "
                     f"{wrong[0]['position'] + 1})")
    if unknown:
        parts.append(f"{len(unknown)} answers had no usage.completion_tokens: length unknown")
    return _check("output_length", not parts, "; ".join(parts))


def _dropped(requests: Sequence[Mapping[str, Any]],
             phase: Mapping[str, Any] | None) -> dict[str, Any]:
    if phase is not None and phase.get("valid") is not True:
        return _check("dropped_requests", None,
                      "the phase is invalid (phase_valid), so its finished-request count is not "
                      "the engine's")
    deltas = (phase or {}).get("deltas")
    finished = deltas.get("requests") if isinstance(deltas, dict) else None
    if isinstance(finished, bool) or not isinstance(finished, int | float):
        finished = None
    if finished is None:
        return _check("dropped_requests", None,
                      "the engine's finished-request count is unknown (no latency histogram in "
                      "the phase's captures)")
    sent = len(requests)
    hist = deltas.get("e2e_latency_seconds") if isinstance(deltas, dict) else None
    counted = hist.get("count") if isinstance(hist, dict) else None
    if counted is not None and counted != finished:
        return _check("dropped_requests", False,
                      f"the engine's latency histogram counts {counted!r} requests but its "
                      f"finished-request count is {finished:g}: the phase's captures disagree")
    if finished == sent:
        return _check("dropped_requests", True)
    if finished < sent:
        return _check("dropped_requests", False,
                      f"the engine finished {finished:g} of the {sent} requests sent: "
                      f"{sent - finished:g} dropped")
    return _check("dropped_requests", False,
                  f"the engine finished {finished:g} requests but {sent} were sent: other "
                  "traffic reached the engine during the repetition")


def _ranks(begin: Mapping[str, Any], end: Mapping[str, Any] | None,
           ref: Mapping[str, Any] | None, expected: int | None) -> dict[str, Any]:
    problems = []
    want = None if ref is None else ref.get("ranks")
    for e in (begin, end):
        if e is None:
            continue
        listed = (e.get("engine") or {}).get("ranks")
        where = f"at the {e['action']} edge"
        if listed is None:
            problems.append(f"no ranks in the snapshot {where}")
        elif expected is not None and len(listed) != expected:
            problems.append(f"{len(listed)} of {expected} ranks listed {where}")
        elif want is not None and listed != want:
            problems.append(f"ranks {where} ({_ranks_text(listed)}) differ from those "
                            f"the run began with ({_ranks_text(want)})")
        elif not listed:
            problems.append(f"the snapshot lists no rank {where}")
    if problems:
        return _check("ranks", False, "; ".join(problems))
    if want is None:
        return _check("ranks", None, "the ranks the run began with are unknown")
    return _check("ranks", True, f"{len(want)} ranks at both edges")


def _ranks_text(ranks: Sequence[Sequence[Any]]) -> str:
    return ", ".join(f"{r}:{u}" for r, u in ranks) or "none"


def _incarnation(begin: Mapping[str, Any], end: Mapping[str, Any] | None,
                 ref: Mapping[str, Any] | None) -> dict[str, Any]:
    if ref is None:
        return _check("incarnation", None, "the engine the run began with is unknown")
    problems = []
    for e in (begin, end):
        if e is None:
            continue
        engine = e.get("engine") or {}
        where = f"at the {e['action']} edge"
        if engine.get("error"):
            problems.append(f"the engine snapshot {where}: {engine['error']}")
            continue
        for key in ("generation", "started_at", "container_id"):
            if engine.get(key) != ref.get(key):
                problems.append(f"{key} {where} is {engine.get(key)!r}, not "
                                f"{ref.get(key)!r} as when the run began")
        captured = e.get("capture_generation")
        if captured is not None and captured != ref.get("generation"):
            problems.append(f"the sidecar's capture {where} is of generation {captured}")
    if problems:
        return _check("incarnation", False, "the engine restarted: " + "; ".join(problems))
    return _check("incarnation", True)


# -- clocks ---------------------------------------------------------------------------------------
def offsets(edge: Mapping[str, Any]) -> dict[str, tuple[float, float] | None]:
    """Each clock's offset from the client's monotonic clock at an edge, as an interval (the
    reading lies somewhere between the client's readings around it)."""
    out: dict[str, tuple[float, float] | None] = {"sidecar": None, "engine": None}
    at = edge.get("capture_at")
    if at is not None:
        out["sidecar"] = (at - edge["client_after"]["monotonic"],
                          at - edge["client_before"]["monotonic"])
    engine = edge.get("engine") or {}
    before, after = engine.get("client_before"), engine.get("client_after")
    clock = engine.get("clock") or {}
    if before and after:
        if clock.get("unix_seconds") is not None:
            u = clock["unix_seconds"]
            out["engine"] = (u - after["monotonic"], u - before["monotonic"])
        elif engine.get("date") is not None:
            d = engine["date"]
            out["engine"] = (d - after["monotonic"], d + DATE_RESOLUTION - before["monotonic"])
    return out


def _moved(a: tuple[float, float], b: tuple[float, float]) -> float:
    """How far apart two offset intervals are at least (0 when they overlap)."""
    return max(0.0, max(a[0], b[0]) - min(a[1], b[1]))


def _clocks(begin: Mapping[str, Any], end: Mapping[str, Any] | None,
            tolerance: float) -> dict[str, Any]:
    if end is None:
        return _check("clock_anchors", None, "no end edge")
    problems, unknown = [], []
    wall = end["client_after"]["wall"] - begin["client_before"]["wall"]
    mono = end["client_after"]["monotonic"] - begin["client_before"]["monotonic"]
    if abs(wall - mono) > tolerance:
        problems.append(f"the client's wall clock moved {wall - mono:+.3f} s against its "
                        "monotonic clock")
    a, b = offsets(begin), offsets(end)
    for who in ("sidecar", "engine"):
        x, y = a[who], b[who]
        if x is None or y is None:
            unknown.append(f"no {who} clock at {'the begin' if x is None else 'the end'} edge")
        elif (moved := _moved(x, y)) > tolerance:
            sign = "+" if (y[0] + y[1]) > (x[0] + x[1]) else "-"
            problems.append(f"the {who}'s clock stepped by at least {sign}{moved:.3f} s against "
                            "the client's between the edges")
    ea, eb = ((e.get("engine") or {}).get("clock") or {} for e in (begin, end))
    if ea.get("monotonic_seconds") is not None and eb.get("monotonic_seconds") is not None:
        drift = ((eb["unix_seconds"] - ea["unix_seconds"])
                 - (eb["monotonic_seconds"] - ea["monotonic_seconds"]))
        if abs(drift) > tolerance:
            problems.append(f"the engine's wall clock moved {drift:+.3f} s against its process "
                            "clock")
    if problems:
        return _check("clock_anchors", False, "; ".join(problems))
    if unknown:
        return _check("clock_anchors", None, "; ".join(unknown))
    return _check("clock_anchors", True)


def engine_minus_sidecar(edge: Mapping[str, Any]) -> float | None:
    """The engine's clock minus the sidecar's at an edge (midpoints of their offset intervals)."""
    o = offsets(edge)
    if o["engine"] is None or o["sidecar"] is None:
        return None
    return sum(o["engine"]) / 2 - sum(o["sidecar"]) / 2
