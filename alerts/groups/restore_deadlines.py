"""Restore deadlines: the request cutoff and the restore bound of an open window.

Every input is read through last_over_time(...[window_memory]), so the alerts keep evaluating
from the last values Prometheus saw while the sidecar or its whole host cannot be scraped.
"""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q, join
from alerts.rules import Alert, Record
from alerts.templates import T

GROUP = "helios-restore"
NAMES = ("HeliosRequestCutoffBreached", "HeliosRestoreBoundAtRisk", "HeliosRestoreBoundBreached")
INFLIGHT_SUM = "helios:engine_inflight_requests:sum"


def records(c: Config) -> list[Record]:
    """Recording rules these alerts need; they live in the alerts file so it works on its own."""
    q = Q(c)
    return [
        Record(
            INFLIGHT_SUM,
            GROUP,
            f"sum without (generation) ({q.sel('helios_engine_inflight_requests')})",
            "In-flight requests of the current generation (last good snapshot during a window). "
            "Summed without `generation` so that last_over_time() follows the newest "
            "generation instead of remembering a previous incarnation's value.",
        ),
    ]


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    mem = str(c.window_memory)
    target = t.target
    remembered = (
        f"Computed from the last values Prometheus saw (memory {mem}), so it keeps firing while "
        "the sidecar or its host cannot be scraped."
    )
    return [
        Alert(
            name="HeliosRequestCutoffBreached",
            group=GROUP,
            severity="critical",
            expr=join(
                f"{q.last(INFLIGHT_SUM)} > 0",
                f"{q.deadline_last('request_cutoff')} < time()",
                q.window_open_last(),
                op=f"and {q.on}",
            ),
            summary=f"Requests still in flight after the request cutoff on {target}",
            description=(
                f"{{{{ $value | humanize }}}} request(s) were in flight (last value seen) on "
                f"{target} after the request-cutoff deadline {t.deadline_at('request_cutoff')} "
                f"of the open restore window (restore deadline {t.deadline_at('restore')}). "
                "Admission must be drained before the outage; requests still running will be "
                f"cut. {remembered}"
            ),
            meaning=(
                f"last seen window state is open, `time()` is past the last seen "
                f"`request_cutoff` deadline and the last seen in-flight count "
                f"(`{INFLIGHT_SUM}`) is above 0; memory {mem}"
            ),
        ),
        Alert(
            name="HeliosRestoreBoundAtRisk",
            group=GROUP,
            severity="warning",
            expr=join(
                f"{q.deadline_last('restore')} - time() <= {c.at_risk_margin.seconds}",
                q.window_open_last(),
                op=f"and {q.on}",
            ),
            summary=f"Restore deadline of {target} is {c.at_risk_margin} away or less",
            description=(
                f"The restore window on {target} (opened {t.window_started_at()}) is still open "
                f"and must be closed by {t.deadline_at('restore')}: "
                f"{{{{ $value | humanizeDuration }}}} left (at-risk margin {c.at_risk_margin}). "
                f"{remembered}"
            ),
            meaning=(
                f"last seen window state is open and the last seen `restore` deadline is at "
                f"most {c.at_risk_margin} ({c.at_risk_margin.seconds} s) away or already past; "
                f"memory {mem}"
            ),
        ),
        Alert(
            name="HeliosRestoreBoundBreached",
            group=GROUP,
            severity="critical",
            expr=join(
                f"{q.deadline_last('restore')} < time()",
                q.window_open_last(),
                op=f"and {q.on}",
            ),
            summary=f"Restore bound breached on {target}: the window is still open",
            description=(
                f"The restore deadline {{{{ $value | humanizeTimestamp }}}} of the window "
                f"opened {t.window_started_at()} on {target} has passed and the window has not "
                f"closed. Sidecar: {t.scrape_state()}. {remembered}"
            ),
            meaning=(
                f"last seen window state is open and `time()` is past the last seen `restore` "
                f"deadline, also while `up == 0` or the series are stale; memory {mem}"
            ),
        ),
    ]
