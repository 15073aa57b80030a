"""Simulated engine (reverse-replay) -> sidecar -> real Prometheus, all on 127.0.0.1."""

from __future__ import annotations

import httpx

from tests.e2e.procs import Stack, query, wait_for
from tests.helpers import promtool_check_metrics


def values(prom: str, expr: str) -> dict[str, float]:
    return {r["metric"].get("generation", ""): float(r["value"][1]) for r in query(prom, expr)}


def test_reverse_replay_row_pressure_with_page_headroom_and_restart(stack: Stack) -> None:
    _engine, engine_url = stack.simulator("reverse-replay", "--seed", "7", "--rate", "8")
    sidecar, sidecar_url = stack.sidecar(engine_url, "--poll-interval", "0.5")
    _prom_proc, prom = stack.prometheus([sidecar_url.removeprefix("http://")])

    row_attempts = 'helios_offload_eviction_attempts_total{pressure="row"}'
    page_free_ratio = ('helios_offload_slab_free{kind="page"} / ignoring(kind) '
                       'helios_offload_slab_capacity{kind="page"}')
    first = wait_for(lambda: values(prom, f"{row_attempts} > 0"), 90,
                     "row-pressure evictions in Prometheus", sidecar)
    (generation, attempts_then), = first.items()
    # Row evictions keep rising while the page slab keeps more than 25% free.
    wait_for(lambda: values(prom, row_attempts)[generation] > attempts_then + 5, 60,
             "row attempts to rise", sidecar)
    ratio = values(prom, f"min_over_time(({page_free_ratio})[1m:1s])")[generation]
    assert ratio > 0.25
    assert values(prom, 'helios_offload_eviction_attempts_total{pressure="page"}')[generation] == 0
    wait_for(lambda: values(prom, "helios_offload_row_pressure_with_page_headroom_total")
             .get(generation, 0) > 0, 30, "the headroom counter", sidecar)

    # Every helios_offload_* series carries the generation.
    assert query(prom, '{__name__=~"helios_offload_.+"}')
    assert query(prom, '{__name__=~"helios_offload_.+", generation=""}') == []
    assert query(prom, '{__name__=~"helios_engine_native_.+", generation=""}') == []
    # No engine label (request_id, model_name) reaches Prometheus.
    assert query(prom, '{__name__=~"helios_.+", request_id!=""}') == []
    assert query(prom, '{__name__=~"helios_.+", model_name!=""}') == []

    live = httpx.get(sidecar_url + "/metrics", timeout=5)
    promtool_check_metrics(live.content)

    # A restart of the engine: a new generation with fresh counters.
    httpx.post(engine_url + "/admin/restart", json={"container": "same"}, timeout=5)
    info = wait_for(lambda: [r["metric"]["generation"] for r in query(
        prom, "helios_monitoring_generation_info") if r["metric"]["generation"] != generation],
        30, "a new generation in Prometheus", sidecar)
    new_generation = info[0]
    lookups = wait_for(lambda: values(prom, "helios_offload_lookups_total").get(new_generation),
                       30, "counters of the new generation", sidecar)
    old_lookups = values(
        prom, f'last_over_time(helios_offload_lookups_total{{generation="{generation}"}}[5m])')
    assert lookups < old_lookups[generation]
    starts = values(prom, "helios_monitoring_generation_start_timestamp_seconds")
    assert starts[new_generation] > 0
