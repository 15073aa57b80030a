"""Prometheus's memory of the restore window: the last value it saw of each restore series.

The restore alerts must keep firing from the last values seen while the sidecar or its whole host
cannot be scraped, for `window_memory` (3h). Reading `last_over_time(m[3h])` in every rule costs
720 samples per series per evaluation: 2.6 million samples per evaluation of the restore group
at 1,000 engines (docs/scale.md). Instead, three recording rules per metric, in order:

- `helios:<m>:last6m`: `last_over_time(m[6m])`, the recent past;
- `helios:<m>:last6m_every5m`: the same, kept once every 5 minutes per series (a step, see
  alerts/promql.py), so that the memory's three hours hold 36 steps instead of 720 samples;
- `helios:<m>:last_seen`: the recent past where there is one, else the newest step of the memory.

Prometheus thus remembers a series for `window_memory` to `window_memory` + 5 minutes after its
last scrape (the last step that holds it is taken 1 to 6 minutes after it and read for
`window_memory` - 1 minute). Steps are stored like any sample, so the memory survives a
Prometheus restart; a restart that lasts over 6 minutes can lose the last 5 minutes scraped
before it (taken by no step), and the memory then holds the value of the step before.

The rules run in groups of their own, before the alerts in the file (promtool evaluates groups in
file order, Prometheus side by side): the alerts read the memory as of its group's last
evaluation, at most one evaluation interval old. The window state and deadlines are one group,
the post-restore checks (four series per sidecar, the most of any) another, so that each stays
well under the 200 ms a group may take at 1,000 engines. A metric's three rules stay in one group
and in this order: the step rule reads its own last step and the recent rule evaluated just
before it, and `last_seen` reads both in the same evaluation. A ruler shards by group (Mimir), so
no split puts them on different schedules (docs/scale.md; tests/alerts/test_alert_rules.py).
"""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import STEP, STEP_SPAN, Q, duration, last_seen_name, short
from alerts.rules import Record

GROUPS = {
    "helios-restore-memory": (
        "helios_restore_window_open",
        "helios_restore_window_start_timestamp_seconds",
        "helios_restore_deadline_timestamp_seconds",
        "helios_restore_incumbent_inflight_requests",
    ),
    "helios-restore-memory-checks": ("helios_restore_check_ok",),
}
# The restore series the alerts and their annotations read from memory.
REMEMBERED = tuple(metric for metrics in GROUPS.values() for metric in metrics)


def recent_name(metric: str) -> str:
    return f"helios:{short(metric)}:last{STEP_SPAN}"


def steps_name(metric: str) -> str:
    return f"helios:{short(metric)}:last{STEP_SPAN}_every{STEP}"


def memory_span(c: Config) -> str:
    """How far back the steps are read: the last step holding a sample is taken up to
    STEP_SPAN after it, and at least STEP_SPAN - STEP after it."""
    return duration(c.window_memory.seconds - STEP_SPAN.seconds + STEP.seconds)


def records(c: Config) -> list[Record]:
    q = Q(c)
    out: list[Record] = []
    for group, metrics in GROUPS.items():
        for metric in metrics:
            recent, steps = recent_name(metric), steps_name(metric)
            out += [
                Record(
                    recent,
                    group,
                    f"last_over_time({q.sel(metric)}[{STEP_SPAN}])",
                    f"Last value of `{metric}` seen in the last {STEP_SPAN}: the recent part of "
                    "the restore memory.",
                ),
                Record(
                    steps,
                    group,
                    q.stepped(steps, q.sel(recent)),
                    f"`{recent}` kept once every {STEP} per series: the restore memory's steps, "
                    f"read back over {memory_span(c)}.",
                ),
                Record(
                    last_seen_name(metric),
                    group,
                    f"{q.sel(recent)}\nor\nlast_over_time({q.sel(steps)}[{memory_span(c)}])",
                    f"Last value of `{metric}` Prometheus saw, remembered for {c.window_memory} "
                    f"(to {c.window_memory} + {STEP}) after the sidecar stops answering. Read by "
                    "the restore alerts and their annotations.",
                ),
            ]
    return out
