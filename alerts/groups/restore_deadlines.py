"""Restore deadlines: the request cutoff and the restore bound of an open window.

Every input is read through last_over_time(...[window_memory]), so the alerts keep evaluating
from the last values Prometheus saw while the sidecar or its whole host cannot be scraped.
"""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, join
from alerts.rules import Alert, Promise
from alerts.templates import T

GROUP = "helios-restore"
# The incumbent's in-flight requests as last seen while it was up; 0 once it went away or was
# replaced, so neither the restored engine's own traffic nor requests that died with a crashed
# incumbent count (docs/interface.md, restore window).
INCUMBENT_INFLIGHT = "helios_restore_incumbent_inflight_requests"


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    mem = str(c.window_memory)
    target = t.target
    remembered = (
        f"Computed from the last values Prometheus saw (memory {mem}), so it keeps firing while "
        "the sidecar or its host cannot be scraped."
    )
    window = f"the window opened {t.window_started_at()}"
    return [
        Alert(
            name="HeliosRequestCutoffBreached",
            group=GROUP,
            severity="critical",
            for_="0m",
            promised=Promise(
                "an open window's request-cutoff deadline has passed and the incumbent still "
                "had requests in flight when it was last seen up; the restored engine's own "
                "traffic never counts"
            ),
            expr=join(
                f"{q.seen(INCUMBENT_INFLIGHT)} > 0",
                f"{q.deadline_last('request_cutoff')} < time()",
                q.window_open_last(),
                q.deadline_of_window("request_cutoff"),
                op=f"and {q.on}",
            ),
            summary=f"Incumbent requests in flight after the request cutoff on {target}",
            description=(
                f"As of {t.now()}, the incumbent engine on {target} had {{{{ $value | humanize }}}}"
                f" request(s) in flight (last seen while it was up) after the request-cutoff "
                f"deadline {t.deadline_at('request_cutoff')} of {window} (restore deadline "
                f"{t.deadline_at('restore')}). Admission must be drained before the outage: "
                "requests the incumbent has not finished when it goes away are lost and fail the "
                f"drained_admission check. The restored engine's traffic never counts. "
                f"{remembered}"
            ),
            meaning=(
                "last seen window state is open, `time()` is past the last seen "
                f"`request_cutoff` deadline and the incumbent's in-flight count "
                f"(`{INCUMBENT_INFLIGHT}`, last seen while it was up; 0 once it went away or "
                f"was replaced) is above 0; memory {mem}"
            ),
        ),
        Alert(
            name="HeliosRestoreBoundAtRisk",
            group=GROUP,
            severity="warning",
            for_="0m",
            promised=Promise(f"an open window is {c.at_risk_margin} or less from its restore deadline"),
            expr=join(
                f"{q.deadline_last('restore')} - time() <= {c.at_risk_margin.seconds}",
                f"{q.deadline_last('restore')} > time()",
                q.window_open_last(),
                q.deadline_of_window("restore"),
                op=f"and {q.on}",
            ),
            summary=f"Restore of {target} at risk: its restore deadline is {c.at_risk_margin} away or less",
            description=(
                f"As of {t.now()}, {window} on {target} was open and had to be closed by "
                f"{t.deadline_at('restore')}: {{{{ $value | humanizeDuration }}}} left (at-risk "
                f"margin {c.at_risk_margin}). From the deadline on, HeliosRestoreBoundBreached "
                f"takes over. {remembered}"
            ),
            meaning=(
                f"last seen window state is open and the last seen `restore` deadline is at "
                f"most {c.at_risk_margin} ({c.at_risk_margin.seconds} s) away and not yet past "
                f"(then HeliosRestoreBoundBreached); memory {mem}"
            ),
        ),
        Alert(
            name="HeliosRestoreBoundBreached",
            group=GROUP,
            severity="critical",
            for_="0m",
            promised=Promise(
                "the restore deadline has passed and the window has not closed, also while the "
                "sidecar or its whole host cannot be scraped"
            ),
            expr=join(
                f"{q.deadline_last('restore')} < time()",
                q.window_open_last(),
                q.deadline_of_window("restore"),
                op=f"and {q.on}",
            ),
            summary=f"Restore bound breached on {target}",
            description=(
                f"As of {t.now()}, {window} on {target} was still open after its restore "
                f"deadline {{{{ $value | humanizeTimestamp }}}}. Sidecar: {t.scrape_state()}. "
                f"{remembered}"
            ),
            meaning=(
                f"last seen window state is open and `time()` is past the last seen `restore` "
                f"deadline, also while `up == 0` or the series are stale; memory {mem}"
            ),
        ),
    ]
