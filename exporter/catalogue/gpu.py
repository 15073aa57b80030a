"""Families of the GPU collector: NVML, per GPU serving the engine (docs/gpu.md)."""

from __future__ import annotations

from exporter.catalogue.model import Family, Promise, Rows
from exporter.sources.gpu_report import ECC_ERROR_TYPES

L = ("gpu", "uuid")
GPU = Promise("4.4")
C = "gpu"

FAMILIES: Rows = (
    Family("helios_gpu_up", "gauge", L, "", help="1 when NVML answered for this GPU at the "
           "latest poll; 0 when it is lost, hung or the NVML poll failed.", collector=C,
           promised=GPU, source="1 when NVML answered for the GPU, 0 when it is lost, hung or the "
           "NVML poll failed"),
    Family("helios_gpu_memory_used_bytes", "gauge", L, "bytes", help="GPU memory in use, bytes "
           "(NVML nvmlDeviceGetMemoryInfo .used).", collector=C, promised=GPU,
           source="`nvmlDeviceGetMemoryInfo` `.used`"),
    Family("helios_gpu_memory_total_bytes", "gauge", L, "bytes", help="GPU memory installed, "
           "bytes (NVML nvmlDeviceGetMemoryInfo .total).", collector=C, promised=GPU,
           source="`nvmlDeviceGetMemoryInfo` `.total`"),
    Family("helios_gpu_utilization_ratio", "gauge", L, "ratio", help="Fraction of the last "
           "sample period a kernel ran, 0-1 (NVML nvmlDeviceGetUtilizationRates .gpu / 100).",
           collector=C, promised=GPU,
           source="`nvmlDeviceGetUtilizationRates` `.gpu` / 100: 0 to 1"),
    Family("helios_gpu_power_watts", "gauge", L, "watts", help="GPU board power draw, watts "
           "(NVML nvmlDeviceGetPowerUsage mW / 1000).", collector=C, promised=GPU,
           source="`nvmlDeviceGetPowerUsage` mW / 1000"),
    Family("helios_gpu_power_limit_watts", "gauge", L, "watts", help="Enforced GPU power limit, "
           "watts (NVML nvmlDeviceGetEnforcedPowerLimit mW / 1000).", collector=C, promised=GPU,
           source="`nvmlDeviceGetEnforcedPowerLimit` mW / 1000"),
    Family("helios_gpu_temperature_celsius", "gauge", L, "celsius", help="GPU die temperature, "
           "degrees Celsius (NVML nvmlDeviceGetTemperatureV, GPU sensor).", collector=C,
           promised=GPU, source="`nvmlDeviceGetTemperatureV` (GPU sensor)"),
    Family("helios_gpu_sm_clock_hertz", "gauge", L, "hertz", help="Current SM clock, hertz "
           "(NVML nvmlDeviceGetClockInfo NVML_CLOCK_SM MHz * 1e6).", collector=C,
           source="`nvmlDeviceGetClockInfo(NVML_CLOCK_SM)` MHz x 10^6"),
    Family("helios_gpu_memory_clock_hertz", "gauge", L, "hertz", help="Current memory clock, "
           "hertz (NVML nvmlDeviceGetClockInfo NVML_CLOCK_MEM MHz * 1e6).", collector=C,
           source="`nvmlDeviceGetClockInfo(NVML_CLOCK_MEM)` MHz x 10^6"),
    Family("helios_gpu_energy_joules_total", "counter", L, "joules", help="GPU energy since the "
           "driver was loaded, joules (NVML nvmlDeviceGetTotalEnergyConsumption mJ / 1000).",
           collector=C, promised=GPU,
           source="`nvmlDeviceGetTotalEnergyConsumption` mJ / 1000, since the driver was loaded"),
    Family("helios_gpu_throttle_reason_active", "gauge", (*L, "reason"), "", help="1 while the "
           "clock-event reason holds clocks down (NVML nvmlDeviceGetCurrentClocksEventReasons "
           "bitmask; unknown bits -> other).", collector=C,
           source="`nvmlDeviceGetCurrentClocksEventReasons` bitmask, one 0/1 series per reason "
           "(docs/gpu.md)"),
    Family("helios_gpu_ecc_errors_total", "counter", (*L, "error_type"), "errors", help="ECC "
           "memory errors since the driver was loaded (NVML nvmlDeviceGetTotalEccErrors, "
           "volatile counter); absent when ECC is off or unsupported.", collector=C,
           labels_doc=f"gpu, uuid, error_type={'|'.join(ECC_ERROR_TYPES)}",
           source="`nvmlDeviceGetTotalEccErrors` (volatile), since the driver was loaded"),
    Family("helios_gpu_info", "gauge", (*L, "name", "driver_version"), "", help="GPU model and "
           "driver version (NVML nvmlDeviceGetName, nvmlSystemGetDriverVersion, sanitised); "
           "always 1.", collector=C,
           source="always 1: `nvmlDeviceGetName`, `nvmlSystemGetDriverVersion`, sanitised"),
    Family("helios_gpu_rank_info", "gauge", (*L, "rank", "generation"), "", help="Engine rank "
           "running on this GPU (snapshot ranks[].gpu_uuid matched to the NVML UUID); always 1.",
           collector=C, source="always 1: snapshot `ranks[].gpu_uuid` joined to the NVML UUID"),
)
