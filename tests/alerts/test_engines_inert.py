"""Which shipped alerts can fire on an SGLang or vLLM engine (alerts/engines.py), from the rules
as generated and the engines' mappings: docs/engines.md's table."""

from __future__ import annotations

from pathlib import Path

import yaml

from alerts.engines import inputs, table
from exporter.engines import MAPPINGS

RULES = yaml.safe_load((Path(__file__).parents[2] / "alerts" / "helios-alerts.yaml").read_text())
RECORDS = {r["record"]: r["expr"] for g in RULES["groups"] for r in g["rules"] if "record" in r}


def rows() -> dict[str, list[str]]:
    lines = table(RULES, [MAPPINGS["sglang"], MAPPINGS["vllm"]]).splitlines()[2:]
    return {line.split("`")[1]: [c.strip() for c in line.split("|")[2:-1]] for line in lines}


def expr(alert: str) -> str:
    return next(r["expr"] for g in RULES["groups"] for r in g["rules"] if r.get("alert") == alert)


def test_recording_rules_are_read_through() -> None:
    assert "helios_offload" not in expr("HeliosOffloadHostTierNoReuse")  # recording rules only
    assert set(inputs(expr("HeliosOffloadHostTierNoReuse"), RECORDS)) == {
        "helios_offload_lookups_total", "helios_offload_host_stores_total",
        "helios_offload_host_tokens_restored_total"}


def test_the_host_tier_alerts_fire_on_sglang_and_the_others_say_why_not() -> None:
    table_rows = rows()
    # Both fire on both (vLLM's store outcomes: the SimpleCPU connector's).
    assert "HeliosOffloadHostTierNoReuse" not in table_rows
    assert "HeliosOffloadStoresDropped" not in table_rows
    inert = table_rows["HeliosOffloadCacheInert"]
    assert all(c.startswith("inert: ") and "lookup_misses" in c for c in inert)
    assert all("eviction_attempts" in c
               for c in table_rows["HeliosOffloadRowPressureWithPageHeadroom"])
    # vLLM states its budget, but no rule has its other input: no geometry to check.
    assert table_rows["HeliosOffloadGeometryInconsistent"][1].startswith(
        "inert: slab_record_bytes")
    # The restore window's alerts need no engine signal, but the cutoff needs in-flight requests.
    assert "HeliosRestoreBoundBreached" not in table_rows
    assert "HeliosRestoreWindowClosed" not in table_rows  # its in-flight input is one alternative
    assert table_rows["HeliosRequestCutoffBreached"][0].startswith("inert: inflight_requests")
