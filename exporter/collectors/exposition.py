"""/metrics bodies: rendered, and gzipped, once per published view, then served as cached bytes.

The data cannot change between two views (a poll cycle, a restore event), so rendering or
compressing per scrape would only spend CPU. Prometheus asks for gzip on every scrape: the first
gzip scrape after a view compresses that view's body once (level 6, no timestamp in the header,
so equal bodies compress to equal bytes); every other scrape gets the same bytes. Text format
0.0.4 and OpenMetrics are cached separately, each in both encodings, and only when asked for.

Each collector is rendered on its own (`Collectors.run`): one that fails leaves the others'
series in place and reports `helios_exporter_collector_success{collector} 0`.
"""

from __future__ import annotations

import gzip
import threading

from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.utils import floatToGoString

from exporter.collectors.registry import Collectors, Health

GZIP_LEVEL = 6
_EOF = b"# EOF\n"


class _Fixed:
    """A "registry" of families already collected, for prometheus_client's encoders."""

    def __init__(self, metrics: list[Metric]) -> None:
        self._metrics = metrics

    def collect(self) -> list[Metric]:
        return self._metrics


def _text(metrics: list[Metric]) -> bytes:
    return generate_latest(_Fixed(metrics))


def _openmetrics(metrics: list[Metric]) -> bytes:
    body: bytes = openmetrics.generate_latest(_Fixed(metrics))  # type: ignore[no-untyped-call]
    return body.removesuffix(_EOF)


def _checked(metrics: list[Metric]) -> bytes:
    """Nothing, after the checks the encoders would fail on (a value or timestamp that is not a
    number, with the encoders' own conversion, so a failure names the same cause; a label or
    help text that is not a string): a collector's health without its text."""
    for metric in metrics:
        if not isinstance(metric.documentation, str):
            raise TypeError(f"{metric.name}: help text is not a string")
        for s in metric.samples:
            floatToGoString(s.value)  # type: ignore[no-untyped-call]
            if s.timestamp is not None:
                floatToGoString(s.timestamp)  # type: ignore[no-untyped-call]
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in s.labels.items()):
                raise TypeError(f"{s.name}: a label name or value is not a string")
    return b""


def render(registry: Collectors, openmetrics_format: bool) -> bytes:
    parts = [body for _, body in registry.run(_openmetrics if openmetrics_format else _text)]
    if openmetrics_format:
        parts.append(_EOF)
    return b"".join(parts)


class ExpositionCache:
    """Rendered /metrics bodies by (format, encoding), invalidated when the view changes."""

    def __init__(self, registry: Collectors) -> None:
        self.registry = registry
        self._lock = threading.Lock()
        self._version = 0
        self._cache: dict[tuple[bool, bool], tuple[int, bytes]] = {}
        self.renders = 0  # bodies rendered since start (tests and the benchmark count them)
        self.compressions = 0  # bodies gzipped since start
        self._health: tuple[int, tuple[Health, ...]] | None = None  # (view version, health)

    def invalidate(self) -> None:
        with self._lock:
            self._version += 1

    def render(self, openmetrics_format: bool, gzipped: bool = False) -> bytes:
        key = (openmetrics_format, gzipped)
        with self._lock:
            version = self._version
            cached = self._cache.get(key)
            if cached is not None and cached[0] == version:
                return cached[1]
        if gzipped:
            body = gzip.compress(self.render(openmetrics_format), GZIP_LEVEL, mtime=0)
            self.compressions += 1
        else:
            body = render(self.registry, openmetrics_format)
            self.renders += 1
        with self._lock:
            self._cache[key] = (version, body)
            if not gzipped:
                self._health = (version, self.registry.health)
        return body

    def health(self) -> tuple[Health, ...]:
        """Each collector's health for the current view: that of the view's latest rendering,
        or, before any, of one pass that collects and checks without rendering (kept for the
        view), so /status learns it without rendering /metrics."""
        with self._lock:
            version = self._version
            if self._health is not None and self._health[0] == version:
                return self._health[1]
        for _ in self.registry.run(_checked):
            pass
        health = self.registry.health
        with self._lock:
            if self._health is None or self._health[0] != version:
                self._health = (version, health)
        return health


def wants_openmetrics(accept: str | None) -> bool:
    if not accept:
        return False
    for part in accept.split(","):
        media = part.split(";")[0].strip()
        if media == "application/openmetrics-text":
            return True
    return False


def wants_gzip(accept_encoding: str | None) -> bool:
    """gzip when the client accepts it with a q-value above 0 (by name, or by `*` unless gzip is
    refused by name); identity otherwise (RFC 9110 12.5.3)."""
    if not accept_encoding:
        return False
    star = None
    for part in accept_encoding.split(","):
        coding, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        coding = coding.lower()
        if coding in ("gzip", "x-gzip"):
            return q > 0
        if coding == "*":
            star = q > 0
    return bool(star)
