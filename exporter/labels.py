"""Every label value the sidecar may export, declared in one place.

Label values come from these closed sets, from a GPU index bounded by the hardware, or from a
generation / identity string that passed the snapshot schema's pattern. Nothing else from engine
input reaches a label.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

SLAB_KINDS: Final = ("row", "page")
PRESSURES: Final = ("row", "page")
EVICTION_OUTCOMES: Final = ("evicted", "pinned", "non_durable", "no_eligible")
MISS_REASONS: Final = (
    "no_prefix",
    "key_mismatch",
    "no_checkpoint",
    "not_durable",
    "evicted",
    "too_short",
    "other",
)
# `helios_experiment_phase_*{phase}`: a phase name is validated against this pattern when it is
# begun (422 otherwise), like `generation` against the snapshot schema's, and only open phases are
# exported (at most MAX_OPEN_PHASES of them), so the label stays bounded.
PHASE_NAME_PATTERN: Final = r"^[A-Za-z0-9._/-]{1,64}$"
SOURCES: Final = ("engine_snapshot", "engine_metrics", "nvml", "host")
ENGINE_PATHS: Final = ("snapshot", "metrics")  # what the sidecar requests from the engine
# ... and, of an engine of another kind (`--engine-kind sglang|vllm`), its health path: counted
# from its first request, never zero-filled (a Helios sidecar's series stay as they were).
HEALTH_PATH: Final = "health"
# Snapshot v3's additions to `offload` (docs/snapshot.md, "Schema v3").
STORE_OUTCOMES: Final = ("stored", "dropped_full", "dropped_ineligible", "failed")
EVICTED_BY: Final = ("row", "page", "ancestor_compaction")
TOKEN_SOURCES: Final = ("computed", "gpu_prefix", "host_restored")
# `helios_exporter_snapshot_fields_dropped_total{field}`: identity fields left out of a snapshot
# (always exported), and v3 sections left out because they broke the schema or a histogram rule
# (exported once one was: docs/interface.md section 4.5; exporter.snapshot.schemas.V3_SECTIONS).
IDENTITY_FIELDS: Final = ("image_digest", "container_id", "package", "checkpoint")
DROPPABLE_FIELDS: Final = tuple(f"identity.{k}" for k in IDENTITY_FIELDS)
PINS: Final = ("image_digest", "package", "checkpoint", "ranks", "power_limit")
GEOMETRY_RULES: Final = ("slabs_within_budget", "resident_within_budget", "lookups_accounted",
                         "record_bytes_match_layout")

# `helios_exporter_collector_success{collector}`: every collector of /metrics, in exposition order.
COLLECTORS: Final = ("offload", "engines", "pins", "passthrough", "restore", "exporter", "host",
                     "experiment", "gpu", "http", "build_info", "process", "platform")
# What goes missing from /metrics while a collector fails (exporter/collectors/registry.py registers them;
# their docstrings show what each renders), and the alerts that go blind with it: said by
# HeliosExporterCollectorFailing (alerts/groups/exporter.py), the status page and the runbook's
# table (scripts/generate). `{memory}`: the alerts' window memory (alerts/config.yaml).
@dataclass(frozen=True)
class Missing:
    """What a failing collector leaves out of /metrics."""

    series: tuple[str, ...]  # its families, by name or a prefix ending in `*`
    what: str = ""  # what they are, in words ("" when the names say it)
    note: str = ""  # said of the names, inside the brackets
    blind: str = ""  # what goes blind meanwhile

    @property
    def text(self) -> str:
        names = ", ".join(self.series)
        note = f": {self.note}" if self.note else ""
        text = f"{self.what} ({names}{note})" if self.what else names
        return f"{text}; {self.blind}" if self.blind else text


COLLECTOR_MISSING: dict[str, Missing] = {
    "offload": Missing(("helios_engine_up", "helios_engine_ranks", "helios_engine_admission_open",
                        "helios_engine_inflight_requests", "helios_offload_*",
                        "helios_monitoring_generation_*"),
                       "the engine and offload series", blind="the offload alerts cannot fire"),
    "engines": Missing(("helios_engine_kind_info", "helios_engine_signal_coverage",
                        "helios_engine_kind_mismatch"),
                       "the engine kind and its signals' coverage (--engine-kind other than "
                       "helios)"),
    "pins": Missing(("helios_engine_pin_ok",), blind="HeliosEnginePinMismatch cannot fire"),
    "passthrough": Missing(("helios_engine_native_*",), "the engine's re-exported families"),
    "restore": Missing(("helios_restore_*", "helios_engine_unplanned_restarts_total"),
                       "the restore window series",
                       blind="the restore deadline alerts go on from the last values seen (for "
                             "{memory}) and miss every change since; HeliosRestoreCheckFailed, "
                             "HeliosEngineSnapshotFailing and HeliosEngineRestartedOutsideWindow "
                             "cannot fire"),
    "exporter": Missing(("helios_exporter_source_*", "helios_exporter_engine_*",
                         "helios_exporter_snapshot_*", "helios_exporter_poll_*",
                         "helios_exporter_log_*"),
                        "the sidecar's source health",
                        blind="HeliosEngineSnapshotFailing cannot fire"),
    "host": Missing(("helios_engine_process_*", "helios_host_memory_*"),
                    "the engine process and host memory series"),
    "experiment": Missing(("helios_experiment_phase_*",), "the open experiment phases"),
    "gpu": Missing(("helios_gpu_*",), "the GPU series",
                   blind="HeliosGpuLost and HeliosGpuPowerAtLimit cannot fire"),
    "http": Missing(("helios_exporter_http_*", "helios_exporter_web_config_*",
                     "helios_exporter_tls_*"), "the sidecar's HTTP server series",
                    blind="HeliosExporterCertificateExpiring and "
                          "HeliosExporterCertificateExpiryImminent cannot fire"),
    "build_info": Missing(("helios_exporter_build_info",)),
    "process": Missing(("process_*",), "the sidecar's process series",
                       "CPU, memory, file descriptors"),
    "platform": Missing(("python_info",)),
}
COLLECTOR_SERIES: dict[str, str] = {name: m.text for name, m in COLLECTOR_MISSING.items()}
if tuple(COLLECTOR_SERIES) != COLLECTORS:  # a new collector needs its line here
    raise AssertionError(f"COLLECTOR_SERIES {tuple(COLLECTOR_SERIES)} != COLLECTORS {COLLECTORS}")
# `helios_exporter_http_auth_failures_total{path,reason}`: the paths that check credentials (basic
# auth guards every path but the probes and the bearer-token APIs: the others count as `other`).
AUTH_PATHS: Final = ("/", "/metrics", "/status", "/restore/events", "/experiment/phases", "other")
# pending: answered 429 while the request's bcrypt check had not finished (exporter/web/basic_auth.py).
AUTH_FAILURE_REASONS: Final = ("missing", "wrong", "throttled", "pending")
# `helios_exporter_tls_certificate_expiry_timestamp_seconds{certificate}`: the server's certificate
# (and the chain served with it) and the client CA of the web configuration in force.
TLS_CERTIFICATES: Final = ("server", "client_ca")
# `helios_exporter_http_connections_closed_total{reason}`: connections the sidecar closed itself.
CONNECTION_CLOSE_REASONS: Final = ("slow_request", "slow_reader", "idle", "evicted",
                                   "head_too_large")


class ErrorReason(StrEnum):
    """Why a source poll failed (`helios_exporter_source_errors_total{reason}`)."""

    CONNECT = "connect"  # refused, DNS, reset before a response
    TIMEOUT = "timeout"  # connect/read timeout or the overall poll bound
    HTTP_STATUS = "http_status"  # any non-2xx answer, redirects included
    TOO_LARGE = "too_large"  # body over --max-response-bytes
    DECODE = "decode"  # not UTF-8, not JSON, not exposition text
    SCHEMA = "schema"  # valid JSON that breaks the snapshot schema of its schema_version
    UNSUPPORTED_VERSION = "unsupported_version"  # schema_version other than 1 and 3
    LIBRARY = "library"  # NVML shared library missing or failed to initialise
    DRIVER = "driver"  # an NVML call failed for the whole device list
    GPU_LOST = "gpu_lost"  # NVML reported a GPU fallen off the bus
    HUNG = "hung"  # a call did not return within its bound
    NOT_FOUND = "not_found"  # the engine process could not be found
    PERMISSION = "permission"  # access denied reading a process or file
    OTHER = "other"


ERROR_REASONS: Final = tuple(r.value for r in ErrorReason)
# `helios_exporter_engine_requests_total{outcome}`: ok, or why the request itself failed.
FETCH_OUTCOMES: Final = ("ok", *(r.value for r in (
    ErrorReason.CONNECT, ErrorReason.TIMEOUT, ErrorReason.HTTP_STATUS, ErrorReason.TOO_LARGE,
    ErrorReason.DECODE, ErrorReason.OTHER)))


def miss_reason(engine_key: str) -> str:
    """Map an engine miss-reason key (free text) onto the closed set.

    The part before the first ':' is kept (`key_mismatch:ckpt=ab12` -> `key_mismatch`);
    anything not in the set becomes `other`.
    """
    head = engine_key.split(":", 1)[0].strip()
    return head if head in MISS_REASONS else "other"


def miss_counts(misses: Mapping[str, int]) -> dict[str, int]:
    """Sum engine miss keys per closed-set reason; every reason is present (0 when unseen)."""
    out = dict.fromkeys(MISS_REASONS, 0)
    for key, count in misses.items():
        out[miss_reason(key)] += count
    return out

# Engine kinds (`serve --engine-kind`, exporter/engines/): what the sidecar reads the engine as.
# `helios_engine_kind_info{kind}`, `helios_engine_kind_mismatch{kind,found}` (found: also
# `unknown`, /metrics without any engine's families); `auto` decides one of ENGINE_KINDS.
ENGINE_KINDS: Final = ("helios", "sglang", "vllm")
ENGINE_KIND_CHOICES: Final = (*ENGINE_KINDS, "auto")
ENGINE_KIND_FOUND: Final = (*ENGINE_KINDS, "unknown")
KIND_DECIDED: Final = ("configured", "auto")
# `helios_engine_signal_coverage{signal,source}`: each catalogue signal a mapped engine can fill
# (exporter/engines/signals.py), and whether this engine supplies it now.
COVERAGE_SOURCES: Final = ("native", "derived", "absent")
ENGINE_SIGNALS: Final = (
    "slab_capacity.row", "slab_free.row", "slab_capacity.page", "slab_free.page",
    "slab_record_bytes", "budget_bytes", "resident_records", "resident_bytes",
    "eviction_attempts", "eviction_outcomes", "retired_leaves", "ancestor_compactions",
    "lookups", "lookup_hits", "lookup_misses", "host_stores", "host_tokens_restored",
    "prompt_tokens_reused", "store_outcomes.stored", "store_outcomes.dropped_full",
    "store_outcomes.dropped_ineligible", "store_outcomes.failed", "stored_bytes",
    "restore_transfer_bytes", "restore_transfer_seconds", "eviction_age_seconds",
    "eviction_idle_seconds", "lookup_blocked_tokens", "lookup_evicted_misses",
    "prompt_tokens.computed", "prompt_tokens.gpu_prefix", "prompt_tokens.host_restored",
    "page_tokens", "row_checkpoint_interval_tokens", "min_reusable_tokens", "admission",
    "inflight_requests", "ranks", "generation",
)
# How a mapped engine's generation is derived (docs/engines.md, "Identity").
IDENTITY_EVIDENCE: Final = ("process_start_time", "counter_created", "counter_reset")
