"""Every default of the sidecar, defined once.

Imported by the command-line options and `Config` (exporter/config.py), the restore bounds
(exporter/restore/window.py), the derivations (exporter/cycle/derive.py) and the sources. Where a value
must also appear in a generated file (alerts/config.yaml: the page headroom, the down grace, the
memory of a window longer than the restore bound), a test ties the two (tests/exporter/test_defaults.py).
"""

from __future__ import annotations

from typing import Final

ENV_PREFIX: Final = "HELIOS_EXPORTER_"  # every flag's variable: HELIOS_EXPORTER_<FLAG>
LISTEN_HOST: Final = "0.0.0.0"
LISTEN_PORT: Final = 19400
POLL_INTERVAL: Final = 5.0  # seconds between poll cycles
ENGINE_TIMEOUT: Final = 2.0  # seconds for one whole engine request
MAX_RESPONSE_BYTES: Final = 8 * 1024 * 1024
STATE_DIR: Final = "/var/lib/helios-exporter"
NVML_TIMEOUT: Final = 2.0  # seconds one NVML poll may take
HOST_TIMEOUT: Final = 2.0  # seconds one psutil poll may take (not configurable)
MAX_SERIES_PER_FAMILY: Final = 200  # pass-through cardinality guard
# /healthz answers 503 once no poll cycle has completed for this many poll intervals, plus the
# longest a healthy cycle may take (exporter.config.Config.stale_after).
HEALTHZ_STALE_POLLS: Final = 3

# The restore window (seconds from its start).
REQUEST_CUTOFF: Final = 4200.0
RESTORE_BOUND: Final = 5400.0
DOWN_GRACE: Final = 60.0  # unreachable this long before a window opens

PREFLIGHT_MAX_TOKENS: Final = 4
PREFLIGHT_TIMEOUT: Final = 10.0

# helios_offload_row_pressure_with_page_headroom_total: the page slab counts as having headroom
# while at least this fraction of it is free.
PAGE_HEADROOM_RATIO: Final = 0.25

# `helios-exporter geometry`: the host budget the pinned engine carves (32 GiB) and the share
# `offload/slab.rs::Pool::sized_counts` gives rows today (a quarter).
GEOMETRY_BUDGET_BYTES: Final = 32 << 30
GEOMETRY_ROW_FRACTION: Final = "0.25"

# Experiment phases (POST /experiment/phases): at most this many open at once (a begin beyond it
# is refused with 409), and this many kept in the state file, the oldest ended ones dropped first.
MAX_OPEN_PHASES: Final = 16
MAX_PHASES_KEPT: Final = 512
# The HTTP server (exporter/web/): slow and idle clients, the connection cap, auth failures.
HTTP_READ_TIMEOUT: Final = 5.0  # seconds to send a whole request, or to take a stalled response
HTTP_IDLE_TIMEOUT: Final = 75.0  # seconds a kept-alive connection may sit idle (nginx's default)
HTTP_MAX_CONNECTIONS: Final = 256  # open connections at most; far below the descriptor limit
HTTP_MAX_HEAD_BYTES: Final = 64 * 1024  # a request head larger than this is answered 431
FD_RESERVE: Final = 128  # descriptors kept for everything but client connections
AUTH_FREE_FAILURES: Final = 5  # failed credentials from one client before it is slowed down
AUTH_PENALTY_FIRST: Final = 1.0  # seconds of the first penalty; doubled with each failure after
AUTH_PENALTY_MAX: Final = 60.0
AUTH_FORGET_AFTER: Final = 600.0  # seconds without a failure after which a client starts afresh
# During a penalty, a client's basic-auth credentials are still compared with those verified
# before (the success cache), but at most once per this many seconds, with bursts of a few.
AUTH_PENALTY_CACHE_CHECK_INTERVAL: Final = 1.0
AUTH_PENALTY_CACHE_CHECK_BURST: Final = 3
WEB_CONFIG_RECHECK: Final = 1.0  # seconds between checks of --web-config-file and its files
# Basic auth's bcrypt checks (exporter/web/basic_auth.py): at most AUTH_CHECK_WORKERS at once,
# one per client, one of them kept for clients without failed credentials on record, and at
# most AUTH_CHECK_QUEUE more waiting for a turn. A request is answered (401, or 429 while its
# check is not done) within AUTH_ANSWER_WITHIN seconds of its arrival: inside the 10 s scrape
# timeout of deploy/prometheus, with room for the TLS handshake and the answer. An unknown user
# is checked against a dummy hash of the median configured cost, at most AUTH_DUMMY_MAX_COST
# (about 0.3 s on one core of 2026).
AUTH_CHECK_WORKERS: Final = 2
AUTH_CHECK_QUEUE: Final = 32
AUTH_ANSWER_WITHIN: Final = 8.0
AUTH_DUMMY_MAX_COST: Final = 12
# Loading the web configuration tries each new hash against the deployment example's password
# for at most this long (the hashes predicted to fit); the rest are tried in the background.
AUTH_LOAD_TRIAL_BUDGET: Final = 0.5

LOG_FORMAT: Final = "auto"
LOG_LEVEL: Final = "info"

# `helios-exporter status`: seconds between redraws with --watch, and to wait for the sidecar.
WATCH_INTERVAL: Final = 2.0
STATUS_TIMEOUT: Final = 5.0
# The status page calls an unplanned restart recent (a summary line, the runbook) this long:
# as long as HeliosEngineRestartedOutsideWindow fires (alerts/config.yaml engine.restart_window).
RESTART_RECENT: Final = 3600.0
# The status page warns of the certificate in force (or the client CA) this long before it
# expires, and calls it failed this long before: as HeliosExporterCertificateExpiring and
# HeliosExporterCertificateExpiryImminent fire (alerts/config.yaml exporter.certificate_*).
CERT_EXPIRY_TICKET: Final = 14 * 86400.0
CERT_EXPIRY_PAGE: Final = 3 * 86400.0
