"""Each of observer-cost's validity checks on written records (what run.py keeps), and
how the document's result refuses to conclude. Pure: the e2e test drives the same through real
processes."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lab.observer_cost.checks import checks, reference
from lab.observer_cost.doc import build

RANKS = [[0, "GPU-a"], [1, "GPU-b"]]
ENGINE = {"generation": "g-1", "started_at": 100.0, "container_id": "c0ffee", "ranks": RANKS}


def clock(wall: float, mono: float) -> dict[str, float]:
    return {"wall": wall, "monotonic": mono}


def engine_view(t: float, **over: Any) -> dict[str, Any]:
    """The engine read at client monotonic t (wall = t + 1000), its clock 2 ms behind."""
    view: dict[str, Any] = {
        "error": None, **ENGINE, "date": None, "simulated": False, "trace": None,
        "clock": {"unix_seconds": t + 1000 - 0.002, "monotonic_seconds": t - 50},
        "client_before": clock(t + 1000 - 0.003, t - 0.003),
        "client_after": clock(t + 1000 + 0.003, t + 0.003)}
    view.update(over)
    return view


def edge(action: str, t: float, **engine: Any) -> dict[str, Any]:
    return {"action": action, "error": None, "capture_at": t + 1000 + 0.001,
            "capture_generation": "g-1",
            "client_before": clock(t + 1000 - 0.01, t - 0.01),
            "client_after": clock(t + 1000 + 0.01, t + 0.01),
            "engine": engine_view(t - 0.05 if action == "begin" else t + 0.05, **engine),
            "phase": None if action == "begin" else {
                "valid": True, "invalid_reasons": [], "generation": "g-1",
                "deltas": {"requests": 4, "e2e_latency_seconds": {
                    "count": 4, "sum": 2.6, "buckets": [["0.65", 2], ["0.7", 4], ["+Inf", 4]]}}}}


def witness(on: bool, end: Any = None, counter: bool = False) -> dict[str, Any]:
    """The witness's readings after the switch and after the repetition (a snapshot flag by
    default; with `counter`, `on` and `end` are the counts)."""
    return {"what": "metric:polls_total" if counter else "snapshot:simulator.trace.enabled",
            "counter": counter, "begin": {"value": on, "error": None},
            "end": {"value": on if end is None else end, "error": None}}


def step(arm: str | None = "off", number: int = 1, position: int = 2, t: float = 10.0,
         latency: float = 0.65, tokens: int = 64) -> dict[str, Any]:
    requests = [{"position": i, "index": i, "sha256": "x", "ok": True, "status": 200,
                 "seconds": 0.005, "start": 0.005 * i, "completion_tokens": tokens}
                for i in range(4)]
    s: dict[str, Any] = {
        "position": position, "concurrency": 1, "arm": arm, "number": number,
        "phase": f"r/c1/{arm}-{number}" if arm else "r/c1/warmup",
        "switch": {"arm": arm or "off", "command": "true", "exit_code": 0, "error": None},
        "witness": witness(arm == "on"),
        "begin": edge("begin", t), "end": edge("end", t + 2),
        "load": {"requests": requests, "wall_seconds": 0.02}}
    s["end"]["phase"]["deltas"]["e2e_latency_seconds"]["sum"] = 4 * latency
    return s


def failing(s: dict[str, Any], ref: dict[str, Any] | None = None,
            **kw: Any) -> dict[str, str | None]:
    found = checks(s, ref if ref is not None else ENGINE, 64, **kw)
    return {c["check"]: c["detail"] for c in found if c["ok"] is not True}


def test_a_clean_repetition_holds_every_check() -> None:
    found = checks(step(), ENGINE, 64, ranks=2)
    assert [c["check"] for c in found] == [
        "switch", "switch_verified", "bracketed", "phase_valid", "failed_requests", "output_length",
        "dropped_requests", "ranks", "incarnation", "clock_anchors"]
    assert all(c["ok"] is True for c in found), found


def test_reference_is_the_first_step_that_read_the_engine() -> None:
    warm = step(None, 0, 1)
    assert reference([warm, step()]) == ENGINE
    broken = copy.deepcopy(warm)
    broken["begin"]["engine"] = {"error": "GET failed"}
    assert reference([broken, step()]) is None
    found = {c["check"]: c["ok"] for c in checks(step(), None, 64)}
    assert found["incarnation"] is None and found["ranks"] is None


def test_a_short_or_unmeasured_output_fails_output_length() -> None:
    assert "4 of 4 outputs were not 64 tokens long (63 tokens" in failing(
        step(tokens=63))["output_length"]
    s = step()
    s["load"]["requests"][2]["completion_tokens"] = None
    assert "length unknown" in failing(s)["output_length"]


def test_failed_and_dropped_requests_and_other_traffic() -> None:
    s = step()
    s["load"]["requests"][1].update(ok=False, status=500, error="HTTP 500")
    s["end"]["phase"]["deltas"]["requests"] = 3
    s["end"]["phase"]["deltas"]["e2e_latency_seconds"]["count"] = 3
    found = failing(s)
    assert "1 of 4 requests failed (the first, request 2: HTTP 500)" in found["failed_requests"]
    assert "finished 3 of the 4 requests sent: 1 dropped" in found["dropped_requests"]
    s = step()
    s["end"]["phase"]["deltas"]["requests"] = 5
    s["end"]["phase"]["deltas"]["e2e_latency_seconds"]["count"] = 5
    assert "other traffic" in failing(s)["dropped_requests"]
    s["end"]["phase"]["deltas"]["e2e_latency_seconds"]["count"] = 4
    assert "the engine's latency histogram counts 4 requests but its finished-request count " \
        "is 5: the phase's captures disagree" in failing(s)["dropped_requests"]
    s["end"]["phase"]["deltas"]["requests"] = None
    assert checks(s, ENGINE, 64)[6] == {
        "check": "dropped_requests", "ok": None, "detail": pytest.approx(
            "the engine's finished-request count is unknown (no latency histogram in the "
            "phase's captures)")}


def test_ranks_must_all_be_listed_and_stay_the_same() -> None:
    s = step()
    s["end"]["engine"]["ranks"] = RANKS[:1]
    assert "differ from those the run began with" in failing(s)["ranks"]
    assert "1 of 2 ranks listed at the end edge" in failing(s, ranks=2)["ranks"]
    s["end"]["engine"]["ranks"] = None
    assert "no ranks in the snapshot at the end edge" in failing(s)["ranks"]


def test_another_incarnation_or_container_fails_incarnation() -> None:
    s = step()
    s["end"]["engine"]["container_id"] = "beef00"
    assert "container_id at the end edge is 'beef00'" in failing(s)["incarnation"]
    s = step()
    s["begin"]["capture_generation"] = "g-2"
    assert "the sidecar's capture at the begin edge is of generation g-2" in failing(
        s)["incarnation"]


def test_a_clock_step_of_the_engine_the_sidecar_or_the_client_is_named() -> None:
    s = step()
    s["end"]["engine"]["clock"]["unix_seconds"] += 1.0
    found = failing(s)["clock_anchors"]
    assert found is not None
    assert "the engine's clock stepped by at least +0.9" in found
    assert "the engine's wall clock moved +1.000 s against its process clock" in found
    s = step()
    s["end"]["capture_at"] -= 0.5
    assert "the sidecar's clock stepped by at least -0.4" in failing(s)["clock_anchors"]
    s = step()
    s["end"]["client_after"]["wall"] += 2
    assert "client's wall clock moved +2.000 s" in failing(s)["clock_anchors"]
    # Within the tolerance: no jump.
    s = step()
    s["end"]["engine"]["clock"]["unix_seconds"] += 0.1
    assert "clock_anchors" not in failing(s)
    assert "clock_anchors" in failing(s, tolerance=0.05)


def test_an_http_date_is_read_to_the_second() -> None:
    s = step()
    for e, date in ((s["begin"], 1009.0), (s["end"], 1012.0)):  # true engine clock: t + 1000
        e["engine"].update(clock=None, date=date)
    assert "clock_anchors" not in failing(s)  # 9.95 s and 12.05 s both fall in their second
    s["end"]["engine"]["date"] = 1016.0
    # A 4 s step, of which the two whole-second readings prove at least 3.89 s.
    assert "the engine's clock stepped by at least +3.89" in failing(s)["clock_anchors"]
    s["end"]["engine"]["date"] = None
    s["end"]["engine"]["clock"] = None
    found = {c["check"]: c for c in checks(s, ENGINE, 64)}["clock_anchors"]
    assert found["ok"] is None and "no engine clock at the end edge" in found["detail"]


def test_a_failed_switch_or_edge_leaves_a_repetition_unbracketed() -> None:
    s = step()
    s.update(switch={"arm": "on", "command": "false", "exit_code": 1,
                     "error": "exited 1 (its output is in switch.log)"}, begin=None, load=None,
             stopped="the --on command before r/c1/on-1 exited 1")
    assert failing(s) == {"switch": "--on exited 1 (its output is in switch.log)",
                          "switch_verified": "the switch command failed",
                          "bracketed": "the --on command before r/c1/on-1 exited 1"}
    s = step()
    s["end"].update(error="POST /experiment/phases answered 503", phase=None)
    found = failing(s)
    assert "end: POST /experiment/phases answered 503" in found["bracketed"]
    assert found["phase_valid"] == "the sidecar's end answer has no phase"


def test_the_switch_is_verified_by_its_witness_at_both_edges() -> None:
    # A state flag: true at both edges with the observer on, false with it off.
    s = step("on")
    s["witness"] = witness(False)
    assert "was false after the switch and false after the repetition; the observer should " \
        "have been on throughout" in failing(s)["switch_verified"]
    s["witness"] = witness(True, end=False)  # it switched itself off during the repetition
    assert "switch_verified" in failing(s)
    s = step("off")
    s["witness"] = witness(True)
    assert "should have been off" in failing(s)["switch_verified"]
    # A counter of the observer's requests: grows with it on, does not with it off.
    s = step("on")
    s["witness"] = witness(120, 125, counter=True)
    assert "switch_verified" not in failing(s)
    s["witness"] = witness(120, 120, counter=True)
    assert "stayed at 120 with the observer on" in failing(s)["switch_verified"]
    s["witness"] = witness(120, 3, counter=True)
    assert "went back from 120 to 3" in failing(s)["switch_verified"]
    s = step("off")
    s["witness"] = witness(120, 122, counter=True)
    assert "grew from 120 to 122 with the observer off: it still ran" in failing(
        s)["switch_verified"]


def test_a_switch_that_cannot_be_verified_is_not_evaluated_and_not_valid() -> None:
    s = step("on")
    s["witness"]["end"] = {"value": None, "error": "GET /metrics answered 503"}
    found = {c["check"]: c for c in checks(s, ENGINE, 64)}["switch_verified"]
    assert found["ok"] is None
    assert found["detail"] == "the witness after the repetition: GET /metrics answered 503"
    s["witness"] = None
    assert failing(s)["switch_verified"] == "the switch was not read (no --witness reading)"
    # Such a repetition is not valid: the result cannot conclude, whatever its figures say.
    steps = [step(None, 0, 1)] + [step(a, i, p, latency=0.65 + 0.03 * (a == "on"))
                                  for p, (a, i) in enumerate(
                                      [("off", 1), ("on", 1), ("on", 2), ("off", 2),
                                       ("off", 3), ("on", 3)], 2)]
    steps[2]["witness"]["begin"] = {"value": None, "error": "the engine's snapshot has no x"}
    (r,) = build(ABOUT, steps, [1], 64)["results"]
    assert r["verdict"] == "cannot_conclude" and r["estimate"] is None
    assert r["invalid"] == [{"phase": "r/c1/on-1", "failing": [
        "switch_verified: the witness after the switch: the engine's snapshot has no x"]}]


def test_a_repetition_the_run_never_reached_is_not_run_not_invalid() -> None:
    steps = [step(None, 0, 1)] + [step(a, i, p, latency=0.65 + 0.03 * (a == "on"))
                                  for p, (a, i) in enumerate(
                                      [("off", 1), ("on", 1), ("on", 2), ("off", 2),
                                       ("off", 3), ("on", 3)], 2)]
    for s in steps[5:]:  # the run stopped before off-3 and on-3
        s.update(switch=None, begin=None, end=None, load=None, stopped="stopped earlier")
    assert failing(steps[5])["switch"] == "not run"  # never claimed to have switched
    assert failing(steps[5])["switch_verified"] == "not run"
    doc = build(ABOUT, steps, [1], 64)
    (r,) = doc["results"]
    assert r["verdict"] == "cannot_conclude" and r["estimate"] is None
    assert r["invalid"] == [] and r["not_run"] == ["r/c1/off-3", "r/c1/on-3"]
    assert r["sentence"] == ("Cannot conclude: 2 repetition(s) were not run (r/c1/off-3, "
                             "r/c1/on-3): the run stopped before them.")

ABOUT = {"name": "r", "engine_url": "e", "sidecar": "s", "on": "on", "off": "off", "seed": 1,
         "corpus": {"path": "f", "bodies": 4, "sha256": "0" * 64}, "concurrencies": [1],
         "repetitions": 3, "requests_per_repetition": 4, "warmup_requests": 4,
         "plan": {"file": "plan.json", "sha256": "0" * 64}}


def run(latencies: dict[str, list[float]], **kw: Any) -> dict[str, Any]:
    steps, position = [step(None, 0, 1)], 1
    for i in range(3):
        for arm in ("off", "on"):
            position += 1
            steps.append(step(arm, i + 1, position, t=10.0 * position,
                              latency=latencies[arm][i]))
    return build(ABOUT, steps, [1], 64, **kw)


def test_a_result_concludes_only_on_valid_repetitions() -> None:
    doc = run({"off": [0.650, 0.652, 0.648], "on": [0.683, 0.680, 0.684]})
    (r,) = doc["results"]
    assert r["verdict"] == "cost_resolved" and r["low"] <= 0.05 <= r["high"]
    assert doc["conclusive"]
    flat = run({"off": [0.650, 0.660, 0.640], "on": [0.652, 0.645, 0.655]})["results"][0]
    assert flat["verdict"] == "not_resolved" and not flat["resolved"]
    assert "does not show that observing costs nothing" in flat["sentence"]


def test_one_invalid_repetition_refuses_the_result_and_is_kept() -> None:
    steps = [step(None, 0, 1)] + [step(a, i, p, latency=0.65 + 0.03 * (a == "on"))
                                  for p, (a, i) in enumerate(
                                      [("off", 1), ("on", 1), ("on", 2), ("off", 2),
                                       ("off", 3), ("on", 3)], 2)]
    steps[3]["load"]["requests"][0]["completion_tokens"] = 10
    doc = build(ABOUT, steps, [1], 64)
    (r,) = doc["results"]
    assert r["verdict"] == "cannot_conclude" and r["estimate"] is None and not r["resolved"]
    assert r["invalid"] == [{"phase": "r/c1/on-2", "failing": [
        "output_length: 1 of 4 outputs were not 64 tokens long (10 tokens; the first, "
        "request 1)"]}]
    assert "Cannot conclude: 1 repetition(s) are invalid (r/c1/on-2)" in r["sentence"]
    assert r["arms"]["on"]["repetitions"] == ["r/c1/on-1", "r/c1/on-2", "r/c1/on-3"]
    assert not doc["conclusive"]


def test_without_the_engine_histogram_only_the_client_can_judge() -> None:
    steps = [step(None, 0, 1)] + [step(a, i, p) for p, (a, i) in enumerate(
        [("off", 1), ("on", 1), ("on", 2), ("off", 2), ("off", 3), ("on", 3)], 2)]
    for s in steps:
        s["end"]["phase"]["deltas"]["e2e_latency_seconds"] = None
        s["end"]["phase"]["deltas"]["requests"] = None
    engine = build(ABOUT, steps, [1], 64)["results"][0]
    assert engine["verdict"] == "cannot_conclude"
    client = build(ABOUT, steps, [1], 64, source="client")["results"][0]
    # Still refused: without the engine's count no repetition shows zero drops.
    assert client["verdict"] == "cannot_conclude"
    assert "dropped_requests: the engine's finished-request count is unknown" in \
        client["invalid"][0]["failing"][0]


# -- every field of the sidecar's phase answer -----------------------------------------------------
# What a repetition's result reads from outside the command: the sidecar's answer to its end edge
# (`end.phase`). Each field is deleted, nulled and perturbed in turn, in an off and in an on
# repetition: the result then never computes a difference, unless the field is listed here as
# irrelevant to it, with the reason, and it never crashes.
IRRELEVANT = {
    ("generation",): "shown only; the incarnation check reads the engine's snapshot and the "
                     "capture's generation",
    ("invalid_reasons",): "the words of phase_valid's detail; `valid` decides",
    ("deltas", "e2e_latency_seconds", "buckets"): "only the estimated p50 and p99 (shown, never "
                                                   "judged) come from the buckets",
}
# The measurement itself: another finite, non-negative latency sum is another latency, judged as
# such (the sidecar derived it from its captures; the count beside it is cross-checked).
MEASURED = ("deltas", "e2e_latency_seconds", "sum")


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _leaves(v, (*path, i))
    return out


def _perturbations(value: Any) -> list[Any]:
    if isinstance(value, bool):
        return [not value, "true", 1]
    if isinstance(value, int | float):
        return [value + 1, -value - 1, str(value), float("nan"), [value]]
    return [{"x": 1}, 7, "x"]


def test_no_field_of_the_sidecars_answer_is_trusted_blindly() -> None:
    steps, position = [step(None, 0, 1)], 1
    for i in range(3):
        for a in ("off", "on"):
            position += 1
            steps.append(step(a, i + 1, position, t=10.0 * position,
                              latency=0.65 + 0.033 * (a == "on") + 0.002 * i))
    assert build(ABOUT, steps, [1], 64)["results"][0]["verdict"] == "cost_resolved"
    tried = 0
    for index in (2, 3):  # off-1 and on-1
        phase = steps[index]["end"]["phase"]
        for path in _leaves(phase):
            inside = path[:3] if path[:3] == ("deltas", "e2e_latency_seconds", "buckets") else path
            current: Any = phase
            for k in path:
                current = current[k]
            for how in ("delete", "null", *_perturbations(current)):
                mutated = copy.deepcopy(steps)
                parent = mutated[index]["end"]["phase"]
                for k in path[:-1]:
                    parent = parent[k]
                if how == "delete":
                    del parent[path[-1]]
                else:
                    parent[path[-1]] = None if how == "null" else how
                (r,) = build(ABOUT, mutated, [1], 64)["results"]
                tried += 1
                measured = path == MEASURED and isinstance(how, float) and how >= 0
                if inside not in IRRELEVANT and not measured:
                    assert r["verdict"] == "cannot_conclude", (path, how, r["sentence"])
    assert tried > 100
