"""GPUs by rank, end to end: the assembled sidecar (poll loop, registry) polls the compiled fake NVML
through the real bindings and a stub engine whose snapshot lists the ranks.

Each GPU of the fake reads the figures one real H200 gave (tests/fixtures/real), with its own UUID.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import generate_latest

from exporter.config import Config
from exporter.sidecar import Sidecar, build
from exporter.sources.nvml import NvmlSource
from tests.helpers import FIXTURES, StubEngine, promtool_check_metrics
from tools.fake_nvml import FakeConfig, FakeLibs
from tools.harness import families

REAL = families((FIXTURES / "real" / "h200_sidecar_gpu_series.prom").read_text())
REAL_UUID = "GPU-3ca0e5f2-7b25-5643-c6de-7f5994435473"


def real(name: str) -> float:
    """The H200's value of the series `name` (GPU series without extra labels)."""
    return next(float(s.value) for m in REAL.values() for s in m.samples if s.name == name)


def uuid(i: int) -> str:
    """GPU 0 has the real H200's UUID; the others differ in their last digits."""
    return REAL_UUID if i == 0 else f"{REAL_UUID[:-4]}{i:04d}"


def h200(i: int, **extra: object) -> dict[str, object]:
    """The fake's table entry (NVML units) for a GPU reading what the real H200 read."""
    return {"uuid": uuid(i), "name": "NVIDIA H200",
            "mem_total": int(real("helios_gpu_memory_total_bytes")),
            "mem_used": int(real("helios_gpu_memory_used_bytes")),
            "util": 0, "power_mw": round(real("helios_gpu_power_watts") * 1000),
            "limit_mw": round(real("helios_gpu_power_limit_watts") * 1000),
            "energy_mj": round(real("helios_gpu_energy_joules_total") * 1000),
            "temp": int(real("helios_gpu_temperature_celsius")),
            "sm_mhz": int(real("helios_gpu_sm_clock_hertz") / 1e6),
            "mem_mhz": int(real("helios_gpu_memory_clock_hertz") / 1e6),
            "reasons": 1, "ecc_corrected": 0, "ecc_uncorrected": 0, **extra}


def table(count: int, **per_gpu: dict[str, object]) -> dict[int, dict[str, object]]:
    """`count` H200s; `gpu3={"lost": 1}` adds settings to GPU 3."""
    return {i: h200(i, **per_gpu.get(f"gpu{i}", {})) for i in range(count)}


def snapshot(generation: str, *gpus: int) -> dict[str, Any]:
    """The contract example snapshot with rank r on GPU gpus[r]."""
    snap = copy.deepcopy(StubEngine().snapshot)
    assert isinstance(snap, dict)
    snap["generation"] = generation
    snap["ranks"] = [{"rank": r, "gpu_uuid": uuid(g)} for r, g in enumerate(gpus)]
    return snap


class Rig:
    """A sidecar built as `serve` builds it, with NVML and the engine under the test's control."""

    def __init__(self, fake_libs: FakeLibs, state_dir: Path, **overrides: Any) -> None:
        self.engine = StubEngine()
        self.engine.status = 502  # not up yet
        config = Config(engine_url="http://engine.invalid", state_dir=state_dir, no_nvml=False,
                        **overrides)
        self.source = NvmlSource(str(fake_libs.full), gpu_timeout=0.5)
        self.sidecar: Sidecar = build(config, transport=httpx.MockTransport(self.engine),
                                      nvml=self.source.poll)

    def serve(self, snap: dict[str, Any] | None) -> None:
        """The engine answers with `snap` from now on; None: it stops answering."""
        if snap is None:
            self.engine.status = 502
        else:
            self.engine.status, self.engine.snapshot = 200, snap

    def up(self) -> dict[str, float]:
        """One poll cycle, then helios_gpu_up by "gpu/uuid" from a scrape."""
        asyncio.run(self.sidecar.loop.cycle())
        self.text = generate_latest(self.sidecar.registry)
        fams = families(self.text)
        up = fams["helios_gpu_up"].samples if "helios_gpu_up" in fams else []
        return {f"{s.labels['gpu']}/{s.labels['uuid']}": s.value for s in up}

    def ranks(self) -> dict[str, str]:
        """helios_gpu_rank_info of the last scrape: "gpu/uuid" -> "rank@generation"."""
        fams = families(self.text)
        info = fams["helios_gpu_rank_info"].samples if "helios_gpu_rank_info" in fams else []
        return {f"{s.labels['gpu']}/{s.labels['uuid']}":
                f"{s.labels['rank']}@{s.labels['generation']}" for s in info}

    def series_of(self, gpu: int) -> set[str]:
        return {s.name for m in families(self.text).values() for s in m.samples
                if s.labels.get("gpu") == str(gpu)}

    def close(self) -> None:
        self.sidecar.close()
        self.source.close()
        asyncio.run(self.sidecar.client.aclose())


@pytest.fixture
def rig(fake_libs: FakeLibs, tmp_path: Path) -> Iterator[Any]:
    made: list[Rig] = []

    def make(**overrides: Any) -> Rig:
        made.append(Rig(fake_libs, tmp_path / f"state{len(made)}", **overrides))
        return made[-1]

    yield make
    for r in made:
        r.close()


def key(i: int, u: str | None = None) -> str:
    return f"{i}/{uuid(i) if u is None else u}"


def test_eight_gpus_only_the_ranks_gpus_once_ranks_are_known(fake: FakeConfig, rig: Any) -> None:
    fake.write(count=8, gpus=table(8), driver="580.159.04")
    side = rig()
    # Before the engine ever answered nobody knows its GPUs: every GPU.
    assert side.up() == {key(i): 1.0 for i in range(8)}
    side.serve(snapshot("g-a", 2, 3))
    assert side.up() == {key(2): 1.0, key(3): 1.0}
    assert side.ranks() == {key(2): "0@g-a", key(3): "1@g-a"}
    # Every series of an unselected GPU is gone, not only helios_gpu_up.
    assert side.series_of(5) == set()
    assert "helios_gpu_power_limit_watts" in side.series_of(2)
    fams = families(side.text)
    assert fams["helios_gpu_power_watts"].samples[0].value == real("helios_gpu_power_watts")
    promtool_check_metrics(side.text)


def test_nvml_all_gpus_exports_every_gpu_with_the_rank_join(fake: FakeConfig, rig: Any) -> None:
    fake.write(count=8, gpus=table(8))
    side = rig(nvml_all_gpus=True)
    side.serve(snapshot("g-a", 2, 3))
    assert side.up() == {key(i): 1.0 for i in range(8)}
    assert side.ranks() == {key(2): "0@g-a", key(3): "1@g-a"}


@pytest.mark.parametrize("all_gpus", [False, True])
def test_lost_gpu_not_serving_a_rank_is_not_reported(fake: FakeConfig, rig: Any,
                                                     all_gpus: bool) -> None:
    fake.write(count=2, gpus=table(2))
    side = rig(nvml_all_gpus=all_gpus)
    side.serve(snapshot("g-a", 0))
    assert side.up() == ({key(0): 1.0, key(1): 1.0} if all_gpus else {key(0): 1.0})
    fake.write(count=2, gpus=table(2, gpu1={"lost": 1}))
    # Another workload's GPU: its own sidecar reports it, unless this one exports every GPU.
    assert side.up() == ({key(0): 1.0, key(1): 0.0} if all_gpus else {key(0): 1.0})


def test_lost_gpu_serving_a_rank_stays_down_through_outage_and_restart(fake: FakeConfig,
                                                                        rig: Any) -> None:
    fake.write(count=2, gpus=table(2))
    side = rig()
    side.serve(snapshot("g-a", 0))
    assert side.up() == {key(0): 1.0}
    fake.write(count=2, gpus=table(2, gpu0={"lost": 1}))
    assert side.up() == {key(0): 0.0}
    assert side.ranks() == {key(0): "0@g-a"}  # the alert can name the rank
    assert side.series_of(0) == {"helios_gpu_up", "helios_gpu_rank_info"}
    # The engine dies with its GPU: the last snapshot's ranks stay in force.
    side.serve(None)
    for _ in range(3):
        assert side.up() == {key(0): 0.0}
        assert side.ranks() == {key(0): "0@g-a"}
    # Restored on the other GPU: the new rank GPU, and the lost one still down (no rank now).
    side.serve(snapshot("g-b", 1))
    assert side.up() == {key(0): 0.0, key(1): 1.0}
    assert side.ranks() == {key(1): "0@g-b"}
    assert side.up() == {key(0): 0.0, key(1): 1.0}
    # The lost GPU answers again: it serves no rank, so it is dropped.
    fake.write(count=2, gpus=table(2))
    assert side.up() == {key(1): 1.0}
    promtool_check_metrics(side.text)


def test_rank_gpu_gone_from_the_device_list_stays_down(fake: FakeConfig, rig: Any) -> None:
    fake.write(count=8, gpus=table(8))
    side = rig()
    side.serve(snapshot("g-a", 6, 7))
    assert side.up() == {key(6): 1.0, key(7): 1.0}
    fake.write(count=7, gpus=table(7))  # GPU 7 fell off the bus: NVML counts 7
    assert side.up() == {key(6): 1.0, key(7): 0.0}
    assert side.ranks() == {key(6): "0@g-a", key(7): "1@g-a"}
    fake.write(count=6, gpus=table(6))  # and GPU 6 too (unrelated GPU 5 not reported)
    assert side.up() == {key(6): 0.0, key(7): 0.0}
    fake.write(count=8, gpus=table(8))
    assert side.up() == {key(6): 1.0, key(7): 1.0}


def test_whole_nvml_poll_failing_shows_only_rank_gpus_down(fake: FakeConfig, rig: Any) -> None:
    fake.write(count=8, gpus=table(8))
    side = rig()
    side.serve(snapshot("g-a", 0, 1))
    assert side.up() == {key(0): 1.0, key(1): 1.0}
    fake.write(count=8, gpus=table(8), error=1, init_error=9)  # the driver went away
    assert side.up() == {key(0): 0.0, key(1): 0.0}
    side.serve(None)
    assert side.up() == {key(0): 0.0, key(1): 0.0}
    fake.write(count=8, gpus=table(8))
    assert side.up() == {key(0): 1.0, key(1): 1.0}


def test_gpu_never_identified_is_shown_while_a_rank_gpu_is_unaccounted_for(
        fake: FakeConfig, rig: Any) -> None:
    # GPU 1 was lost before NVML could read its UUID.
    fake.write(count=2, gpus=table(2, gpu1={"lost": 1}))
    side = rig()
    side.serve(snapshot("g-a", 0, 1))  # rank 1's GPU is not among the identified ones
    assert side.up() == {key(0): 1.0, key(1, ""): 0.0}
    side.serve(snapshot("g-b", 0))  # every rank GPU identified: the unknown one is not ours
    assert side.up() == {key(0): 1.0}


def test_engine_without_ranks_means_every_gpu(fake: FakeConfig, rig: Any) -> None:
    fake.write(count=2, gpus=table(2))
    side = rig()
    side.serve(snapshot("g-a", 1))
    assert side.up() == {key(1): 1.0}
    bare = snapshot("g-b")
    del bare["ranks"]
    side.serve(bare)
    assert side.up() == {key(0): 1.0, key(1): 1.0}
