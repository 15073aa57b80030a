"""Optional: dcgm-exporter's GPU series with the engine rank and generation beside them.

Rendered into alerts/optional/helios-dcgm-recording.yaml, which no default setup loads. For
users of the NVIDIA GPU Operator (dcgm-exporter, label `UUID`): `helios_gpu_rank_info` (labels
gpu, uuid, rank, generation) names the rank each GPU serves; joined on the GPU UUID, every
DCGM field below gets `rank`, `generation` and the sidecar's `helios_job`/`helios_instance`, in
base units. Each GPU must be reported by one sidecar (a GPU listed by two engines fails the
join, visibly, in Prometheus's rule health).
"""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q
from alerts.rules import Record

GROUP = "helios-dcgm.rules"
RANKS = "helios:gpu_rank_info:by_uuid"
# (DCGM field, recording rule, factor to the base unit, meaning)
FIELDS = (
    ("DCGM_FI_DEV_GPU_UTIL", "helios:dcgm_gpu_utilization:ratio", " / 100", "GPU utilization, 0-1"),
    ("DCGM_FI_DEV_POWER_USAGE", "helios:dcgm_power_usage:watts", "", "power draw, watts"),
    ("DCGM_FI_DEV_FB_USED", "helios:dcgm_framebuffer_used:bytes", " * 1048576",
     "framebuffer memory used, bytes (DCGM reports MiB)"),
    ("DCGM_FI_DEV_GPU_TEMP", "helios:dcgm_gpu_temperature:celsius", "", "GPU temperature, degrees C"),
)


def records(c: Config) -> list[Record]:
    q = Q(c)
    on = f"on ({c.cluster_label}, UUID)"
    copied = "rank, generation, helios_job, helios_instance"
    ranks = q.sel("helios_gpu_rank_info")
    for target, source in (("UUID", "uuid"), ("helios_job", "job"), ("helios_instance", "instance")):
        ranks = f'label_replace(\n  {ranks},\n  "{target}", "$1", "{source}", "(.*)"\n)'
    rules = [
        Record(
            RANKS,
            GROUP,
            ranks,
            "`helios_gpu_rank_info` with the GPU UUID copied to dcgm-exporter's label `UUID` and "
            "the sidecar's job and instance to `helios_job` and `helios_instance`.",
        )
    ]
    for field, name, factor, meaning in FIELDS:
        rules.append(
            Record(
                name,
                GROUP,
                f"{field}{{{c.dcgm_selector}}}{factor}\n* {on} group_left ({copied})\n"
                f"{q.sel(RANKS)}",
                f"dcgm-exporter `{field}`: {meaning}, per GPU with the engine `rank` and "
                "`generation` it serves.",
            )
        )
    return rules
