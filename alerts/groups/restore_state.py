"""The restore state file: its writes and reads failing.

While the state cannot be written, restore events are answered 503 (nothing acknowledged is
lost, but tooling cannot move the window on) and the window on disk falls behind the one the
sidecar watches; while the file cannot be read, whether a window is open on file is unknown.
Either way a person has to free the disk or fix the file: a page. In the exporter's group, not
the restore route's: no window notice explains its resolve.
"""

from __future__ import annotations

from alerts.config import Config, Duration
from alerts.promql import Q, indent
from alerts.rules import FOR, Alert, Promise
from alerts.templates import T

GROUP = "helios-exporter"
# A failed write is retried at every poll while the state has a change to write: failing writes
# keep the increase above 0; one failure that the next poll's write mends stays below `for:`.
WRITES = Duration("2m", 120)


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    unknown = f"{q.sel('helios_restore_window_unknown')} == 1"
    failing = f"{q.increase('helios_restore_state_write_errors_total', WRITES)} > 0"
    return [
        Alert(
            name="HeliosRestoreStateFailing",
            group=GROUP,
            severity="critical",
            for_="3m",
            promised=Promise(
                "the restore state file cannot be written, or cannot be read: restore events "
                "are answered 503 and the window on file may be unknown",
                since=3,
            ),
            expr=f"(\n{indent(unknown)}\n)\nor\n(\n{indent(failing)}\n)",
            summary=f"The restore state of the Helios sidecar {t.target} is not durable",
            description=(
                f"For {FOR} the sidecar on {t.target} has failed to write its restore state "
                "file under --state-dir, or cannot read it (helios_restore_window_unknown: "
                "whether a window is open on file, and its deadlines, are unknown). Restore "
                "events are answered 503 until it can; nothing acknowledged is lost. /status "
                "restore.last_state_write_error and restore.state_file_held say why."
            ),
            meaning=(
                "`helios_restore_window_unknown == 1` (the state file on disk cannot be read), "
                f"or `helios_restore_state_write_errors_total` increased within {WRITES} (its "
                "writes fail: disk full, read-only, I/O error)"
            ),
        ),
    ]
