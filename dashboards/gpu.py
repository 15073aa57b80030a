"""Helios GPU dashboard: NVML health, power against the enforced limit, memory, load, clocks."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import units

from dashboards.lib import (
    UP_DOWN,
    Layout,
    Scope,
    Settings,
    base_dashboard,
    datasource_variable,
    q,
    stat_panel,
    states,
    steps,
    table_panel,
    timeline_panel,
    ts_panel,
)

UID = "helios-gpu"
FILE = "helios-gpu.json"

LEGEND = "GPU {{gpu}} {{instance}}"


def build(settings: Settings) -> db.Dashboard:
    s = Scope(settings.cluster_label)
    G = s.sel(gpu=True)
    limit = settings.power_limit_ratio
    d = (base_dashboard(
        "Helios GPUs", UID,
        "The GPUs beside each engine as NVML reports them: lost GPUs, power against the enforced "
        "limit, memory, utilisation, temperature, clocks and throttle reasons, and which GPU "
        "serves which engine rank.",
        ["gpu"])
        .with_variable(datasource_variable())
        .with_variable(s.cluster_variable("helios_gpu_up"))
        .with_variable(s.job_variable("helios_gpu_up"))
        .with_variable(s.instance_variable("helios_gpu_up", multi=True))
        .with_variable(s.variable(
            "gpu", "GPU", "helios_gpu_up", multi=True, matchers=['job=~"$job"', 'instance=~"$instance"'],
            description="GPU index on the host."))
        .annotation(s.generation_annotation())
        .annotation(s.restore_window_annotation(settings.window_memory)))
    grid = Layout(d)

    grid.row("Health")
    grid.add(stat_panel(
        "GPUs answering NVML",
        "One tile per GPU: up when NVML answered at the latest poll, LOST when the GPU is lost "
        "(NVML_ERROR_GPU_IS_LOST), hung, or the whole NVML poll failed. A LOST GPU fires "
        "HeliosGpuLost: the engine rank on it is gone; drain the engine and replace the node.",
        units.NoUnit, q(f"helios_gpu_up{G}", LEGEND, instant=True),
        mappings=states(("1", "up", "green"), ("0", "LOST", "red")), text_mode="value_and_name"),
        10, 5)
    grid.add(stat_panel(
        "Lost GPUs",
        "Number of GPUs not answering NVML per sidecar. Should be 0.",
        units.Short, q(f"sum by ({s.by()}) (1 - helios_gpu_up{G})", "{{instance}}",
                       instant=True),
        thresholds=steps((None, "green"), (1, "red"))), 4, 5)
    grid.add(timeline_panel(
        "NVML source",
        "Whether the sidecar's NVML poll succeeds. Down = driver unloaded, library missing or a "
        "hung call (see the source errors on the restore dashboard); all GPUs then show LOST.",
        q("helios_exporter_source_up" + s.sel('source="nvml"'), "{{instance}}"),
        mappings=UP_DOWN), 10, 5)
    grid.add(table_panel(
        "Which GPU serves which rank",
        "Engine ranks (from the engine snapshot) matched to GPUs by UUID, with the GPU model "
        "and driver. A rank missing here runs on a GPU NVML does not see. Use it to find the "
        "rank behind a lost or throttled GPU.",
        units.NoUnit,
        q(f"helios_gpu_rank_info{G}\n* on ({s.by('gpu', 'uuid')}) group_left (name, "
          f"driver_version)\nhelios_gpu_info{G}", "", instant=True, table_format=True),
        hide=("Time", "__name__", "Value"), no_value="no rank matched to a GPU"), 24, 6)

    grid.row("Power")
    grid.add(ts_panel(
        "Power against the enforced limit",
        "Board power draw and the enforced power limit per GPU, watts. Draw pinned at the "
        "limit means the GPU is power-capped (sw_power_cap throttling): expect lower clocks "
        "and throughput.",
        units.Watt,
        q(f"helios_gpu_power_watts{G}", "draw " + LEGEND, ref="A"),
        q(f"helios_gpu_power_limit_watts{G}", "limit " + LEGEND, ref="B"),
        min_val=0), 12, 8)
    grid.add(ts_panel(
        "Power as a share of the limit",
        f"Power draw / enforced limit. At or above {limit:.0%} on average fires "
        f"HeliosGpuPowerAtLimit: check cooling, the configured limit and the workload.",
        units.PercentUnit,
        q(f"helios_gpu_power_watts{G}\n/\n(helios_gpu_power_limit_watts{G} > 0)", LEGEND),
        thresholds=steps((None, "green"), (limit, "red")), min_val=0, max_val=1), 6, 8)
    grid.add(ts_panel(
        "Average power from energy",
        "Energy counter rate (joules per second = watts) over the rate interval: the average "
        "draw between samples, which short power spikes do not distort.",
        units.Watt,
        q(f"rate(helios_gpu_energy_joules_total{G}[$__rate_interval])", LEGEND),
        min_val=0), 6, 8)

    grid.row("Memory and load")
    grid.add(ts_panel(
        "GPU memory",
        "GPU memory used and installed, bytes. Used close to total leaves the engine no room "
        "for KV cache growth.",
        units.BytesIEC,
        q(f"helios_gpu_memory_used_bytes{G}", "used " + LEGEND, ref="A"),
        q(f"helios_gpu_memory_total_bytes{G}", "total " + LEGEND, ref="B"),
        min_val=0), 8, 8)
    grid.add(ts_panel(
        "Utilisation",
        "Share of the sample period a kernel ran (NVML utilization .gpu). Near 0 on a serving "
        "engine = it gets no traffic or waits on something else.",
        units.PercentUnit, q(f"helios_gpu_utilization_ratio{G}", LEGEND),
        min_val=0, max_val=1), 8, 8)
    grid.add(ts_panel(
        "Temperature",
        "GPU die temperature. Sustained high temperature brings thermal throttling (see the "
        "throttle reasons): check cooling.",
        units.Celsius, q(f"helios_gpu_temperature_celsius{G}", LEGEND),
        thresholds=steps((None, "green"), (80, "orange"), (90, "red"))), 8, 8)

    grid.row("Clocks and throttling")
    grid.add(ts_panel(
        "SM clock",
        "Current streaming-multiprocessor clock. Drops under load go with an active throttle "
        "reason.",
        units.Hertz, q(f"helios_gpu_sm_clock_hertz{G}", LEGEND), min_val=0), 8, 8)
    grid.add(ts_panel(
        "Memory clock",
        "Current memory clock. A memory clock below its usual value under load slows decoding, "
        "which is memory-bound: look for a thermal or power throttle reason.",
        units.Hertz, q(f"helios_gpu_memory_clock_hertz{G}", LEGEND), min_val=0), 8, 8)
    grid.add(ts_panel(
        "ECC errors",
        "ECC memory errors per second by type (volatile counters). Any uncorrected error can "
        "corrupt results: drain the engine and have the GPU checked.",
        units.CountsPerSecond,
        q(f"sum by ({s.by('gpu', 'error_type')}) "
          f"(rate(helios_gpu_ecc_errors_total{G}[$__rate_interval]))",
          "{{error_type}} " + LEGEND),
        min_val=0, no_value="ECC off or unsupported"), 8, 8)
    grid.add(timeline_panel(
        "Throttle reasons",
        "Clock-event reasons while active, per GPU: sw_power_cap (at the power limit), "
        "hw_slowdown / hw_thermal_slowdown / sw_thermal_slowdown (heat), hw_power_brake_slowdown "
        "(external power brake), gpu_idle (harmless). Empty = nothing holds the clocks down.",
        q(f"helios_gpu_throttle_reason_active{G} == 1", "{{reason}} " + LEGEND),
        mappings=states(("1", "active", "orange")), no_value="no throttling"), 24, 8)
    return d
