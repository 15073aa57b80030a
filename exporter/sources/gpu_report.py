"""What one NVML poll reports, in base units, and the closed sets and string bounds of its labels.

Kept apart from the NVML source (exporter/sources/nvml.py) so that the GPU collector and its tests
need neither pynvml nor a driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from exporter.labels import ErrorReason

# Closed label set of helios_gpu_throttle_reason_active{reason}, from the clocks-event bitmask
# (nvml.h nvmlClocksEventReason*). Bits not listed here are reported as `other`.
THROTTLE_BITS: Final = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
THROTTLE_REASONS: Final = (*(name for _, name in THROTTLE_BITS), "other")
ECC_ERROR_TYPES: Final = ("corrected", "uncorrected")

_LABEL_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ._:-()/+,@#"
)


def sanitize(text: str | None, limit: int = 64) -> str:
    """Driver strings as bounded label values: printable ASCII subset, at most `limit` chars."""
    if not text:
        return "unknown"
    cleaned = "".join(c if c in _LABEL_CHARS else "_" for c in text[: limit * 4]).strip()
    return cleaned[:limit].rstrip() or "unknown"


def throttle_reasons(mask: int) -> tuple[str, ...]:
    """Active reasons of a clocks-event bitmask, in THROTTLE_REASONS order."""
    active = [name for bit, name in THROTTLE_BITS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_BITS:
        known |= bit
    if mask & ~known:
        active.append("other")
    return tuple(active)


@dataclass(frozen=True, slots=True)
class GpuStats:
    """One GPU at one poll, in base units; `None` = not supported / not readable this poll."""

    index: int
    uuid: str  # "" when the GPU was never readable since the sidecar started
    up: bool
    down_reason: ErrorReason | None = None  # gpu_lost, hung or other when not up
    name: str | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    utilization_ratio: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None  # enforced limit
    energy_joules: float | None = None  # since the driver was loaded
    temperature_celsius: float | None = None
    sm_clock_hertz: float | None = None
    memory_clock_hertz: float | None = None
    throttle_reasons: tuple[str, ...] | None = None  # active ones; () = none active
    ecc_corrected: int | None = None  # volatile: since the driver was loaded
    ecc_uncorrected: int | None = None


@dataclass(frozen=True, slots=True)
class GpuReport:
    driver_version: str | None
    gpus: tuple[GpuStats, ...]


