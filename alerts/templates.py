"""Go-template fragments for alert annotations (Prometheus's template language).

Annotations are written to stay true when read later: Alertmanager sends a resolved alert with
the annotations of its last firing evaluation, so a description says what held *as of* that
evaluation ("as of <time>"), never what "is still" so.
"""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import last_seen_name


class T:
    """Annotation fragments for one config: the target's name and queries scoped to it."""

    def __init__(self, config: Config) -> None:
        self.c = config
        labels = config.join_labels
        # job/instance, then " in cluster eu1" only where the series carry a cluster label.
        self.cluster = f"{{{{ with $labels.{config.cluster_label} }}}} in cluster {{{{ . }}}}{{{{ end }}}}"
        self.target = (
            "/".join(f"{{{{ $labels.{label} }}}}" for label in config.target_labels) + self.cluster
        )
        # A missing label renders as "" (Prometheus templates use missingkey=zero), and
        # cluster="" matches the series that have no cluster label: one Prometheus per cluster.
        self._matchers = ",".join(f"{label}=%q" for label in labels)
        # `(or $labels.x "")`, not `$labels.x`: vmalert's templates give a missing label as nil,
        # which %q prints as %!q(<nil>) and fails the alert (Prometheus gives "").
        self._args = " ".join(f'(or $labels.{label} "")' for label in labels)

    def query(self, metric_fmt: str, render: str, missing: str = "unknown",
              extra_args: str = "") -> str:
        """Query `metric_fmt` (with `{TARGET}` for this alert's target matchers) and render it.
        `extra_args`: template values for `%q`s of `metric_fmt` after the target's."""
        expr = metric_fmt.replace("{TARGET}", self._matchers)
        args = " ".join([self._args] * metric_fmt.count("{TARGET}") + [extra_args] * bool(extra_args))
        return (
            f"{{{{ with printf `{expr}` {args} | query }}}}"
            f"{{{{ . | first | {render} }}}}{{{{ else }}}}{missing}{{{{ end }}}}"
        )

    def when(self, metric_fmt: str, text: str) -> str:
        """`text` when the query `metric_fmt` (with `{TARGET}`) returns a series, else nothing."""
        expr = metric_fmt.replace("{TARGET}", self._matchers)
        args = " ".join([self._args] * metric_fmt.count("{TARGET}"))
        return f"{{{{ with printf `{expr}` {args} | query }}}}{text}{{{{ end }}}}"

    def value(self, metric_fmt: str, render: str, missing: str = "unknown",
              extra_args: str = "") -> str:
        """The value of the first series `metric_fmt` returns, rendered with `render`."""
        return self.query(metric_fmt, f"value | {render}", missing, extra_args)

    def last_ts(self, metric: str, extra: str = "", lookback: str = "", offset: str = "",
                missing: str = "unknown") -> str:
        """The last value of a timestamp gauge of this target seen within `lookback` (before
        `offset`), as a UTC time."""
        at = f" offset {offset}" if offset else ""
        return self.value(
            f"last_over_time({metric}{{{{TARGET}}{extra}}}[{lookback or self.c.window_memory}]{at})",
            "humanizeTimestamp",
            missing,
        )

    def seen_ts(self, metric: str, extra: str = "") -> str:
        """The remembered last value of a restore timestamp gauge of this target (its recorded
        `last_seen`, alerts/groups/restore_memory.py), as a UTC time."""
        return self.value(
            f"{last_seen_name(metric)}{{{{TARGET}}{extra}}}", "humanizeTimestamp", "unknown"
        )

    def deadline_at(self, bound: str) -> str:
        """The last seen deadline `bound` (request_cutoff, restore) of this target's window."""
        return self.seen_ts("helios_restore_deadline_timestamp_seconds", f',bound="{bound}"')

    def window_started_at(self) -> str:
        return self.seen_ts("helios_restore_window_start_timestamp_seconds")

    @staticmethod
    def now() -> str:
        """The evaluation time, as a UTC time."""
        return '{{ with query "time()" }}{{ . | first | value | humanizeTimestamp }}{{ end }}'

    def scrape_state(self) -> str:
        expr = f"up{{{self._matchers}}}"
        return (
            f"{{{{ with printf `{expr}` {self._args} | query }}}}"
            "{{ if eq (. | first | value) 1.0 }}reachable{{ else }}unreachable (up=0){{ end }}"
            "{{ else }}gone from service discovery (no up series){{ end }}"
        )
