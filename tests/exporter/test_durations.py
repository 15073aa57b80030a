"""exporter/durations.py: Prometheus's duration grammar, the one parser alerts/, dashboards/,
bench/ and the tests read durations with."""

from __future__ import annotations

import pytest

from exporter import durations


@pytest.mark.parametrize(("text", "seconds"), [
    ("0", 0.0), ("0s", 0.0), ("90s", 90.0), ("15m", 900.0), ("1h30m", 5400.0), ("2d", 172800.0),
    ("1w", 604800.0), ("1y", 31536000.0), ("500ms", 0.5), ("1m30s250ms", 90.25),
    ("1y2w3d4h5m6s7ms", 31536000 + 2 * 604800 + 3 * 86400 + 4 * 3600 + 5 * 60 + 6.007),
])
def test_prometheus_durations(text: str, seconds: float) -> None:
    assert durations.seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", [
    "", "1", "s", "1.5h", "30m1h", "1h1h", "1x", " 1m", "1m ", "-1m", "1M", "1h 30m", "ms",
])
def test_what_prometheus_rejects_is_an_error(text: str) -> None:
    with pytest.raises(ValueError, match="not a Prometheus duration"):
        durations.seconds(text)


def test_the_alert_config_reads_whole_seconds_through_it() -> None:
    from alerts.config import Reader

    reader = Reader({"a": "1h30m", "b": "1500ms", "c": "1.5h", "d": "0"})
    assert reader.duration("a").seconds == 5400
    assert reader.duration("d", allow_zero=True).seconds == 0
    reader.duration("b")
    reader.duration("c")
    assert reader.errors == ["b: expected a duration like 90s, 15m or 3h, got '1500ms'",
                             "c: expected a duration like 90s, 15m or 3h, got '1.5h'"]
