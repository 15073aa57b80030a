"""GPU series from the latest NVML poll, joined to engine ranks from the latest snapshot, e.g.

    helios_gpu_up{gpu="0",uuid="GPU-1f0c..."} 1.0
    helios_gpu_memory_used_bytes{gpu="0",uuid="GPU-1f0c..."} 1.073741824e+10
    helios_gpu_power_limit_watts{gpu="0",uuid="GPU-1f0c..."} 300.0
    helios_gpu_energy_joules_total{gpu="0",uuid="GPU-1f0c..."} 123456.789
    helios_gpu_throttle_reason_active{gpu="0",reason="sw_power_cap",uuid="GPU-1f0c..."} 1.0
    helios_gpu_info{driver_version="550.54.15",gpu="0",name="NVIDIA H100 80GB HBM3",uuid="..."} 1.0
    helios_gpu_rank_info{generation="g-...",gpu="0",rank="0",uuid="GPU-1f0c..."} 1.0

Only the GPUs of the poll loop's `GpuSelection` are rendered: those serving the engine's ranks
(every GPU until ranks are known, or with --nvml-all-gpus; exporter/cycle/gpu_selection.py). A GPU that
is lost or hung has `helios_gpu_up 0` and no measured series (its rank join stays, so an alert can
name the rank). When the whole NVML poll fails (hung driver, driver unloaded), every GPU shown
before is shown with `helios_gpu_up 0`; the reason is in `helios_exporter_source_up{source="nvml"}`
/ `..._errors_total`. Values are polled in the background (every poll interval), not read at
scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import Metric

from exporter.collectors.families import counter, gauge
from exporter.cycle.gpu_selection import GpuSelection
from exporter.snapshot.model import Snapshot
from exporter.sources.gpu_report import THROTTLE_REASONS, GpuStats

# The plain per-GPU gauges: each is the GpuStats attribute of its name without `helios_gpu_`.
_GAUGES = ("helios_gpu_memory_used_bytes", "helios_gpu_memory_total_bytes",
           "helios_gpu_utilization_ratio", "helios_gpu_power_watts", "helios_gpu_power_limit_watts",
           "helios_gpu_temperature_celsius", "helios_gpu_sm_clock_hertz",
           "helios_gpu_memory_clock_hertz")


class GpuCollector:
    def __init__(
        self,
        selection: Callable[[], GpuSelection],
        snapshot: Callable[[], Snapshot | None],
    ) -> None:
        self._selection = selection
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        selected = self._selection()
        if selected.gpus:
            yield from _render(selected.gpus, selected.driver_version, self._snapshot())


def _render(gpus: tuple[GpuStats, ...], driver: str | None,
            snap: Snapshot | None) -> Iterator[Metric]:
    up = gauge("helios_gpu_up")
    for g in gpus:
        up.add_metric([str(g.index), g.uuid], 1.0 if g.up else 0.0)
    yield up
    live = [g for g in gpus if g.up]
    for name in _GAUGES:
        m = gauge(name)
        for g in live:
            value = getattr(g, name.removeprefix("helios_gpu_"))
            if value is not None:
                m.add_metric([str(g.index), g.uuid], float(value))
        if m.samples:
            yield m
    energy = counter("helios_gpu_energy_joules_total")
    for g in live:
        if g.energy_joules is not None:
            energy.add_metric([str(g.index), g.uuid], g.energy_joules)
    if energy.samples:
        yield energy
    throttle = gauge("helios_gpu_throttle_reason_active")
    for g in live:
        if g.throttle_reasons is not None:
            for reason in THROTTLE_REASONS:
                active = 1.0 if reason in g.throttle_reasons else 0.0
                throttle.add_metric([str(g.index), g.uuid, reason], active)
    if throttle.samples:
        yield throttle
    ecc = counter("helios_gpu_ecc_errors_total")
    for g in live:
        for error_type, value in (("corrected", g.ecc_corrected),
                                  ("uncorrected", g.ecc_uncorrected)):
            if value is not None:
                ecc.add_metric([str(g.index), g.uuid, error_type], value)
    if ecc.samples:
        yield ecc
    info = gauge("helios_gpu_info")
    for g in live:
        info.add_metric([str(g.index), g.uuid, g.name or "unknown", driver or "unknown"], 1.0)
    if info.samples:
        yield info
    yield from _ranks(gpus, snap)


def _ranks(gpus: tuple[GpuStats, ...], snap: Snapshot | None) -> Iterator[Metric]:
    if snap is None or not snap.ranks:
        return
    by_uuid = {g.uuid: g for g in gpus if g.uuid}
    m = gauge("helios_gpu_rank_info")
    for rank in snap.ranks:
        g = by_uuid.get(rank.gpu_uuid)
        if g is not None:
            m.add_metric([str(g.index), g.uuid, str(rank.rank), snap.generation], 1.0)
    if m.samples:
        yield m
