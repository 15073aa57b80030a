"""The open restore window as an info alert: the inhibition source for HeliosExporterDown."""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, join
from alerts.rules import Alert
from alerts.templates import T

GROUP = "helios-restore"
NAMES = ("HeliosRestoreWindowOpen",)


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    mem = str(c.window_memory)
    return [
        Alert(
            name="HeliosRestoreWindowOpen",
            group=GROUP,
            severity="info",
            expr=join(
                q.last("helios_restore_window_start_timestamp_seconds"),
                q.window_open_last(),
                f"{q.deadline_last('restore')} >= time()",
                op=f"and {q.on}",
            ),
            summary=f"Restore window open on {t.target} (planned outage)",
            description=(
                f"A restore window is open on {t.target} since "
                f"{{{{ $value | humanizeTimestamp }}}}: request cutoff "
                f"{t.deadline_at('request_cutoff')}, restore deadline {t.deadline_at('restore')}. "
                "Not routed; inhibits HeliosExporterDown for this target until the restore "
                "deadline."
            ),
            meaning=(
                "last seen window state is open and the last seen `restore` deadline has not "
                f"passed (value: window start); memory {mem}. Extra to the contract: the "
                "inhibition source for HeliosExporterDown"
            ),
        ),
    ]
