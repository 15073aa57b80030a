from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from exporter.config import Config
from exporter.cycle import pins
from exporter.cycle.pins import PinCheck, Pins
from exporter.labels import ErrorReason
from exporter.sidecar import build
from exporter.snapshot.model import Snapshot
from exporter.snapshot.parse import snapshot_from_obj
from exporter.sources.base import Result
from exporter.sources.gpu_report import GpuReport, GpuStats
from tests.helpers import StubEngine, contract_example

R0, R1 = "GPU-1f0c...", "GPU-77aa..."
SEED = Pins(image_digest="sha256:9f2c...", package="helios-2.14.0+47581cca",
            checkpoint="qwen3-next-w4a16-r3", ranks=2, power_limit_watts=300.0)


def snap_obj(mutate: Any = None) -> dict[str, Any]:
    obj = contract_example()
    if mutate is not None:
        mutate(obj)
    return obj


def snap(mutate: Any = None) -> Snapshot:
    return snapshot_from_obj(snap_obj(mutate))


def results(checks: tuple[PinCheck, ...]) -> dict[str, bool | None]:
    return {c.pin: c.ok for c in checks}


def test_only_configured_pins_are_checked() -> None:
    assert pins.check(Pins(), snap(), None) == ()
    (only,) = pins.check(Pins(ranks=2), snap(), None)
    assert only == PinCheck("ranks", 2, 2, True)


def test_the_seed_engine_matches_every_pin() -> None:
    checks = pins.check(SEED, snap(), {R0: 300.0, R1: 299.5, "GPU-other": 450.0})
    assert results(checks) == dict.fromkeys(
        ("image_digest", "package", "checkpoint", "ranks", "power_limit"), True)
    power = checks[-1]
    assert power.found == {R0: 300.0, R1: 299.5}  # only the GPUs serving a rank


def test_identity_mismatches_fail() -> None:
    def other(obj: dict[str, Any]) -> None:
        obj["identity"]["package"] = "helios-2.15.0"
        obj["identity"]["checkpoint"] = "qwen3-next-w8a16-r1"
        obj["ranks"] = obj["ranks"][:1]  # TP1
    checks = pins.check(SEED, snap(other), {R0: 350.0, R1: 300.0})
    assert results(checks) == {"image_digest": True, "package": False, "checkpoint": False,
                               "ranks": False, "power_limit": False}
    by_pin = {c.pin: c for c in checks}
    assert (by_pin["package"].expected, by_pin["package"].found) == (
        "helios-2.14.0+47581cca", "helios-2.15.0")
    assert by_pin["ranks"].found == 1
    assert by_pin["power_limit"].found == {R0: 350.0}


def test_power_limit_within_one_watt() -> None:
    p = Pins(power_limit_watts=300.0)
    assert results(pins.check(p, snap(), {R0: 301.0, R1: 299.0})) == {"power_limit": True}
    assert results(pins.check(p, snap(), {R0: 301.5, R1: 300.0})) == {"power_limit": False}


def test_unknown_inputs_give_no_result() -> None:
    # Engine did not answer: nothing is known.
    assert all(c.ok is None and c.found is None for c in pins.check(SEED, None, None))

    def bare(obj: dict[str, Any]) -> None:
        del obj["identity"]["checkpoint"], obj["ranks"]
    checks = results(pins.check(SEED, snap(bare), {R0: 300.0}))
    assert checks == {"image_digest": True, "package": True, "checkpoint": None, "ranks": None,
                      "power_limit": None}
    # NVML read one rank's GPU at the pin, not the other: unknown, not a pass.
    assert results(pins.check(Pins(power_limit_watts=300.0), snap(), {R0: 300.0, R1: None})) == {
        "power_limit": None}
    assert results(pins.check(Pins(power_limit_watts=300.0), snap(), None)) == {
        "power_limit": None}
    # ... but one known GPU off the pin is a failure already.
    assert results(pins.check(Pins(power_limit_watts=300.0), snap(), {R0: 250.0})) == {
        "power_limit": False}

    def no_ranks(obj: dict[str, Any]) -> None:
        obj["ranks"] = []
    assert results(pins.check(Pins(power_limit_watts=300.0, ranks=2), snap(no_ranks),
                              {R0: 300.0})) == {"ranks": False, "power_limit": None}


def test_identity_field_dropped_as_unusable_fails_the_pin() -> None:
    def spaced(obj: dict[str, Any]) -> None:
        obj["identity"]["package"] = "helios 2.14.0"
    (check,) = pins.check(Pins(package="helios-2.14.0+47581cca"), snap(spaced), None)
    assert check.ok is False and check.found == "(sent, not a valid label value)"


# -- through the sidecar: config -> poll loop -> /metrics and /status --------------------------
def gpu_report(limits: dict[str, float | None]) -> GpuReport:
    return GpuReport("550.54.15", tuple(
        GpuStats(index=i, uuid=uuid, up=True, power_limit_watts=watts)
        for i, (uuid, watts) in enumerate(limits.items())))


def sidecar_polls(tmp_path: Path, polls: list[tuple[Any, Result[GpuReport]]], **pinned: Any,
                  ) -> list[tuple[dict[str, float], list[dict[str, Any]]]]:
    """(pin_ok by pin, /status pins) after each poll of (snapshot, NVML result)."""
    engine = StubEngine()
    nvml_result = [polls[0][1]]
    config = Config(engine_url="http://engine.invalid", state_dir=tmp_path, **pinned)
    sidecar = build(config, transport=httpx.MockTransport(engine), nvml=lambda: nvml_result[0])
    out = []

    async def run() -> None:
        for snapshot, nvml in polls:
            engine.snapshot, nvml_result[0] = snapshot, nvml
            await sidecar.loop.cycle()
            pin_ok = {s.labels["pin"]: s.value for fam in sidecar.registry.collect()
                      for s in fam.samples if s.name == "helios_engine_pin_ok"}
            out.append((pin_ok, sidecar.status()["pins"]))
        await sidecar.client.aclose()

    asyncio.run(run())
    sidecar.close()
    return out


def ok(report: GpuReport) -> Result[GpuReport]:
    return Result(report, 0.0, 0.0)


def test_pins_are_exported_and_shown_in_status(tmp_path: Path) -> None:
    def drifted(obj: dict[str, Any]) -> None:
        obj["identity"]["package"] = "helios-2.15.0"
        obj["ranks"] = obj["ranks"][:1]
    nvml_down: Result[GpuReport] = Result(None, 0.0, 0.0, ErrorReason.LIBRARY, "no driver")
    polls = [
        (contract_example(), ok(gpu_report({R0: 300.0, R1: 300.0, "GPU-spare": 450.0}))),
        (snap_obj(drifted), ok(gpu_report({R0: 350.0, R1: 300.0}))),
        (contract_example(), nvml_down),  # power limits unknown this poll
        (b"not json", ok(gpu_report({R0: 300.0, R1: 300.0}))),  # engine unknown this poll
    ]
    results = sidecar_polls(
        tmp_path, polls, no_nvml=False, expect_package="helios-2.14.0+47581cca",
        expect_checkpoint="qwen3-next-w4a16-r3", expect_ranks=2, expect_power_limit_watts=300.0)
    (first, status), (second, _), (third, _), (fourth, last_status) = results
    assert first == {"package": 1.0, "checkpoint": 1.0, "ranks": 1.0, "power_limit": 1.0}
    assert second == {"package": 0.0, "checkpoint": 1.0, "ranks": 0.0, "power_limit": 0.0}
    assert third == {"package": 1.0, "checkpoint": 1.0, "ranks": 1.0}
    assert fourth == {}
    assert status == [
        {"pin": "package", "expected": "helios-2.14.0+47581cca",
         "found": "helios-2.14.0+47581cca", "ok": True},
        {"pin": "checkpoint", "expected": "qwen3-next-w4a16-r3", "found": "qwen3-next-w4a16-r3",
         "ok": True},
        {"pin": "ranks", "expected": 2, "found": 2, "ok": True},
        {"pin": "power_limit", "expected": 300.0, "found": {R0: 300.0, R1: 300.0}, "ok": True},
    ]
    assert [p["ok"] for p in last_status] == [None] * 4


def test_no_pin_configured_no_series(tmp_path: Path) -> None:
    (pin_ok, status), = sidecar_polls(tmp_path, [(contract_example(), ok(gpu_report({})))],
                                      no_nvml=False)
    assert pin_ok == {} and status == []
