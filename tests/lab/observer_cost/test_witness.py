"""--witness: what proves observer-cost's switch switched, read from an engine's answers (served
here by an httpx transport standing in for the engine) or from the operator's command."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from lab.observer_cost.witness import Witness, parse, read

METRICS = """# TYPE helios:observer_requests_total counter
helios:observer_requests_total{path="/metrics"} 41.0
helios:observer_requests_total{path="/debug/offload/snapshot"} 40.0
# TYPE helios:num_requests_total counter
helios:num_requests_total{model_name="m"} 7.0
"""


def engine(snapshot: object = None, metrics: str = METRICS, status: int = 200) -> httpx.Client:
    def answer(request: httpx.Request) -> httpx.Response:
        if status != 200:
            return httpx.Response(status)
        if request.url.path == "/metrics":
            return httpx.Response(200, text=metrics)
        return httpx.Response(200, text=json.dumps(snapshot))
    return httpx.Client(base_url="http://engine", transport=httpx.MockTransport(answer))


def test_parse_names_each_kind_and_refuses_the_rest() -> None:
    assert parse("snapshot:simulator.trace.enabled") == Witness(
        "snapshot", "simulator.trace.enabled")
    w = parse('metric:helios:observer_requests_total{path="/metrics", x="y"}')
    assert (w.kind, w.arg, w.labels) == ("metric", "helios:observer_requests_total",
                                         (("path", "/metrics"), ("x", "y")))
    assert w.counter and not parse("snapshot:a").counter
    assert parse("command:cat n.txt").arg == "cat n.txt"
    for bad, message in (("trace", "give snapshot:PATH"), ("snapshot:", "give snapshot:PATH"),
                         ("snapshot:a..b", "dotted keys"), ("metric:a{b=c}", "a metric is"),
                         ("metric:1x", "a metric is"), ("nvml:x", "give snapshot:PATH")):
        with pytest.raises(ValueError, match=message):
            parse(bad)


def test_a_snapshot_flag_is_read_by_its_path(tmp_path: Path) -> None:
    log = tmp_path / "switch.log"
    w = parse("snapshot:simulator.trace.enabled")
    on = {"simulator": {"trace": {"enabled": True}}}
    assert read(w, engine(on), log, 5) == {"value": True, "error": None}
    for snap, error in (({"simulator": {}}, "has no simulator.trace.enabled"),
                        ({"simulator": {"trace": {"enabled": 1}}}, "is not true or false"),
                        ([1, 2], "has no simulator.trace.enabled")):
        got = read(w, engine(snap), log, 5)
        assert got["value"] is None and error in got["error"]
    assert read(w, engine(on, status=503), log, 5)["error"] == (
        "GET /debug/offload/snapshot answered 503")


def test_a_metric_is_one_series_of_the_engines_exposition(tmp_path: Path) -> None:
    log = tmp_path / "switch.log"
    got = read(parse('metric:helios:observer_requests_total{path="/metrics"}'), engine(), log, 5)
    assert got == {"value": 41.0, "error": None}
    two = read(parse("metric:helios:observer_requests_total"), engine(), log, 5)
    assert "2 series of helios:observer_requests_total: one series must match" in two["error"]
    none = read(parse("metric:helios:absent_total"), engine(), log, 5)
    assert "no series of helios:absent_total" in none["error"]
    bad = read(parse("metric:x"), engine(metrics="x{ 1\n"), log, 5)
    assert bad["value"] is None and "not a Prometheus text exposition" in bad["error"]


@pytest.mark.e2e  # runs the operator's command as a process
def test_a_command_prints_one_number(tmp_path: Path) -> None:
    log = tmp_path / "switch.log"
    assert read(parse("command:echo 12"), engine(), log, 5) == {"value": 12.0, "error": None}
    assert "printed 'on', not one number" in read(parse("command:echo on"), engine(), log,
                                                  5)["error"]
    assert read(parse("command:exit 3"), engine(), log, 5)["error"] == (
        "the witness command exited 3")
    assert "did not finish within 0.2 s" in read(parse("command:sleep 5"), engine(), log,
                                                 0.2)["error"]
    assert "--- witness: echo 12" in log.read_text()
