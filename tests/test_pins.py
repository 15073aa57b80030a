from __future__ import annotations

from typing import Any

from exporter import pins
from exporter.pins import PinCheck, Pins
from exporter.snapshot import Snapshot, snapshot_from_obj
from tests.helpers import contract_example

R0, R1 = "GPU-1f0c...", "GPU-77aa..."
SEED = Pins(image_digest="sha256:9f2c...", package="helios-2.14.0+47581cca",
            checkpoint="qwen3-next-w4a16-r3", ranks=2, power_limit_watts=300.0)


def snap(mutate: Any = None) -> Snapshot:
    obj = contract_example()
    if mutate is not None:
        mutate(obj)
    return snapshot_from_obj(obj)


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
