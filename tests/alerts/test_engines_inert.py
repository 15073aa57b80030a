"""Which shipped alerts can fire on an SGLang or vLLM engine (exporter/engines/inert.py), from the
rules as generated and the engines' mappings: docs/engines.md's table."""

from __future__ import annotations

from pathlib import Path

import yaml

from exporter.engines import MAPPINGS
from exporter.engines.inert import inputs, table
from tests.conftest import ROOT

RULES = yaml.safe_load((ROOT / "alerts" / "helios-alerts.yaml").read_text())
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


def test_sglang_host_tier_storing_without_reuse_pages(tmp_path: Path, promtool: str) -> None:
    """The sidecar of --engine-kind sglang against an SGLang-shaped host tier that stores and
    never loads (SGLang's multiprocess registry: no `_created`, the load-back series never
    created), one poll a minute for 2h: its series, through the shipped rules, fire
    HeliosOffloadHostTierNoReuse as the Helios test of the same traffic does
    (alerts/tests/offload.yaml)."""
    import asyncio
    import subprocess

    import httpx

    from exporter.config import Config
    from exporter.sidecar import build
    from tests import engine_expositions
    from tools.harness import families

    minute = [0]

    def engine(request: httpx.Request) -> httpx.Response:
        text = engine_expositions.sglang(requests=10 * minute[0], backup_tokens=5 * minute[0],
                                         load_back_tokens=None, cached_host=None, created=False)
        return httpx.Response(200, text=text if request.url.path == "/metrics" else "")

    sidecar = build(Config(engine_url="http://e", state_dir=tmp_path, no_nvml=True,
                           engine_kind="sglang"), transport=httpx.MockTransport(engine))
    names = ("helios_offload_lookups_total", "helios_offload_host_stores_total",
             "helios_offload_host_tokens_restored_total")
    series: dict[str, list[str]] = {n: [] for n in names}
    generations = set()

    async def run() -> None:
        for m in range(121):
            minute[0] = m
            await sidecar.loop.cycle()
            fams = families(sidecar.cache.render(False))
            for name in names:
                (sample,) = [s for s in fams[name.removesuffix("_total")].samples
                             if s.name == name]
                generations.add(sample.labels["generation"])
                series[name].append(f"{sample.value:g}")
        await sidecar.client.aclose()

    try:
        asyncio.run(run())
    finally:
        sidecar.close()
    assert len(generations) == 1 and series["helios_offload_host_tokens_restored_total"][-1] == "0"
    (gen,) = generations
    labels = f'job="helios-exporter",instance="h1:9400",generation="{gen}"'
    rules = ROOT / "alerts" / "helios-alerts.yaml"
    order = [g["name"] for g in RULES["groups"]]
    test = {
        "rule_files": [str(rules)], "evaluation_interval": "1m", "group_eval_order": order,
        "tests": [{"interval": "1m", "input_series": [
            {"series": f"{name}{{{labels}}}", "values": " ".join(values)}
            for name, values in series.items()],
            "alert_rule_test": [
                {"eval_time": "30m", "alertname": "HeliosOffloadHostTierNoReuse"},
                {"eval_time": "90m", "alertname": "HeliosOffloadHostTierNoReuse", "exp_alerts": [{
                    "exp_labels": {"severity": "info", "job": "helios-exporter",
                                   "instance": "h1:9400"},
                    "exp_annotations": {
                        "summary": "Host offload tier stores but never restores on "
                                   "helios-exporter/h1:9400",
                        "description": "The engine on helios-exporter/h1:9400 stored into the "
                        "host offload tier and looked up prefixes (600 lookups) in the last 1h, "
                        "but no token was restored from the host tier: it costs host memory and "
                        "store bandwidth without reuse.",
                        "runbook_url": "https://github.com/helios/helios-exporter/blob/main/"
                                       "docs/runbooks/HeliosOffloadHostTierNoReuse.md"}}]}]}]}
    path = tmp_path / "sglang.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
