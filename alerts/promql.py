"""PromQL building blocks: every selector, join and threshold of the rules goes through here."""

from __future__ import annotations

from alerts.config import Config, Duration


def num(value: float) -> str:
    """Render a threshold without a trailing .0 (0.98, 1, 900)."""
    return f"{value:g}"


def indent(text: str, width: int = 2) -> str:
    return "\n".join((" " * width + line) if line else line for line in text.splitlines())


def join(*parts: str, op: str) -> str:
    """`(a)\\nop\\n(b)` with each operand on its own indented lines."""
    blocks = ["(\n" + indent(p) + "\n)" for p in parts]
    return f"\n{op}\n".join(blocks)


def chain(first: str, *steps: tuple[str, str]) -> str:
    """`(a)\\nop1\\n(b)\\nop2\\n(c)`: binary set operators of one precedence, left to right."""
    text = "(\n" + indent(first) + "\n)"
    for op, part in steps:
        text += f"\n{op}\n(\n" + indent(part) + "\n)"
    return text


def duration(seconds: int) -> str:
    """A PromQL duration for a number of seconds: 3h5m, 90s."""
    symbolic = getattr(seconds, "promql_duration", None)
    if symbolic is not None:  # a length computed in jsonnet (alerts/mixin.py)
        return str(symbolic())
    parts = []
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def ratio(numerator: str, denominator: str) -> str:
    """`a\\n/\\n(b > 0)`: absent instead of a division by zero."""
    return f"{numerator}\n/\n({denominator} > 0)"


# Steps: a recorded series that keeps one sample per STEP (and a staleness marker after it), so
# that a range function over hours reads a twentieth of the samples of a series recorded every
# 15 s. A step is written where the series has none within STEP_GUARD: every 5 minutes for any
# evaluation interval up to a minute, per series, with no clock alignment to get wrong.
STEP = Duration("5m", 300)
STEP_GUARD = Duration("4m50s", 290)
# What a memory step holds: the last value of the 6 minutes before it, so that consecutive steps
# overlap by a minute and a few skipped evaluations lose nothing.
STEP_SPAN = Duration("6m", 360)


# Two stored copies of one timestamp (a window's start as the sidecar exported it, and as the
# restore memory recorded it) are the same instant when they differ by at most this many
# seconds. Never `==`: VictoriaMetrics stores a float to about 16 significant digits and vmalert's
# recorded copy is rounded again, so at today's epoch (1.8e9 s) one start read back as three
# values up to 0.7 us apart. 1 ms is a thousand times that, and no two windows of one
# sidecar start within 1 ms (a window lasts at least one poll). The same in every engine.
SAME_TIME_TOLERANCE = 0.001


def short(metric: str) -> str:
    """helios_restore_check_ok -> restore_check_ok (the middle of a recorded series' name)."""
    return metric.removeprefix("helios_")


def last_seen_name(metric: str) -> str:
    """The remembered last value of `metric` (alerts/groups/restore_memory.py)."""
    return f"helios:{short(metric)}:last_seen"



class Q:
    """PromQL fragments for one config."""

    def __init__(self, config: Config) -> None:
        self.c = config
        self.on = f"on ({', '.join(config.join_labels)})"
        self.memory = str(config.window_memory)

    def sel(self, metric: str, **matchers: str) -> str:
        extra = "".join(f', {k}="{v}"' for k, v in matchers.items())
        return f"{metric}{{{self.c.selector}{extra}}}"

    def match(self, metric: str, *matchers: str) -> str:
        """`metric` with the selector and raw matchers (`'outcome=~"a|b"'`)."""
        return f"{metric}{{{', '.join((self.c.selector, *matchers))}}}"

    def last(self, metric: str, lookback: str = "", **matchers: str) -> str:
        """The last value Prometheus saw within `lookback` (default: the window memory), skipping
        the staleness markers of failed scrapes."""
        return f"last_over_time({self.sel(metric, **matchers)}[{lookback or self.memory}])"

    def last_before(self, metric: str, span: str, **matchers: str) -> str:
        """The last value Prometheus saw in the `span` before the window memory began: what
        `last(metric, memory + span)` reads when nothing was seen within the memory, at a
        fraction of the samples."""
        return (f"last_over_time({self.sel(metric, **matchers)}[{span}] offset {self.memory})")

    def seen(self, metric: str, **matchers: str) -> str:
        """The last value Prometheus saw of a remembered restore metric, within the window memory
        (recorded in the restore memory groups, alerts/groups/restore_memory.py)."""
        return self.sel(last_seen_name(metric), **matchers)

    def same_time(self, left: str, right: str) -> str:
        """The series of `left` that hold the same instant as `right` (joined on the target),
        within SAME_TIME_TOLERANCE; the value is their difference, so use it with `and`."""
        return (f"abs(\n{indent(left)}\n  - {self.on}\n{indent(right)}\n)\n"
                f"<= {num(SAME_TIME_TOLERANCE)}")

    def window_open_last(self) -> str:
        """The last seen window state is open."""
        return f"{self.seen('helios_restore_window_open')} == 1"

    def deadline_last(self, bound: str) -> str:
        return self.seen("helios_restore_deadline_timestamp_seconds", bound=bound)

    def deadline_of_window(self, bound: str) -> str:
        """The remembered `bound` deadline belongs to the remembered window: it lies after the
        window's start. Not so for an instant where a store shows a new window's start before
        its deadline (remote write gives no scrape atomically: seen in VictoriaMetrics under
        load, docs/scale.md), and the memory still holds the last window's deadline."""
        return (f"{self.deadline_last(bound)}\n> {self.on}\n"
                f"{self.seen('helios_restore_window_start_timestamp_seconds')}")

    def stepped(self, record: str, expr: str) -> str:
        """`expr`, to be recorded as `record` in steps (see STEP): only for the series whose
        last step is older than STEP_GUARD."""
        return chain(expr, ("unless", f"last_over_time({self.sel(record)}[{STEP_GUARD}])"))

    def increase(self, metric: str, window: Duration, without: str = "generation") -> str:
        return f"sum without ({without}) (increase({self.sel(metric)}[{window}]))"

    def rate(self, metric: str, without: str = "generation") -> str:
        return f"sum without ({without}) (rate({self.sel(metric)}[{self.c.rate_window}]))"
