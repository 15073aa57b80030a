"""--engine-kind through the sidecar as `serve` builds it, against engines of each shape: one
/metrics request a cycle, the kind decided or checked, the restore window on the engine's
disappearance, and an engine upgraded mid-run."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from exporter.config import Config
from exporter.sidecar import Sidecar, build
from tests import engine_expositions
from tools.harness import families


class Engine:
    def __init__(self, text: str) -> None:
        self.text = text
        self.up = True
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if not self.up:
            raise httpx.ConnectError("refused", request=request)
        if request.url.path == "/metrics":
            return httpx.Response(200, text=self.text)
        if request.url.path == "/health":
            return httpx.Response(200)
        return httpx.Response(404)


def sidecar(tmp_path: Path, engine: Engine, kind: str, **kwargs: Any) -> Sidecar:
    clock = kwargs.pop("clock", None)
    config = Config(engine_url="http://engine.test", state_dir=tmp_path, no_nvml=True,
                    engine_kind=kind, **kwargs)
    return build(config, transport=httpx.MockTransport(engine),
                 **({"clock": clock} if clock else {}))


def cycles(s: Sidecar, n: int = 1) -> dict[str, Any]:
    async def run() -> None:
        for _ in range(n):
            await s.loop.cycle()
    asyncio.run(run())
    return families(s.cache.render(False))


def value(fams: dict[str, Any], name: str, **labels: str) -> float | None:
    fam = fams.get(name.removesuffix("_total"))
    if fam is None:
        return None
    found = [x.value for x in fam.samples if x.name == name
             and all(x.labels.get(k) == v for k, v in labels.items())]
    return found[0] if found else None


def test_one_metrics_request_a_cycle_and_the_health_path(tmp_path: Path) -> None:
    engine = Engine(engine_expositions.sglang())
    s = sidecar(tmp_path, engine, "sglang")
    fams = cycles(s, 2)
    assert sorted(engine.paths) == ["/health", "/health", "/metrics", "/metrics"]
    assert value(fams, "helios_engine_up") == 1.0
    assert value(fams, "helios_offload_slab_capacity", kind="row") == 512.0
    assert value(fams, "helios_engine_kind_info", kind="sglang", decided="configured",
                 mapping="sglang-0.5.23") == 1.0
    assert value(fams, "helios_engine_signal_coverage", signal="eviction_attempts",
                 source="absent") == 1.0
    assert "helios_offload_eviction_attempts" not in fams  # absent, not 0
    assert value(fams, "helios_engine_native_prompt_tokens_total") == 4000.0  # pass-through
    assert s.status()["engine_kind"]["kind"] == "sglang"
    s.close()


def test_auto_decides_and_says_so(tmp_path: Path) -> None:
    engine = Engine(engine_expositions.vllm())
    s = sidecar(tmp_path, engine, "auto")
    with structlog.testing.capture_logs() as logs:
        fams = cycles(s, 2)
    decided = [e for e in logs if e["event"] == "engine_kind_decided"]
    assert len(decided) == 1 and decided[0]["kind"] == "vllm"
    assert value(fams, "helios_engine_kind_info", kind="vllm", decided="auto",
                 mapping="vllm-0.33.0") == 1.0
    assert value(fams, "helios_offload_host_stored_bytes_total") == float(1 << 20)
    s.close()


@pytest.mark.parametrize(("text", "found"), [(engine_expositions.vllm(), "vllm"),
                                             (engine_expositions.helios(), "helios"),
                                             ("", "unknown")])
def test_a_kind_that_does_not_fit_is_a_clear_error(tmp_path: Path, text: str, found: str) -> None:
    engine = Engine(text)
    s = sidecar(tmp_path, engine, "sglang")
    with structlog.testing.capture_logs() as logs:
        fams = cycles(s, 3)
    errors = [e for e in logs if e["event"] == "engine_kind_mismatch"]
    assert len(errors) == 1 and "--engine-kind sglang" in errors[0]["error"]  # once, not per poll
    assert value(fams, "helios_engine_kind_mismatch", kind="sglang", found=found) == 1.0
    assert value(fams, "helios_exporter_source_up", source="engine_snapshot") == 0.0
    assert value(fams, "helios_exporter_source_errors_total", source="engine_snapshot",
                 reason="schema") == 3.0
    assert value(fams, "helios_restore_window_open") in (None, 0.0)  # it answered: no window
    status = s.status()["engine_kind"]
    assert status["mismatch"]["found"] == found
    # It fits again: the mismatch ends, one line.
    engine.text = engine_expositions.sglang()
    with structlog.testing.capture_logs() as logs:
        fams = cycles(s)
    assert [e["event"] for e in logs if e["event"].startswith("engine_kind")] == \
        ["engine_kind_matched"]
    assert "helios_engine_kind_mismatch" not in fams
    s.close()


def test_an_upgrade_that_moves_families_changes_coverage_and_keeps_serving(
        tmp_path: Path) -> None:
    engine = Engine(engine_expositions.sglang())
    s = sidecar(tmp_path, engine, "sglang")
    cycles(s)
    # A release that renames the host Mamba pool's gauges.
    engine.text = engine.text.replace("hicache_host_mamba_", "hicache_host_recurrent_")
    with structlog.testing.capture_logs() as logs:
        fams = cycles(s, 2)
    changed = [e for e in logs if e["event"] == "engine_coverage_changed"]
    assert len(changed) == 1 and set(changed[0]["now_absent"]) == {"slab_capacity.row",
                                                                   "slab_free.row"}
    assert value(fams, "helios_engine_signal_coverage", signal="slab_free.row",
                 source="absent") == 1.0
    assert value(fams, "helios_offload_slab_capacity", kind="row") is None
    assert value(fams, "helios_offload_slab_capacity", kind="page") == 1024.0
    assert value(fams, "helios_engine_up") == 1.0
    s.close()


def test_inconsistent_values_are_counted_and_the_others_stand(tmp_path: Path) -> None:
    engine = Engine(engine_expositions.sglang(mamba_total=10, mamba_used=20))
    s = sidecar(tmp_path, engine, "sglang")
    fams = cycles(s, 2)
    assert value(fams, "helios_exporter_snapshot_fields_dropped_total",
                 field="offload.slabs.row.free") == 2.0
    assert value(fams, "helios_offload_slab_free", kind="row") is None
    assert value(fams, "helios_offload_slab_free", kind="page") == (65536 - 4096) // 64
    s.close()


def test_the_window_opens_when_the_engine_disappears(tmp_path: Path) -> None:
    now = [1000.0]
    engine = Engine(engine_expositions.sglang())
    s = sidecar(tmp_path, engine, "sglang", down_grace=5.0, clock=lambda: now[0])
    cycles(s)
    engine.up = False
    for _ in range(3):
        now[0] += 4.0
        fams = cycles(s)
    assert value(fams, "helios_restore_window_open") == 1.0
    assert value(fams, "helios_engine_up") == 0.0
    # Back as a new incarnation (its counters reset): what needs a snapshot stays unknown.
    engine.up = True
    engine.text = engine_expositions.sglang(backup_tokens=1)
    now[0] += 4.0
    cycles(s)
    restore = s.status()["restore"]
    assert restore["phase"] == "restoring"
    assert "drained_admission" not in str(restore.get("checks"))
    assert s.status()["engine_kind"]["unknown"] == ["drain", "admission",
                                                    "post-restore identity checks"]
    s.close()


def test_the_option_and_its_variable(tmp_path: Path) -> None:
    import argparse

    from exporter import config as cfg

    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, "serve")
    base = ["--engine-url", "http://e", "--state-dir", str(tmp_path)]
    assert cfg.load(parser.parse_args(base), "serve", {}).engine_kind == "helios"
    env = {"HELIOS_EXPORTER_ENGINE_KIND": "auto"}
    assert cfg.load(parser.parse_args(base), "serve", env).engine_kind == "auto"
    assert cfg.load(parser.parse_args([*base, "--engine-kind", "vllm"]), "serve",
                    env).engine_kind == "vllm"
    with pytest.raises(cfg.ConfigError) as exc:
        cfg.load(parser.parse_args([*base, "--engine-kind", "lmcache"]), "serve", {})
    assert exc.value.errors == ["--engine-kind / HELIOS_EXPORTER_ENGINE_KIND: expected helios, "
                                "sglang, vllm or auto, got 'lmcache'"]
