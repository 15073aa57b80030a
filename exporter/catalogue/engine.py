"""Families about the engine outside its snapshot: its pins, its own /metrics re-exported, and its
process and host from psutil (docs/gpu.md)."""

from __future__ import annotations

from exporter.catalogue.model import Family, Promise, Rows
from exporter.labels import PINS

H = "host"

FAMILIES: Rows = (
    Family("helios_engine_pin_ok", "gauge", ("pin",), "", help="1 while the engine matches the "
           "configured --expect-* pin: snapshot identity.image_digest / package / checkpoint, the "
           "number of ranks, the NVML enforced power limit of every GPU serving a rank; absent "
           "while unknown.", collector="pins", promised=Promise("4.2", 2),
           labels_doc=f"pin={'|'.join(PINS)}",
           source="one series per configured pin (section 2's `--expect-*`), on every poll where "
           "the engine answered: 1 while the engine matches it; absent while unknown"),
    Family("helios_engine_native_<name>", None, ("generation",), "as in the engine", help=None,
           collector="passthrough", promised=Promise("4.2"),
           labels_doc="generation (a histogram bucket also `le`)",
           source="an allow-listed family of the engine's `/metrics` (`<vendor>:<name>`), every "
           "engine label dropped; counters and histograms as the sum of the engine series' "
           "increases (exporter/sources/engine_metrics.py)"),
    Family("helios_host_memory_available_bytes", "gauge", (), "bytes", help="Host memory "
           "available without swapping, bytes (psutil virtual_memory().available; the node's, "
           "not the container's limit).", collector=H,
           source="psutil `virtual_memory().available` (the node's)"),
    Family("helios_host_memory_total_bytes", "gauge", (), "bytes", help="Host physical memory, "
           "bytes (psutil virtual_memory().total).", collector=H,
           source="psutil `virtual_memory().total`"),
    Family("helios_engine_process_up", "gauge", (), "", help="1 when the engine process (pid "
           "file or process name) was found at the latest poll.", collector=H,
           source="psutil: the process was found (with a pid file or process name configured)"),
    Family("helios_engine_process_resident_bytes", "gauge", (), "bytes", help="Resident memory "
           "of the engine process, bytes (psutil memory_info().rss).", collector=H,
           source="psutil `memory_info().rss`, while the engine is found"),
    Family("helios_engine_process_cpu_seconds_total", "counter", (), "seconds", help="CPU time "
           "of the engine process, user + system seconds (psutil cpu_times()).", collector=H,
           source="psutil `cpu_times()` user + system, while the engine is found"),
    Family("helios_engine_process_threads", "gauge", (), "threads", help="Threads of the engine "
           "process (psutil num_threads).", collector=H,
           source="psutil `num_threads()`, while the engine is found"),
    Family("helios_engine_process_start_time_seconds", "gauge", (), "unix seconds",
           help="Start time of the engine process, unix seconds (psutil create_time); a change "
           "is restart evidence.", collector=H,
           source="psutil `create_time()`, while the engine is found"),
)
