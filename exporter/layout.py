"""The host offload records a pinned model layout implies, and the slabs a budget gives them.

The allocator plan's first step (docs/experiments.md): derive exact `page_record_bytes` and
`row_record_bytes` from the pinned model layout, never from a generic model size. A layout file
(JSON, docs/interface.md section 9) names the attention and recurrent shapes, the tensor-parallel
degree and the engine's limits. Per rank, a KV page record holds

    block_tokens x attention.layers x 2 x kv_heads/tp x head_dim x kv_bytes

and a recurrent-state row record

    recurrent.layers x (state_heads/tp x state_key_dim x state_value_dim
                        + conv_channels/tp x (conv_kernel - 1)) x state_bytes

A host record holds every rank's share, each share rounded up to `limits.alignment`. A budget
and a row fraction then give the slabs as `offload/slab.rs::Pool::sized_counts` carves them:
rows = floor(budget x fraction) // row record, pages = (budget - rows x row record) // page
record, the rest unused.

Every check has its own name (`Problem.check`, one of CHECKS) and message; `load` and `derive`
raise `LayoutError` with every problem of one stage at once. Pure: nothing here reads a clock or
a global, and the only file read is `load`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Final

INT64_MAX: Final = (1 << 63) - 1
NAME_MAX: Final = 128
# Every check, in the order they are made. A problem of one stage stops the later stages.
CHECKS: Final = (
    "file",  # the file cannot be read
    "json",  # not JSON, or not an object
    "unknown_field",  # a field the layout format does not have (a typo would go unnoticed)
    "missing_field",
    "name",  # name: 1-128 printable characters
    "integer",  # a count that is not a JSON integer (3.0, "3" and true are not)
    "positive",  # a count below 1
    "alignment",  # limits.alignment not a power of two (host pages and DMA alignments are)
    "tp_partition",  # heads or channels not divisible by tp
    "overflow",  # a byte count beyond a signed 64-bit integer
    "budget",  # the budget is not 1 to 2^63 - 1 bytes
    "row_fraction",  # the row fraction is not in [0, 1]
    "max_mapping_bytes",  # a slab larger than one mapping may be
    "min_rows",
    "min_pages",
)
SECTIONS: Final[dict[str, tuple[str, ...]]] = {
    "attention": ("layers", "kv_heads", "head_dim"),
    "recurrent": ("layers", "state_heads", "state_key_dim", "state_value_dim", "conv_channels",
                  "conv_kernel"),
    "dtype": ("kv_bytes", "state_bytes"),
    "limits": ("alignment", "max_mapping_bytes", "min_rows", "min_pages"),
}
TOP_COUNTS: Final = ("tp", "block_tokens")
OPTIONAL: Final = ("description",)  # free text for the reader; never checked, never exported


@dataclass(frozen=True, slots=True)
class Problem:
    check: str  # one of CHECKS
    message: str

    def __str__(self) -> str:
        return self.message


class LayoutError(ValueError):
    """Every problem found at one stage (reading, derivation, slabs), each with its check."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = tuple(problems)

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(p.check for p in self.problems)


@dataclass(frozen=True, slots=True)
class Layout:
    """A model layout as the file gives it; every count an int of at least 1."""

    name: str
    tp: int
    block_tokens: int
    attention: dict[str, int]
    recurrent: dict[str, int]
    dtype: dict[str, int]
    limits: dict[str, int]
    description: str = ""


@dataclass(frozen=True, slots=True)
class Share:
    """One rank's share of a record: its bytes, and its bytes rounded up to the alignment."""

    bytes: int
    aligned: int


@dataclass(frozen=True, slots=True)
class Records:
    """The record sizes a layout implies, per rank and per host record (every rank's share)."""

    layout: str
    tp: int
    alignment: int
    page: Share
    row: Share

    @property
    def page_record_bytes(self) -> int:
        return self.tp * self.page.aligned

    @property
    def row_record_bytes(self) -> int:
        return self.tp * self.row.aligned

    def record_bytes(self) -> dict[str, int]:
        """By slab kind, as the snapshot's `offload.slabs.<kind>.record_bytes` says them."""
        return {"row": self.row_record_bytes, "page": self.page_record_bytes}


@dataclass(frozen=True, slots=True)
class Partition:
    """One budget carved into whole row and page records (sized_counts)."""

    budget_bytes: int
    row_fraction: Fraction
    row_record_bytes: int
    page_record_bytes: int
    rows: int
    pages: int

    @property
    def row_slab_bytes(self) -> int:
        return self.rows * self.row_record_bytes

    @property
    def page_slab_bytes(self) -> int:
        return self.pages * self.page_record_bytes

    @property
    def unused_bytes(self) -> int:
        return self.budget_bytes - self.row_slab_bytes - self.page_slab_bytes


# -- reading ------------------------------------------------------------------------------------
def load(path: Path) -> Layout:
    """The layout in `path`; LayoutError naming the file in every message."""
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise LayoutError([Problem("file", f"{path}: cannot read it: "
                                           f"{exc.strerror or exc}")]) from None
    try:
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise LayoutError([Problem("json", f"{path}: {exc} is given twice (which one counts "
                                           "would be a guess)")]) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise LayoutError([Problem("json", f"{path}: not JSON ({exc})")]) from None
    try:
        return parse(doc)
    except LayoutError as exc:
        raise LayoutError([Problem(p.check, f"{path}: {p.message}") for p in exc.problems]) \
            from None


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(json.dumps(key)[:80])
        out[key] = value
    return out


def parse(doc: Any) -> Layout:
    """A layout from a decoded JSON document; LayoutError listing every field's problem."""
    if not isinstance(doc, dict):
        raise LayoutError([Problem("json", f"a layout is a JSON object, not {_kind(doc)}")])
    problems: list[Problem] = []
    known = {"name", *TOP_COUNTS, *SECTIONS, *OPTIONAL}
    problems += [Problem("unknown_field", f"{key}: not a layout field (known: "
                                          f"{', '.join(sorted(known))})")
                 for key in doc if key not in known]
    name = doc.get("name")
    if name is None:
        problems.append(Problem("missing_field", "name: missing"))
    elif not isinstance(name, str) or not 0 < len(name) <= NAME_MAX or not name.isprintable():
        problems.append(Problem("name", f"name: expected 1-{NAME_MAX} printable characters, "
                                        f"got {_shown(name)}"))
    description = doc.get("description", "")
    if not isinstance(description, str):
        problems.append(Problem("json", f"description: expected text, got {_shown(description)}"))
    counts = {key: _count(key, doc, problems) for key in TOP_COUNTS}
    sections: dict[str, dict[str, int]] = {}
    for section, fields in SECTIONS.items():
        raw = doc.get(section)
        if raw is None:
            problems.append(Problem("missing_field", f"{section}: missing (an object with "
                                                     f"{', '.join(fields)})"))
            continue
        if not isinstance(raw, dict):
            problems.append(Problem("json", f"{section}: expected an object, got {_kind(raw)}"))
            continue
        problems += [Problem("unknown_field", f"{section}.{key}: not a layout field (known: "
                                              f"{', '.join(fields)})")
                     for key in raw if key not in fields]
        sections[section] = {key: _count(f"{section}.{key}", raw, problems, key)
                             for key in fields}
    align = sections.get("limits", {}).get("alignment", 0)
    if align > 0 and align & (align - 1):
        problems.append(Problem("alignment", f"limits.alignment: must be a power of two "
                                             f"(4096, 2097152, ...), got {align}"))
    if problems:
        raise LayoutError(problems)
    return Layout(name=str(name), tp=counts["tp"], block_tokens=counts["block_tokens"],
                  description=str(description), **sections)


def _count(where: str, doc: dict[str, Any], problems: list[Problem], key: str = "") -> int:
    value = doc.get(key or where)
    if value is None:
        problems.append(Problem("missing_field", f"{where}: missing"))
        return 0
    # bool is an int in Python, and 64.0 == 64: neither is a JSON integer.
    if isinstance(value, bool) or not isinstance(value, int):
        problems.append(Problem("integer", f"{where}: expected an integer, got {_shown(value)}"))
        return 0
    if value < 1:
        problems.append(Problem("positive", f"{where}: must be at least 1, got {value}"))
        return 0
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


# -- deriving -----------------------------------------------------------------------------------
def records(layout: Layout) -> Records:
    """Both records' shares per rank and per host record; LayoutError on a TP partition that
    does not divide, or a byte count beyond a signed 64-bit integer."""
    att, rec, dt, tp = layout.attention, layout.recurrent, layout.dtype, layout.tp
    problems = [
        Problem("tp_partition", f"{field}: {value} is not divisible by tp {tp} (each rank holds "
                                f"{field.split('.')[1]}/tp)")
        for field, value in (("attention.kv_heads", att["kv_heads"]),
                             ("recurrent.state_heads", rec["state_heads"]),
                             ("recurrent.conv_channels", rec["conv_channels"]))
        if value % tp
    ]
    if problems:
        raise LayoutError(problems)
    page_terms = (("block_tokens", layout.block_tokens), ("attention.layers", att["layers"]),
                  ("2 (K and V)", 2), ("kv_heads/tp", att["kv_heads"] // tp),
                  ("head_dim", att["head_dim"]), ("kv_bytes", dt["kv_bytes"]))
    page = _product(page_terms)
    state = (rec["state_heads"] // tp) * rec["state_key_dim"] * rec["state_value_dim"]
    conv = (rec["conv_channels"] // tp) * (rec["conv_kernel"] - 1)
    row = rec["layers"] * (state + conv) * dt["state_bytes"]
    align = layout.limits["alignment"]
    shares = {"page": page, "row": row}
    for kind, raw in shares.items():
        aligned = _aligned(raw, align)
        what = f"the {kind} share per rank"
        if raw > INT64_MAX:
            detail = (" x ".join(f"{n} {v}" for n, v in page_terms) if kind == "page" else
                      f"recurrent.layers {rec['layers']} x (state {state} + conv {conv}) x "
                      f"state_bytes {dt['state_bytes']}")
            problems.append(Problem("overflow", f"{what} ({detail} = {raw}) overflows a signed "
                                                f"64-bit byte count (at most {INT64_MAX})"))
        elif aligned * tp > INT64_MAX:
            problems.append(Problem("overflow", f"the {kind} record ({tp} ranks x {aligned} "
                                                f"aligned bytes = {aligned * tp}) overflows a "
                                                f"signed 64-bit byte count (at most {INT64_MAX})"))
    if problems:
        raise LayoutError(problems)
    return Records(layout.name, tp, align, Share(page, _aligned(page, align)),
                   Share(row, _aligned(row, align)))


def _product(terms: tuple[tuple[str, int], ...]) -> int:
    out = 1
    for _, value in terms:
        out *= value
    return out


def _aligned(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def fraction(text: str) -> Fraction:
    """A row fraction as written ("0.25", "1/4"), exactly; ValueError otherwise."""
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"expected a fraction such as 0.25 or 1/4, got {text!r}") from None
    return value


def partition(recs: Records, budget_bytes: int, row_fraction: Fraction) -> Partition:
    """sized_counts: whole rows in floor(budget x fraction) bytes, whole pages in the rest.
    LayoutError when the budget or the fraction is out of range."""
    problems = []
    if not 1 <= budget_bytes <= INT64_MAX:
        problems.append(Problem("budget", f"budget: expected 1 to {INT64_MAX} bytes, got "
                                          f"{budget_bytes}"))
    if not 0 <= row_fraction <= 1:
        problems.append(Problem("row_fraction", f"row fraction: expected 0 to 1, got "
                                                f"{fraction_text(row_fraction)}"))
    if problems:
        raise LayoutError(problems)
    row_bytes = int(budget_bytes * row_fraction)  # floor: both are non-negative
    rows = row_bytes // recs.row_record_bytes
    pages = (budget_bytes - rows * recs.row_record_bytes) // recs.page_record_bytes
    return Partition(budget_bytes, row_fraction, recs.row_record_bytes, recs.page_record_bytes,
                     rows, pages)


def limit_problems(layout: Layout, part: Partition) -> list[Problem]:
    """The engine limits a partition breaks: a slab over max_mapping_bytes, too few rows or
    pages. Empty when it keeps them all."""
    lim = layout.limits
    at = f"at {part.budget_bytes} bytes and row fraction {fraction_text(part.row_fraction)}"
    problems = [
        Problem("max_mapping_bytes", f"the {kind} slab ({count} x {size} = {count * size} "
                                     f"bytes) exceeds limits.max_mapping_bytes "
                                     f"{lim['max_mapping_bytes']}")
        for kind, count, size in (("row", part.rows, part.row_record_bytes),
                                  ("page", part.pages, part.page_record_bytes))
        if count * size > lim["max_mapping_bytes"]
    ]
    if part.rows < lim["min_rows"]:
        problems.append(Problem("min_rows", f"the row slab holds {_records(part.rows, 'row')} "
                                            f"of {part.row_record_bytes} bytes {at}, fewer than "
                                            f"limits.min_rows {lim['min_rows']}"))
    if part.pages < lim["min_pages"]:
        problems.append(Problem("min_pages", f"the page slab holds "
                                             f"{_records(part.pages, 'page')} of "
                                             f"{part.page_record_bytes} bytes {at}, fewer than "
                                             f"limits.min_pages {lim['min_pages']}"))
    return problems


def _records(n: int, kind: str) -> str:
    return f"{n} {kind}" + ("" if n == 1 else "s")


def derive(layout: Layout, budget_bytes: int, row_fraction: Fraction) -> tuple[Records, Partition]:
    """Records and the partition, raising LayoutError when the partition breaks a limit."""
    recs = records(layout)
    part = partition(recs, budget_bytes, row_fraction)
    problems = limit_problems(layout, part)
    if problems:
        raise LayoutError(problems)
    return recs, part


def fraction_text(value: Fraction) -> str:
    """The exact value, readably: 0.25 as 0.25, 1/3 as 1/3."""
    decimal = f"{float(value):.12g}"
    return decimal if Fraction(decimal) == value else str(value)
