"""The pieces of bench/scale/scale.py that run without a fleet: the series model (bench/scale/series.py),
the Grafana query substitution (bench/scale/queries.py) and the block ranges (bench/scale/tsdb.py).
The measurement itself is too slow for the suite (bench/run --scale)."""

from __future__ import annotations

import importlib
import io
import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.conftest import ROOT
from tools.harness import families

ANCHOR = 1_796_000_000.0  # a multiple of 15 s


@pytest.fixture(scope="module")
def bench() -> Iterator[dict[str, ModuleType]]:
    yield {f"scale_{name}": importlib.import_module(f"bench.scale.{name}")
           for name in ("series", "queries", "tsdb", "steps")}


def engine_of(series: ModuleType, scenario: str) -> object:
    index = series.SCENARIOS.index(scenario)
    return series.Engine(index, ANCHOR)


def parsed(text: str) -> list[Sample]:
    """Every sample, read back by prometheus_client's parser (the model writes no TYPE lines, so
    each sample comes as a family of its own)."""
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


def exposition(series: ModuleType, engine: object, t: float) -> dict[str, float]:
    """`name[sorted labels]` -> value of one engine at t."""
    return {f"{s.name}{sorted(s.labels.items())}": s.value
            for s in parsed(series.render([engine], t))}


def test_an_engine_exports_the_golden_series_with_its_target_labels(bench: dict) -> None:
    series = bench["scale_series"]
    steady = engine_of(series, "steady")
    golden = families((ROOT / "tests" / "golden" / "full_exposition.prom").read_text())
    every = parsed(series.render([steady], ANCHOR))
    golden_names = {s.name for f in golden.values() for s in f.samples}
    mine_names = {s.name for s in every}
    # The golden's open window has series a steady engine only has while a window is open.
    assert golden_names - mine_names <= series.WINDOW_ONLY
    assert mine_names - golden_names == set(series.SCRAPE_SERIES)
    assert len(every) == len({(s.name, tuple(sorted(s.labels.items()))) for s in every})
    assert all(s.labels["job"] == "helios-exporter" and s.labels["cluster"] in series.CLUSTERS
               for s in every)
    gpu = {(s.labels["gpu"], s.labels["uuid"]) for s in every if "gpu" in s.labels}
    assert len(gpu) == 2 and "GPU-1f0c..." not in {u for _, u in gpu}  # two GPUs, own UUIDs
    generations = {s.labels["generation"] for s in every if "generation" in s.labels}
    assert len(generations) == 1 and generations != {"g-20261129T0412Z-7f3a"}


def test_counters_grow_within_a_generation_and_buckets_stay_cumulative(bench: dict) -> None:
    series = bench["scale_series"]
    engine = engine_of(series, "steady")
    before, after = (exposition(series, engine, ANCHOR + d) for d in (0, 3600))
    counters = [k for k in before if k.split("[")[0].endswith(("_total", "_bucket", "_count"))]
    assert counters
    assert all(after[k] >= before[k] for k in counters)
    assert any(after[k] > before[k] for k in counters)
    buckets = sorted((float(s.labels["le"]), s.value)
                     for s in parsed(series.render([engine], ANCHOR + 3600))
                     if s.name == "helios_engine_native_time_to_first_token_seconds_bucket")
    assert len(buckets) > 10 and [v for _, v in buckets] == sorted(v for _, v in buckets)


def value(expo: dict[str, float], name: str, **labels: str) -> float | None:
    for key, v in expo.items():
        if key.startswith(name + "[") and all(f"('{k}', '{lv}')" in key for k, lv in labels.items()):
            return v
    return None


def test_restore_scenarios(bench: dict) -> None:
    series = bench["scale_series"]
    bound = series.RESTORE_BOUND
    late = engine_of(series, "closed_late")
    after = exposition(series, late, late.window.start + late.window.duration + 60)
    assert value(after, "helios_restore_window_open") == 0.0
    assert value(after, "helios_restore_last_window_outcome", outcome="late") == 1.0
    assert value(after, "helios_restore_check_ok", check="image") == 0.0
    assert value(after, "helios_restore_deadline_timestamp_seconds", bound="restore") is None
    breached = engine_of(series, "breached")
    now = exposition(series, breached, ANCHOR)
    assert value(now, "helios_restore_window_open") == 1.0
    assert value(now, "helios_restore_deadline_timestamp_seconds", bound="restore") == \
        breached.window.start + bound < ANCHOR
    opened = engine_of(series, "open")
    during = exposition(series, opened, opened.window.start + 13 * 60)  # the engine is down
    assert value(during, "helios_restore_phase", phase="down") == 1.0
    assert value(during, "helios_engine_up") == 0.0
    in_time = engine_of(series, "closed_in_time")
    gens = [{k for k in exposition(series, in_time, t) if "('generation', " in k}
            for t in (in_time.window.start - 60, in_time.window.start + in_time.window.duration)]
    assert not gens[0] & gens[1]  # restored: every generation series is new
    restart = engine_of(series, "restart")
    assert value(exposition(series, restart, ANCHOR), "helios_engine_unplanned_restarts_total") == 1
    lost = engine_of(series, "gpu_lost")
    assert value(exposition(series, lost, ANCHOR), "helios_gpu_up", gpu="1") == 0.0


def test_host_tiers(bench: dict) -> None:
    """Most engines restore from the host tier and drop nothing; one in 25 drops stores as the
    golden does, one in 25 restores nothing (as the golden)."""
    series = bench["scale_series"]
    fleet = series.fleet(100, ANCHOR)
    tiers = {t: [e for e in fleet if e.host_tier == t] for t in ("reusing", "dropping", "no_reuse")}
    assert [len(tiers[t]) for t in tiers] == [92, 4, 4]
    assert not {e.index for e in tiers["dropping"] + tiers["no_reuse"]} & {
        e.index for e in fleet if e.scenario != "steady"}
    for tier, engines in tiers.items():
        before, after = (exposition(series, engines[0], ANCHOR + d) for d in (0, 3600))
        dropped = value(after, "helios_offload_host_store_outcomes_total", outcome="dropped_full")
        restored = value(after, "helios_offload_host_tokens_restored_total")
        host = value(after, "helios_offload_prompt_tokens_total", source="host_restored")
        assert value(after, "helios_offload_host_store_outcomes_total", outcome="stored")
        failed = value(after, "helios_offload_host_store_outcomes_total", outcome="failed")
        assert (dropped == 0.0, failed == 0.0) == ((tier != "dropping",) * 2)
        if tier == "no_reuse":
            assert restored == host == 0.0
        else:
            assert restored == host and restored > (
                value(before, "helios_offload_host_tokens_restored_total") or 0.0)


@pytest.mark.e2e
def test_promtool_backfills_the_openmetrics_output(bench: dict, tmp_path: Path) -> None:
    if shutil.which("promtool") is None:
        pytest.fail("promtool not on PATH (scripts/bootstrap installs Debian's prometheus)")
    series = bench["scale_series"]
    fleet = series.fleet(3, ANCHOR)
    out = io.StringIO()
    n = series.write_openmetrics(out, fleet, ANCHOR - 600, ANCHOR)
    series.eof(out)
    path = tmp_path / "fleet.om"
    path.write_text(out.getvalue())
    done = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(path),
                           str(tmp_path / "blocks")], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    (block,) = (tmp_path / "blocks").iterdir()
    meta = json.loads((block / "meta.json").read_text())
    assert meta["stats"]["numSamples"] == n == 40 * len(series.render(fleet, ANCHOR).splitlines())


def test_block_ranges(bench: dict) -> None:
    tsdb = bench["scale_tsdb"]
    pieces = list(tsdb.split(0, 7000.0, 16000.0))
    assert [(p.start, p.end) for p in pieces] == [(7000.0, 7200.0), (7200.0, 14400.0),
                                                  (14400.0, 16000.0)]


def test_a_store_serves_runs_that_need_no_more_history_than_it_holds(bench: dict,
                                                                      tmp_path: Path) -> None:
    tsdb = bench["scale_tsdb"]
    built = tsdb.Store(tmp_path, 100, 2.0, 3.0, ["a", "b"])
    assert tsdb.Store(tmp_path, 100, 2.0, 3.0, ["b"]).anchor == built.anchor  # fewer families
    assert tsdb.Store(tmp_path, 100, 2.0, 1.0, ["a", "b"]).anchor == built.anchor  # less history
    for other in ((100, 2.0, 3.0, ["a", "c"]), (100, 2.0, 4.0, ["a"]), (100, 6.0, 3.0, ["a"]),
                  (50, 2.0, 3.0, ["a"])):
        with pytest.raises(SystemExit, match="another model"):
            tsdb.Store(tmp_path, *other)


def test_the_steps_of_the_shipped_rules_are_found_and_backfilled_from_raw_series(
        bench: dict) -> None:
    """A backfilled store needs the steps' history (bench/scale/steps.py): every step rule of the
    shipped files is found, each backfilled from raw series alone (a recorded input would have
    no history either), over the longest range the rules read them back."""
    steps = bench["scale_steps"].find(sorted((ROOT / "alerts").glob("helios-*.yaml")))
    text = "".join(p.read_text() for p in sorted((ROOT / "alerts").glob("helios-*.yaml")))
    every = sorted(set(re.findall(r"record: ([\w:]+_every5m)\n", text)))
    assert every and sorted(r["record"] for r in steps.rules) == every
    for rule in steps.rules:
        assert "helios:" not in rule["expr"] and "helios_" in rule["expr"], rule
    assert steps.reach_s == 2 * 3600 + 59 * 60  # the restore memory: 3h less a minute


def test_grafana_intervals_and_substitution(bench: dict) -> None:
    q = bench["scale_queries"]
    # 6 h over a half-width panel (960 px): 22.5 s, rounded to 20 s; rate interval 4 x 15 s.
    interval = q.interval_s(6 * 3600, q.panel_width_px(12))
    assert interval == 20
    assert q.substitute('rate(x{a=~"$instance"}[$__rate_interval])', {"instance": ".*"},
                        interval, 6 * 3600) == 'rate(x{a=~".*"}[1m])'
    assert q.interval_s(3600, 2000) == 15  # never below the scrape interval
    assert q.rate_interval_s(120) == 135 and q.grafana_duration(135) == "135s"


def test_dashboard_queries_as_grafana_sends_them(bench: dict) -> None:
    q = bench["scale_queries"]
    path = ROOT / "dashboards" / "helios-restore.json"
    dashboard = json.loads(path.read_text())
    asked: list[tuple[str, str]] = []

    def label_values(selector: str, label: str) -> list[str]:
        asked.append((selector, label))
        return ["10.64.0.9:19400", "10.64.0.1:19400"]

    variables = q.variable_values(dashboard, label_values)
    assert variables["cluster"] == ".*"  # All
    assert variables["instance"] == "10.64.0.1:19400"  # single value, none chosen: the first
    assert asked and asked[0][1] == "instance"
    queries = q.queries(path, ANCHOR - 6 * 3600, ANCHOR, variables)
    panels = [x for x in queries if x.kind in ("range", "instant")]
    assert len(panels) == sum(len(p.get("targets", [])) for p in dashboard["panels"])
    assert all("$" not in x.expr for x in queries)
    for x in queries:
        if x.kind == "range":
            assert x.step and x.start % x.step == 0 and x.end % x.step == 0
            assert x.end - x.start <= 6 * 3600


def test_docs_scale_shows_the_stored_result(bench: dict) -> None:
    """docs/scale.md's figures are generated from bench/results/scale.json: regenerate with
    `python bench/report/scale.py --docs docs/scale.md` after a new measurement."""
    report = importlib.import_module("bench.report.scale")
    data = json.loads(report.STORED.read_text())
    page = (ROOT / "docs" / "scale.md").read_text()
    assert report.splice_docs(page, data) == page
    engines = [r["engines"] for r in data["runs"]]
    assert engines == sorted(engines) and engines[0] == 100
    for run in data["runs"]:  # every figure shown was measured: nothing missing or in error
        assert run["rules"] and all(g["median_ms"] is not None and not g["errors"]
                                    for g in run["rules"])
        assert run["queries"] and all(q["reps"] >= 1 for q in run["queries"])
    for path in (report.RULES, report.RULES_LIVE):  # rules alone, later
        if path.exists():
            rules = json.loads(path.read_text())
            assert {r["engines"] for r in rules["runs"]} <= set(engines)
            for run in rules["runs"]:
                assert run["rules"] and all(g["median_ms"] is not None and not g["errors"]
                                            for g in run["rules"])


def test_the_benchmark_page_takes_the_stored_result_without_running_it(bench: dict) -> None:
    report = importlib.import_module("bench.report.scale")
    data = json.loads(report.STORED.read_text())
    page = "# Benchmarks\n\n## Goals\n| figure | goal | measured | met |\n| --- | --- | --- | --- |\n" \
           "| other | x | y | **met** |\n\nEvery goal measured is met.\n\n## Analysis\n\nText.\n"
    once = report.splice(page, {"status": "ok", "data": data, "stored": True})
    assert report.splice(once, {"status": "ok", "data": data, "stored": True}) == once
    assert f"## {report.TITLE}" in once and once.index(report.TITLE) < once.index("## Analysis")
    goals = once.split("## Goals\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert goals[2] == "| other | x | y | **met** |"
    engines = data["runs"][-1]["engines"]
    rows = [r.split(" (", 1)[0] for r in goals[3:]]
    assert rows[0] == f"| slowest rule group at {engines:,} engines"
    assert rows[-1] == f"| slowest dashboard query at {engines:,} engines"
    rules = report.rules_result(data)
    live = report.live_result(rules) if rules is not data else None
    assert rows[1:-1] == ([f"| slowest rule group at {engines:,} engines after "
                           f"{live['live_minutes']:g} min live"] if live else [])
