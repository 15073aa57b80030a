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
    parts = []
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def ratio(numerator: str, denominator: str) -> str:
    """`a\\n/\\n(b > 0)`: absent instead of a division by zero."""
    return f"{numerator}\n/\n({denominator} > 0)"


# The last seen window state, remembered for the window memory: read by most restore rules,
# so recorded once per evaluation instead of each rule reading the memory's samples again.
WINDOW_OPEN_LAST_SEEN = "helios:restore_window_open:last_seen"


class Q:
    """PromQL fragments for one config."""

    def __init__(self, config: Config) -> None:
        self.c = config
        self.on = f"on ({', '.join(config.join_labels)})"
        self.memory = str(config.window_memory)

    def sel(self, metric: str, **matchers: str) -> str:
        extra = "".join(f', {k}="{v}"' for k, v in matchers.items())
        return f"{metric}{{{self.c.selector}{extra}}}"

    def last(self, metric: str, lookback: str = "", **matchers: str) -> str:
        """The last value Prometheus saw within `lookback` (default: the window memory), skipping
        the staleness markers of failed scrapes."""
        return f"last_over_time({self.sel(metric, **matchers)}[{lookback or self.memory}])"

    def last_before(self, metric: str, span: str, **matchers: str) -> str:
        """The last value Prometheus saw in the `span` before the window memory began: what
        `last(metric, memory + span)` reads when nothing was seen within the memory, at a
        fraction of the samples."""
        return (f"last_over_time({self.sel(metric, **matchers)}[{span}] offset {self.memory})")

    def window_open_last(self) -> str:
        """The last seen window state is open (the memory recorded once per evaluation at the
        head of the restore alert group, alerts/groups/restore_window.py)."""
        return f"{self.sel(WINDOW_OPEN_LAST_SEEN)} == 1"

    def deadline_last(self, bound: str) -> str:
        return self.last("helios_restore_deadline_timestamp_seconds", bound=bound)

    def increase(self, metric: str, window: Duration, without: str = "generation") -> str:
        return f"sum without ({without}) (increase({self.sel(metric)}[{window}]))"

    def rate(self, metric: str, without: str = "generation") -> str:
        return f"sum without ({without}) (rate({self.sel(metric)}[{self.c.rate_window}]))"
