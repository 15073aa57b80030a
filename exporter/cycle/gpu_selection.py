"""Which GPUs /metrics shows: the ones serving the engine's ranks, carried from poll to poll.

NVML shows a sidecar every GPU of its node, but the sidecar speaks for one engine. Exporting every
GPU would make each sidecar on an eight-GPU node raise the same `HeliosGpuLost`, and duplicate
dcgm-exporter for GPUs that belong to other workloads. So, unless `--nvml-all-gpus`:

- The ranks in force are those of the engine's last good snapshot (`EnginePicture.snapshot`):
  they stay in force while the engine is unreachable, and a new generation's snapshot replaces
  them. While no snapshot has listed ranks (the engine never answered since the sidecar started,
  or it does not report `ranks`), every GPU is exported.
- A GPU is exported when its UUID is one the ranks list.
- A GPU that served a rank and is down (lost, hung, the whole NVML poll failed, or gone from the
  device list) stays exported with `helios_gpu_up 0`, even after the engine came back on other
  GPUs, until NVML answers for it again: the lost GPU is exactly what on-call must see.
- A GPU NVML never identified (lost before its UUID was read, `uuid=""`) is exported while some
  rank's UUID was not found among the identified GPUs: it may be that rank's GPU.

Pure: `advance` is a function of the previous selection, the ranks in force and this cycle's NVML
report; the poll loop carries the result in the `View`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from exporter.snapshot.model import Rank
from exporter.sources.gpu_report import GpuReport, GpuStats


@dataclass(frozen=True, slots=True)
class GpuSelection:
    """The GPUs to render after one cycle, and what the next cycle needs to know."""

    gpus: tuple[GpuStats, ...] = ()  # exported, by (index, uuid); down ones carry the last uuid
    driver_version: str | None = None  # of the latest successful NVML poll
    serving: frozenset[str] | None = None  # UUIDs the ranks in force list; None: every GPU
    held: frozenset[str] = frozenset()  # down GPUs that served a rank and are listed no more


def advance(
    prev: GpuSelection,
    ranks: Iterable[Rank] | None,
    report: GpuReport | None,
    *,
    all_gpus: bool = False,
) -> GpuSelection:
    """The selection after a cycle whose NVML poll gave `report` (None: the poll failed) and
    whose engine's last good snapshot listed `ranks` (None or empty: not known)."""
    uuids = frozenset(r.gpu_uuid for r in ranks or ())
    serving = None if all_gpus or not uuids else uuids
    watched = serving or frozenset()
    watched |= (prev.serving or frozenset()) | prev.held
    if report is None:  # the whole poll failed: every GPU shown before is down
        seen = tuple(_down(g) for g in prev.gpus)
        driver = prev.driver_version
    else:
        # A watched GPU gone from the device list is down, not forgotten.
        listed = {g.uuid for g in report.gpus if g.uuid}
        gone = (_down(g) for g in prev.gpus if g.uuid in watched and g.uuid not in listed)
        seen = (*report.gpus, *gone)
        driver = report.driver_version
    if serving is None:
        return GpuSelection(_ordered(seen), driver)
    unmatched = serving - {g.uuid for g in seen if g.uuid}
    kept = tuple(
        g for g in seen
        if g.uuid in serving
        or (not g.up and g.uuid in watched)
        or (not g.uuid and unmatched)
    )
    held = frozenset(g.uuid for g in kept if g.uuid and g.uuid not in serving)
    return GpuSelection(_ordered(kept), driver, serving, held)


def _down(g: GpuStats) -> GpuStats:
    return g if not g.up else GpuStats(index=g.index, uuid=g.uuid, up=False)


def _ordered(gpus: Iterable[GpuStats]) -> tuple[GpuStats, ...]:
    # One entry per (index, uuid): a down copy never shadows a live reading of the same GPU.
    unique: dict[tuple[int, str], GpuStats] = {}
    for g in gpus:
        unique.setdefault((g.index, g.uuid), g)
    return tuple(unique[key] for key in sorted(unique))

