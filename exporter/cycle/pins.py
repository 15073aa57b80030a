"""Identity pins: does the engine being measured match what the run was set up with?

An experiment is only comparable with its baseline when it ran the pinned image, package and
checkpoint, with the pinned number of ranks (TP2) and on GPUs at the pinned power limit. Each
configured pin (`--expect-*`) is checked at every poll against what that poll saw; the result is
`helios_engine_pin_ok{pin}`, and /status shows the expected and found values.

A pin whose inputs are unknown this poll (the engine did not answer, the snapshot lacks the field,
NVML did not read a rank's GPU) has no result (`ok` None): the metric is absent rather than a
guess. One exception: an identity field the snapshot sent but that cannot be a label value was
dropped (snapshot.dropped_fields); a pin is always a valid label value (config checks it), so the
two cannot be equal and the pin fails.

`power_limit` compares the enforced power limit (NVML) of every GPU serving a rank of the engine
(the GPUs whose UUIDs the snapshot's `ranks` list) with the pin, within POWER_LIMIT_TOLERANCE_WATTS:
NVML reports milliwatts and `nvidia-smi -pl` sets whole watts. One GPU known to be off the pin is a
failure even while another rank's GPU is unread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from exporter.labels import PINS
from exporter.snapshot.model import Snapshot
from exporter.sources.gpu_report import GpuReport

POWER_LIMIT_TOLERANCE_WATTS: Final = 1.0
IDENTITY_PINS: Final = ("image_digest", "package", "checkpoint")

Found = str | int | float | dict[str, float | None] | None


@dataclass(frozen=True, slots=True)
class Pins:
    """The configured pins; None = not pinned."""

    image_digest: str | None = None
    package: str | None = None
    checkpoint: str | None = None
    ranks: int | None = None
    power_limit_watts: float | None = None

    def expected(self) -> dict[str, str | int | float]:
        """Configured pins by `pin` label value, in the closed set's order."""
        values: dict[str, str | int | float | None] = {
            "image_digest": self.image_digest,
            "package": self.package,
            "checkpoint": self.checkpoint,
            "ranks": self.ranks,
            "power_limit": self.power_limit_watts,
        }
        return {pin: value for pin in PINS if (value := values[pin]) is not None}


@dataclass(frozen=True, slots=True)
class PinCheck:
    pin: str
    expected: str | int | float
    found: Found  # what this poll saw; None when unknown
    ok: bool | None  # None: unknown this poll (no metric)


def check(
    pins: Pins, snap: Snapshot | None, power_limits: Mapping[str, float | None] | None
) -> tuple[PinCheck, ...]:
    """Every configured pin against this poll's snapshot (None: the engine did not answer) and
    the enforced power limit of each GPU NVML read this poll, by UUID (None: no NVML reading)."""
    out: list[PinCheck] = []
    for pin, expected in pins.expected().items():
        if pin in IDENTITY_PINS:
            out.append(_identity(pin, str(expected), snap))
        elif pin == "ranks":
            ranks = None if snap is None or snap.ranks is None else len(snap.ranks)
            out.append(PinCheck(pin, expected, ranks, None if ranks is None else ranks == expected))
        else:
            out.append(_power_limit(float(expected), snap, power_limits))
    return tuple(out)


def _identity(pin: str, expected: str, snap: Snapshot | None) -> PinCheck:
    if snap is None:
        return PinCheck(pin, expected, None, None)
    if f"identity.{pin}" in snap.dropped_fields:
        return PinCheck(pin, expected, "(sent, not a valid label value)", False)
    found = None if snap.identity is None else getattr(snap.identity, pin)
    return PinCheck(pin, expected, found, None if found is None else found == expected)


def _power_limit(
    expected: float, snap: Snapshot | None, power_limits: Mapping[str, float | None] | None
) -> PinCheck:
    if snap is None or not snap.ranks:
        return PinCheck("power_limit", expected, None, None)  # no rank GPU to compare
    limits = power_limits or {}
    found = {r.gpu_uuid: limits.get(r.gpu_uuid) for r in snap.ranks}
    known = [w for w in found.values() if w is not None]
    off = any(abs(w - expected) > POWER_LIMIT_TOLERANCE_WATTS for w in known)
    ok = False if off else (True if len(known) == len(found) else None)
    return PinCheck("power_limit", expected, found, ok)


def power_limits(report: GpuReport | None) -> dict[str, float | None] | None:
    """Enforced power limit by GPU UUID from one NVML poll (None: no report this poll); a GPU
    that is down or does not report its limit maps to None."""
    if report is None:
        return None
    return {g.uuid: g.power_limit_watts if g.up else None for g in report.gpus if g.uuid}
