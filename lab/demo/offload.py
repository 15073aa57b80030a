"""The offload story from the sidecar's own `/metrics`: the tier's geometry, then for every replay
pass (or every `period` seconds of other traffic) its lookups and hits, row- versus page-pressure
evictions, and how many row evictions came while the page slab had headroom; with a schema 3
engine also where the prompt tokens came from and how the host stores ended."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from exporter import defaults
from lab.demo.story import INDENT, Stamp


@dataclass(frozen=True)
class Tier:
    """The offload counters and slabs of one generation, as one scrape of the sidecar showed them."""

    generation: str
    lookups: float = 0.0
    hits: float | None = 0.0  # None: the engine does not export it (serve --engine-kind)
    misses: dict[str, float] = field(default_factory=dict)
    attempts: dict[str, float] = field(default_factory=dict)  # by pressure: row, page
    headroom: float | None = 0.0  # row attempts while pages had headroom; None: not exported
    free: dict[str, float] = field(default_factory=dict)  # by kind: row, page
    capacity: dict[str, float] = field(default_factory=dict)
    record_bytes: dict[str, float] = field(default_factory=dict)
    budget: float | None = None
    # Schema 3 (empty for a schema 1 engine): prompt tokens by source, stores by outcome.
    tokens: dict[str, float] = field(default_factory=dict)
    stores: dict[str, float] = field(default_factory=dict)


def parse(text: str) -> Tier | None:
    """The current generation's tier from an exposition; None before the first good snapshot."""
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    generation = next((s.labels["generation"] for s in samples
                       if s.name == "helios_monitoring_generation_info"), None)
    if generation is None:
        return None
    scalars = {"helios_offload_lookups_total": "lookups", "helios_offload_lookup_hits_total": "hits",
               "helios_offload_row_pressure_with_page_headroom_total": "headroom",
               "helios_offload_budget_bytes": "budget"}
    keyed = {"helios_offload_lookup_misses_total": ("misses", "reason"),
             "helios_offload_eviction_attempts_total": ("attempts", "pressure"),
             "helios_offload_slab_free": ("free", "kind"),
             "helios_offload_slab_capacity": ("capacity", "kind"),
             "helios_offload_slab_record_bytes": ("record_bytes", "kind"),
             "helios_offload_prompt_tokens_total": ("tokens", "source"),
             "helios_offload_host_store_outcomes_total": ("stores", "outcome")}
    values: dict[str, float] = {}
    maps: dict[str, dict[str, float]] = {name: {} for name, _ in keyed.values()}
    for s in samples:
        if s.labels.get("generation") != generation:
            continue
        if s.name in scalars:
            values[scalars[s.name]] = s.value
        elif s.name in keyed:
            name, label = keyed[s.name]
            maps[name][s.labels[label]] = s.value
    return Tier(generation=generation, lookups=values.get("lookups", 0.0),
                hits=values.get("hits"), headroom=values.get("headroom"),
                budget=values.get("budget"), **maps)


def _bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n / size:g} {unit}"
    return f"{n:g} B"


def _count(n: float) -> str:
    return f"{n:g}"


def geometry(tier: Tier) -> str:
    rows, pages = tier.capacity.get("row"), tier.capacity.get("page")
    if rows is None or pages is None:
        return f"generation {tier.generation}: no offload slabs in its snapshot"
    if not tier.record_bytes:  # an engine that does not export its record sizes
        return f"generation {tier.generation}: {_count(rows)} rows and {_count(pages)} pages"
    text = (f"generation {tier.generation}: {_count(rows)} rows of "
            f"{_bytes(tier.record_bytes.get('row', 0))} and {_count(pages)} pages of "
            f"{_bytes(tier.record_bytes.get('page', 0))}")
    return text + (f" in a {_bytes(tier.budget)} budget" if tier.budget else "")


def activity(before: Tier, now: Tier, what: str) -> list[str]:
    """`what`'s lookups and hits; evictions by pressure and the slabs' free records; with a
    schema 3 engine a third line (`_v3`)."""
    lookups = now.lookups - before.lookups
    misses = {r: v - before.misses.get(r, 0.0) for r, v in now.misses.items()}
    missed = ", ".join(f"{r} {_count(v)}" for r, v in sorted(misses.items(), key=lambda i: -i[1])
                       if v > 0)
    if now.hits is None or before.hits is None:
        first = f"{what}: {_count(lookups)} lookups (hits not exported by this engine)"
    else:
        first = f"{what}: {_count(now.hits - before.hits)} of {_count(lookups)} lookups hit"
    first += f" (misses: {missed})" if missed else ""
    rows = now.attempts.get("row", 0.0) - before.attempts.get("row", 0.0)
    pages = now.attempts.get("page", 0.0) - before.attempts.get("page", 0.0)
    if now.headroom is None or before.headroom is None or not now.attempts:
        second = f"evictions not exported by this engine; free now: {slabs(now)}"
    else:
        second = (f"row evictions {_count(rows)} ({_count(now.headroom - before.headroom)} "
                  f"while >= {defaults.PAGE_HEADROOM_RATIO:.0%} of pages were free), page "
                  f"evictions {_count(pages)}; free now: {slabs(now)}")
    return [first, INDENT + second, *_v3(before, now)]


def _v3(before: Tier, now: Tier) -> list[str]:
    """Where the prompt tokens came from and how the host stores ended (schema 3 only)."""
    if not now.tokens or not now.stores:
        return []
    tokens = {k: v - before.tokens.get(k, 0.0) for k, v in now.tokens.items()}
    stores = {k: v - before.stores.get(k, 0.0) for k, v in now.stores.items()}
    total = sum(tokens.values())
    split = ", ".join(f"{k.replace('_', ' ')} {v / total:.0%}" for k, v in tokens.items()
                      ) if total else "none looked up"
    ended = ", ".join(f"{k.replace('_', ' ')} {_count(v)}" for k, v in stores.items())
    return [INDENT + f"prompt tokens: {split}; host stores: {ended}"]


def slabs(tier: Tier) -> str:
    parts = []
    for kind, plural in (("row", "rows"), ("page", "pages")):
        free, cap = tier.free.get(kind), tier.capacity.get(kind)
        if free is None or not cap:
            continue
        parts.append(f"{plural} {_count(free)}/{_count(cap)} ({free / cap:.0%})")
    return ", ".join(parts) or "unknown"


class OffloadNarrator:
    """With `pass_size` (a replay of that many prompts, one lookup each), a report per pass, named
    by `pass_name(n)` (n from 0); else a report every `period` seconds in which lookups happened."""

    def __init__(self, stamp: Stamp, pass_size: int | None = None,
                 pass_name: Callable[[int], str] = lambda n: f"pass {n + 1}",
                 period: float = 20.0) -> None:
        self.stamp = stamp
        self.pass_size = pass_size
        self.pass_name = pass_name
        self.period = period
        self.base: Tier | None = None  # counters at the last report
        self.passes = 0
        self.since = stamp.clock()

    def lines(self, text: str) -> list[str]:
        tier = parse(text)
        if tier is None:
            return []
        out: list[str] = []
        if self.base is None or tier.generation != self.base.generation:
            # A new generation counts from zero: its first pass starts at its first request.
            out.append(self.stamp("offload", geometry(tier)))
            self.base, self.passes, self.since = Tier(generation=tier.generation), 0, self.stamp.clock()
        if self.pass_size:
            done = int(tier.lookups // self.pass_size)
            if done > self.passes:
                what = f"pass {done}, {self.pass_name(done - 1)}"
                if tier.lookups != done * self.pass_size:  # a poll in the middle of a pass
                    what += " (as far as the last poll saw)"
                out += self._report(tier, what)
                self.passes = done
        elif self.stamp.clock() - self.since >= self.period:
            if tier.lookups > self.base.lookups:
                out += self._report(tier, f"last {self.stamp.clock() - self.since:.0f}s")
            self.since = self.stamp.clock()
        return out

    def _report(self, tier: Tier, what: str) -> list[str]:
        assert self.base is not None
        first, *rest = activity(self.base, tier, what)
        self.base = tier
        return [self.stamp("offload", first), *rest]
