"""Measuring one Prometheus for bench/scale/scale.py: its HTTP API, waiting for its compactions, and
each rule group's evaluation time and every dashboard query's time and samples read."""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: `bench` importable
from bench.scale import queries as scale_queries

RANGE_S = 6 * 3600  # the dashboards' time range


class Prom:
    def __init__(self, url: str) -> None:
        self.url = url
        self.client = httpx.Client(base_url=url, timeout=120.0)

    def get(self, path: str, **params: str) -> Any:
        r = self.client.get(path, params=params)
        r.raise_for_status()
        return r.json()["data"]

    def value(self, expr: str) -> float | None:
        result = self.get("/api/v1/query", query=expr)["result"]
        return float(result[0]["value"][1]) if result else None

    def own(self, name: str) -> float | None:
        """A series of Prometheus's own /metrics (it does not scrape itself here), summed."""
        text = self.client.get("/metrics").text
        values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                  if line.startswith(name) and line[len(name)] in " {"]
        return sum(values) if values else None

    def per_engine(self, matcher: str) -> list[float]:
        return [float(r["value"][1]) for r in self.get(
            "/api/v1/query", query=f'count by (cluster, instance) ({{job="helios-exporter", '
                                   f'{matcher}}})')["result"]]


def wait_compacted(prom: Prom, log: Callable[[str], None], limit_s: float = 1800) -> dict[str, Any]:
    """Until the backfilled blocks stop being merged (vertical compaction of overlapping blocks):
    the block count unchanged for a minute."""
    t0 = time.monotonic()
    last, since = None, time.monotonic()
    while time.monotonic() - t0 < limit_s:
        blocks = prom.own("prometheus_tsdb_blocks_loaded")
        if blocks != last:
            last, since = blocks, time.monotonic()
            log(f"  blocks loaded: {blocks}")
        elif time.monotonic() - since >= 60:
            break
        time.sleep(5)
    return {"blocks": last, "seconds": time.monotonic() - t0,
            "compactions": prom.own("prometheus_tsdb_compactions_total"),
            "vertical_compactions": prom.own("prometheus_tsdb_vertical_compactions_total")}


def samples_read(prom: Prom, path: str, params: dict[str, str]) -> int | None:
    """Samples the query reads (Prometheus's query stats, `totalQueryableSamples`): its cost
    whatever the machine, where the time depends on the CPU it got."""
    r = prom.client.get(path, params={**params, "stats": "all"})
    r.raise_for_status()
    stats = r.json()["data"].get("stats") or {}
    value = (stats.get("samples") or {}).get("totalQueryableSamples")
    return None if value is None else int(value)


def measure_rules(prom: Prom, evaluations: int, interval: float) -> list[dict[str, Any]]:
    """Each group's evaluationTime at `evaluations` distinct evaluations, then the samples its
    rules read in one evaluation (each expression as an instant query; alert templates aside)."""
    seen: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + (evaluations + 3) * interval * 2
    while time.monotonic() < deadline:
        for g in prom.get("/api/v1/rules")["groups"]:
            entry = seen.setdefault(g["name"], {
                "group": g["name"], "file": Path(g["file"]).name, "rules": len(g["rules"]),
                "interval_s": g["interval"], "times": {}, "rule_times": {}, "errors": set()})
            if g.get("lastEvaluation", "").startswith("0001"):
                continue
            entry["times"][g["lastEvaluation"]] = g["evaluationTime"]
            for r in g["rules"]:
                key = r.get("name") or r.get("record", "")
                entry["rule_times"].setdefault(key, {})[g["lastEvaluation"]] = r["evaluationTime"]
                if r.get("health") == "err":
                    entry["errors"].add(f"{key}: {r.get('lastError')}")
        if all(len(e["times"]) >= evaluations for e in seen.values()) and seen:
            break
        time.sleep(interval / 3)
    exprs: dict[str, list[tuple[str, str]]] = {
        g["name"]: [(r.get("name") or r.get("record", ""), r["query"]) for r in g["rules"]]
        for g in prom.get("/api/v1/rules")["groups"]}
    out = []
    for e in seen.values():
        rule_samples = {name: samples_read(prom, "/api/v1/query", {"query": expr})
                        for name, expr in exprs.get(e["group"], [])}
        times = [t * 1000 for t in list(e["times"].values())[-evaluations:]]
        slowest: tuple[str | None, dict[str, float]] = max(
            e["rule_times"].items(), key=lambda kv: statistics.median(kv[1].values()),
            default=(None, {}))
        out.append({
            "group": e["group"], "file": e["file"], "rules": e["rules"],
            "interval_s": e["interval_s"], "evaluations": len(times),
            "median_ms": statistics.median(times) if times else None,
            "max_ms": max(times) if times else None,
            "slowest_rule": slowest[0],
            "slowest_rule_median_ms": statistics.median(slowest[1].values()) * 1000
            if slowest[1] else None,
            "rule_ms": {name: statistics.median(list(t.values())[-evaluations:]) * 1000
                        for name, t in e["rule_times"].items() if t},
            "samples": sum(v or 0 for v in rule_samples.values()),
            "rule_samples": rule_samples,
            "errors": sorted(e["errors"]),
        })
    return out


def measure_queries(prom: Prom, dashboards: Sequence[Path], reps: int,
                    end: float) -> list[dict[str, Any]]:
    start = end - RANGE_S

    def label_values(selector: str, label: str) -> list[str]:
        params = {"start": str(int(start)), "end": str(int(end))}
        if selector:
            params["match[]"] = selector
        data: list[str] = prom.get(f"/api/v1/label/{label}/values", **params)
        return data

    queries: list[scale_queries.Query] = []
    for path in dashboards:
        variables = scale_queries.variable_values(json.loads(path.read_text()), label_values)
        queries += scale_queries.queries(path, start, end, variables)
    times: list[list[float]] = [[] for _ in queries]
    sizes: list[tuple[int, int]] = [(0, 0)] * len(queries)
    for _ in range(reps):  # round-robin: every query once per round
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            r = prom.client.get(q.path, params=q.params())
            body = r.content
            times[i].append((time.perf_counter() - t0) * 1000)
            if r.status_code != 200:
                raise RuntimeError(f"{q.dashboard} {q.panel}: HTTP {r.status_code} {body[:300]!r}")
            result = r.json()["data"]
            series = len(result["result"]) if isinstance(result, dict) else len(result)
            sizes[i] = (series, len(body))
    samples = [None if q.kind == "label_values" else samples_read(prom, q.path, q.params())
               for q in queries]  # after the timed rounds: the stats cost nothing timed
    return [{
        "dashboard": q.dashboard, "panel": q.panel, "ref": q.ref, "kind": q.kind,
        "expr": q.expr, "step_s": q.step, "series": sizes[i][0], "bytes": sizes[i][1],
        "samples": samples[i],
        "median_ms": statistics.median(times[i]), "max_ms": max(times[i]), "reps": reps,
    } for i, q in enumerate(queries)]
