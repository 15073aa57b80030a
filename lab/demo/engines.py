"""`demo --engine sglang|vllm`: the simulated engine serves `/metrics` in that engine's shape
(`simulate --flavor`), the sidecar reads it with the matching `--engine-kind`, and the demo says
what that engine shows: the host tier through the catalogue, the alerts that can fire on it and
the ones that cannot (with what the engine lacks, from its mapping and the shipped rules), and,
as they happen, stores without reuse and the first reuse from the host tier."""

from __future__ import annotations

from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from exporter.engines import MAPPINGS
from exporter.engines.inert import table
from lab.demo.story import Stamp

ENGINES = ("helios", "sglang", "vllm")
# The scenario an engine-shaped demo plays unless --scenario says otherwise: a host tier that
# stores without reuse for 30 s, then is reused (simulator.scenarios.LateReuseScenario).
ENGINE_SCENARIO = "late-reuse"
NO_REUSE = "HeliosOffloadHostTierNoReuse"


def scenario(engine: str, given: str | None) -> str:
    """What the simulated engine plays: the one given, else the demo's own (helios) or
    late-reuse (the other engines)."""
    if given is not None:
        return given
    return "demo" if engine == "helios" else ENGINE_SCENARIO


def inert_alerts(engine: str, rules_file: Path) -> list[tuple[str, str]]:
    """(alert, what this engine lacks) for each shipped alert that cannot fire on it."""
    rules = yaml.safe_load(rules_file.read_text(encoding="utf-8"))
    mapping = MAPPINGS[engine]
    out = []
    for line in table(rules, [mapping]).splitlines()[2:]:
        name, cell = line.split("`")[1], line.split("|")[2].strip()
        if cell.startswith("inert: "):
            out.append((name, cell.removeprefix("inert: ")))
    return out


def story(engine: str, rules_file: Path) -> list[str]:
    """What the sidecar shows of this engine, before anything happens."""
    mapping = MAPPINGS[engine]
    counts = {how: sum(r.how == how for r in mapping.rows) for how in ("native", "derived")}
    absent = len(mapping.rows) - sum(counts.values())
    inert = inert_alerts(engine, rules_file)
    names = ", ".join(name for name, _ in inert[:6]) + (", ..." if len(inert) > 6 else "")
    return [
        f"the engine's /metrics are {mapping.name}'s shape (no snapshot): the sidecar "
        f"(--engine-kind {engine}) maps {counts['native']} catalogue signals natively, derives "
        f"{counts['derived']}, and leaves {absent} absent (helios_engine_signal_coverage; "
        "docs/engines.md): absent families are missing from /metrics, never 0",
        f"alerts that can fire on it include {NO_REUSE} (stores without reuse; its `for:` is "
        "30m and its window 1h, so it pends longer than a demo: tests/e2e compresses it); "
        f"{len(inert)} shipped alerts cannot fire on it ({names}), docs/engines.md says why",
    ]


def _value(text: str, family: str) -> float | None:
    total = None
    for metric in text_string_to_metric_families(text):
        if metric.name == family.removesuffix("_total"):
            for s in metric.samples:
                if s.name == family:
                    total = (total or 0.0) + s.value
    return total


class EngineNarrator:
    """One line when the host tier first stores while nothing was restored, one when the first
    host tokens are restored."""

    def __init__(self, stamp: Stamp) -> None:
        self.stamp = stamp
        self.said_stores = self.said_reuse = False

    def lines(self, metrics_text: str) -> list[str]:
        out: list[str] = []
        stores = _value(metrics_text, "helios_offload_host_stores_total")
        restored = _value(metrics_text, "helios_offload_host_tokens_restored_total")
        if not self.said_stores and stores and restored == 0:
            self.said_stores = True
            out.append(self.stamp("host", f"the host tier stores ({stores:g} so far, in the "
                                          "engine's unit) and has restored nothing: what "
                                          f"{NO_REUSE} pages on"))
        if not self.said_reuse and restored:
            self.said_reuse = True
            out.append(self.stamp("host", f"reuse from the host tier: {restored:g} tokens "
                                          f"restored; {NO_REUSE}'s condition no longer holds"))
        return out
