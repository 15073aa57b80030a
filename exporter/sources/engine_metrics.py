"""Engine `/metrics` pass-through: keep only allow-listed families, parse only those lines.

Engines name families `<vendor>:<name>` (SGLang: `sglang:prompt_tokens_total`, the simulator:
`helios:...`). The vendor prefix is dropped and the family is re-exported as
`helios_engine_native_<name>`: colons are reserved for recording rules, and one exporter name per
family keeps dashboards independent of the engine vendor. Every engine label is dropped (its values
are free text such as a model path or a request id) except a histogram bucket's `le`, re-rendered
from its parsed number. Lines of other families are skipped by a dictionary lookup on the sample
name, which is why this is several times cheaper than a full exposition parse.

Gauges whose series collapse onto the same labels are summed (ratios averaged) here. Counters and
histograms are not: `parse` keeps each engine series' value (`Parsed.series`) and
`exporter.cycle.passthrough_totals.fold` turns them, poll after poll, into counters that stay counters
when the engine's series come and go.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from prometheus_client.utils import floatToGoString

from exporter.bucket_bounds import bucket_bound
from exporter.defaults import MAX_SERIES_PER_FAMILY

FamilyType = Literal["counter", "gauge", "histogram"]

# Engine family (after the vendor prefix) -> type. Summing the series of one poll is right for
# these gauges, which are per-engine totals or one value per engine; counters and histograms are
# summed as increases across polls (exporter.cycle.passthrough_totals).
DEFAULT_ALLOW: Final[dict[str, FamilyType]] = {
    "prompt_tokens": "counter",
    "generation_tokens": "counter",
    "requests": "counter",
    "num_requests": "counter",
    "num_running_reqs": "gauge",
    "num_queue_reqs": "gauge",
    "num_used_tokens": "gauge",
    "token_usage": "gauge",
    "cache_hit_rate": "gauge",
    "gen_throughput": "gauge",
    "time_to_first_token_seconds": "histogram",
    "time_per_output_token_seconds": "histogram",
    "e2e_request_latency_seconds": "histogram",
}
# Ratios: series that collapse onto one (per-rank or per-model labels dropped) are averaged,
# not summed, so a ratio stays within 0-1.
MEAN_GAUGES: Final = frozenset({"token_usage", "cache_hit_rate"})
EXPORT_PREFIX: Final = "helios_engine_native_"
MAX_COUNT: Final = 2.0**64
# Counter and histogram series whose values are followed from poll to poll (the series of two
# polls are kept, about 250 bytes each besides their text): at most this many in one poll, all
# families together; more are left out and counted as dropped. Honest engines send a few per
# rank and bucket; per-request series are summed (20,000 request ids are).
MAX_ENGINE_SERIES: Final = 50_000
_LABEL_RE: Final = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(?:,|$)')


Labels = tuple[tuple[str, str], ...]
Key = tuple[str, Labels]  # (sample suffix, exported labels) of one exported sample


@dataclass(frozen=True, slots=True)
class Family:
    name: str  # exported family name (counter: without _total)
    type: FamilyType
    help: str
    samples: tuple[tuple[str, Labels, float], ...]


@dataclass(slots=True)
class Parsed:
    families: list[Family] = field(default_factory=list)  # gauges, collapsed per poll
    # Counter and histogram families: engine series (its `name{labels}` text as sent) ->
    # (exported key, value). Folded into monotonic totals by exporter.cycle.passthrough_totals.
    series: dict[str, dict[str, tuple[Key, float]]] = field(default_factory=dict)
    labels_dropped: Counter[str] = field(default_factory=Counter)  # per engine family
    malformed_lines: int = 0
    samples_seen: int = 0  # allow-listed sample lines


def _sample_index(allow: dict[str, FamilyType]) -> dict[str, tuple[str, str]]:
    """Sample name (without vendor) -> (family, sample suffix)."""
    index: dict[str, tuple[str, str]] = {}
    for fam, typ in allow.items():
        if typ == "counter":
            index[fam + "_total"] = (fam, "_total")
            index.setdefault(fam, (fam, "_total"))
        elif typ == "gauge":
            index[fam] = (fam, "")
        else:
            for suffix in ("_bucket", "_sum", "_count"):
                index[fam + suffix] = (fam, suffix)
    return index


_DEFAULT_INDEX: Final = _sample_index(DEFAULT_ALLOW)


def parse_labels(text: str) -> list[tuple[str, str]] | None:
    labels: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _LABEL_RE.match(text, pos)
        if m is None:
            return None if text[pos:].strip() else labels
        labels.append((m.group(1), m.group(2)))
        pos = m.end()
    return labels


def parse(
    text: str,
    allow: dict[str, FamilyType] | None = None,
    max_series_per_family: int = MAX_SERIES_PER_FAMILY,
    cache: SeriesCache | None = None,
) -> Parsed:
    """Filter an engine exposition down to the allow-listed families. Never raises on bad text."""
    allow = DEFAULT_ALLOW if allow is None else allow
    index = _DEFAULT_INDEX if allow is DEFAULT_ALLOW else _sample_index(allow)
    out = Parsed()
    sums: dict[str, dict[Key, float]] = defaultdict(dict)
    counts: dict[tuple[str, Key], int] = {}
    series = out.series
    followed = 0  # counter and histogram series kept in `series`
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        brace = line.find("{")
        space = line.find(" ")
        end = brace if brace != -1 and (space == -1 or brace < space) else space
        if end <= 0:
            out.malformed_lines += 1
            continue
        name = line[:end]
        hit = index.get(name[name.find(":") + 1 :])
        if hit is None:
            continue
        family, suffix = hit
        out.samples_seen += 1
        if end == brace:
            close = line.rfind("}")
            if close < brace:
                out.malformed_lines += 1
                continue
            head, rest = line[: close + 1], line[close + 1 :]
        else:
            head, rest = name, line[end:]
        parsed_head = cache.get(head) if cache is not None else None
        if parsed_head is None:
            parsed_head = _parse_head(head, len(name), suffix)
            if cache is not None:
                cache.put(head, parsed_head)
        kept, dropped = parsed_head
        out.labels_dropped[family] += dropped
        value = sample_value(rest)
        if kept is None or value is None:
            out.malformed_lines += 1
            continue
        if suffix:  # a counter or histogram sample (a gauge's suffix is "")
            # NaN included. A histogram's _sum is summed like a counter too. No engine's 64-bit
            # counter goes past 2^64; the bound also keeps sums across polls finite.
            if not 0 <= value < MAX_COUNT:
                out.malformed_lines += 1
                continue
            engine_series = series.get(family)
            if engine_series is None:
                engine_series = series[family] = {}
            elif head in engine_series:  # the same series twice: which value is meant?
                out.malformed_lines += 1
                continue
            if followed >= MAX_ENGINE_SERIES:
                out.labels_dropped[family] += 1
                continue
            followed += 1
            engine_series[head] = ((suffix, kept), value)
            continue
        key: Key = ("", kept)  # a gauge sample
        bucket = sums[family]
        if key not in bucket and len(bucket) >= max_series_per_family:
            out.labels_dropped[family] += 1
            continue
        bucket[key] = bucket.get(key, 0.0) + value
        if family in MEAN_GAUGES:
            counts[(family, key)] = counts.get((family, key), 0) + 1
    for (family, key), n in counts.items():
        sums[family][key] /= n
    for family, values in sums.items():
        built = build_family(family, "gauge", values)
        if built is not None:
            out.families.append(built)
    out.families.sort(key=lambda f: f.name)
    return out


class SeriesCache:
    """Parsed name-and-labels of engine sample lines, kept across polls.

    Engines send the same series every poll, so the label parse of a line is done once; only
    its value is parsed each time. Bounded in bytes, not entries: long label values that change
    every poll (a request id, a prompt) would otherwise hold 50,000 long strings. Each entry is
    counted as its text plus ENTRY_OVERHEAD; the cache is cleared when full (churn only refills
    it).
    """

    ENTRY_OVERHEAD: Final = 256  # the dict slot, the str header, the parsed tuple

    def __init__(self, max_bytes: int = 8 << 20) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: dict[str, tuple[Labels | None, int]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, head: str) -> tuple[Labels | None, int] | None:
        return self._entries.get(head)

    def put(self, head: str, parsed: tuple[Labels | None, int]) -> None:
        cost = len(head) + self.ENTRY_OVERHEAD
        if cost > self.max_bytes // 64:  # one line never takes a large share: parse it again
            return
        if self.size + cost > self.max_bytes:
            self._entries.clear()
            self.size = 0
        self._entries[head] = parsed
        self.size += cost


def _parse_head(head: str, name_len: int, suffix: str) -> tuple[Labels | None, int]:
    """(kept labels, or None when malformed; number of labels dropped) of `name{labels}`."""
    if len(head) == name_len:
        return (None, 0) if suffix == "_bucket" else ((), 0)
    labels = parse_labels(head[name_len + 1 : -1])
    if labels is None:
        return None, 0
    kept: list[tuple[str, str]] = []
    dropped = 0
    for label, raw in labels:
        if (
            label == "le"
            and suffix == "_bucket"
            # A finite number or `+Inf` (exporter/bucket_bounds.py); else the line is malformed.
            and (number := bucket_bound(raw)) is not None
        ):
            kept.append((label, floatToGoString(number)))  # type: ignore[no-untyped-call]
        else:
            dropped += 1
    if suffix == "_bucket" and not kept:
        return None, dropped
    return tuple(sorted(kept)), dropped


def _parse_float(raw: str) -> float | None:
    try:
        return float(raw)
    except ValueError:
        return None


def sample_value(rest: str) -> float | None:
    """The value of a sample line's text after its name and labels (`value [timestamp]`);
    None when it is not one (NaN is a value: callers decide)."""
    parts = rest.split()
    if not parts or len(parts) > 2:  # value [timestamp]
        return None
    return _parse_float(parts[0])


_HELP: Final[dict[FamilyType, str]] = {
    "gauge": "Engine /metrics family *:{family} (gauge), the engine's series summed with their "
             "labels dropped (ratios averaged).",
    "counter": "Engine /metrics family *:{family}_total: the increases of every engine series in "
               "this generation, summed with their labels dropped (a series that vanishes keeps "
               "what it counted; a reset counts as in Prometheus).",
    "histogram": "Engine /metrics family *:{family} (histogram): the increases of every engine "
                 "series in this generation, summed per le with the other labels dropped.",
}


def build_family(family: str, typ: FamilyType, series: Mapping[Key, float]) -> Family | None:
    """The exported family; None for a histogram that is not cumulative after the label merge."""
    name = EXPORT_PREFIX + family
    samples = sorted(
        ((name + suffix, labels, value) for (suffix, labels), value in series.items()),
        key=lambda s: _order(s[0], s[1]),
    )
    if typ == "histogram" and not _valid_histogram(name, samples):
        return None
    return Family(name, typ, _HELP[typ].format(family=family), tuple(samples))


@functools.lru_cache(maxsize=8192)
def _order(sample_name: str, labels: Labels) -> tuple[str, tuple[tuple[str, float], ...]]:
    """Exposition order: by sample name, then by label values as numbers (a bucket's `le`).
    Cached: the same samples are exported every poll (at most a few thousand: the guard)."""
    return sample_name, tuple((k, float(v)) for k, v in labels)


def _valid_histogram(name: str, samples: list[tuple[str, Labels, float]]) -> bool:
    """Only a histogram that is still cumulative after the label merge is re-exported.
    `samples` are in exposition order: the buckets by `le` as numbers."""
    bucket_name, count_name = name + "_bucket", name + "_count"
    buckets = [(labels, v) for s, labels, v in samples if s == bucket_name]
    count = [v for s, labels, v in samples if s == count_name and not labels]
    if not buckets or buckets[-1][0] != (("le", "+Inf"),) or len(count) != 1:
        return False
    if any(b[1] < a[1] for a, b in itertools.pairwise(buckets)):
        return False
    return buckets[-1][1] == count[0]
