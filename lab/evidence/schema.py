"""The parts of evidence.json and probe.json that the commands read, checked before use.

A file is checked strictly (a count is a number, never "x"; a budget an integer) and only in the
fields a reader relies on; anything else in it is left alone. `check_evidence` and
`check_record` raise SchemaError naming the field (`phases[3].deltas.requests: ...`), so a
malformed file is a clear refusal and never a traceback halfway through a comparison.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

Count = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Whole = Annotated[int, Field(ge=0)]


class SchemaError(ValueError):
    """The document is not usable; the message names the field."""


class _Part(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class Latency(_Part):
    count: Count
    sum: Annotated[float, Field(allow_inf_nan=False)]
    buckets: list[list[Any]] = []  # [upper bound as text, cumulative count]

    @field_validator("buckets")
    @classmethod
    def _pairs(cls, buckets: list[list[Any]]) -> list[list[Any]]:
        for i, pair in enumerate(buckets):
            if len(pair) != 2 or not isinstance(pair[0], str):
                raise ValueError(f"bucket {i} is not [bound as text, count]")
            try:
                float(pair[0])
            except ValueError:
                raise ValueError(f"bucket {i}: bound {pair[0][:20]!r} is not a number") from None
            count = pair[1]
            if isinstance(count, bool) or not isinstance(count, int | float) or not count >= 0:
                raise ValueError(f"bucket {i}: count {str(count)[:20]!r} is not a number >= 0")
        return buckets


class Deltas(_Part):
    requests: Count | None = None
    lookups: Count | None = None
    hits: Count | None = None
    misses: dict[str, Count] = {}
    prompt_tokens: Count | None = None
    generation_tokens: Count | None = None
    prompt_tokens_reused: Count | None = None
    host_tokens_restored: Count | None = None
    row_pressure_attempts: Count | None = None
    row_pressure_with_page_headroom: Count | None = None
    e2e_latency_seconds: Latency | None = None
    # (v3) null from an engine whose snapshot lacks the section (schema 1): unknown, never 0
    stores_dropped_full: Count | None = None
    stores_dropped_ineligible: Count | None = None
    stores_failed: Count | None = None
    blocked_tokens: dict[str, Count] | None = None
    prompt_tokens_computed: Count | None = None
    prompt_tokens_gpu_prefix: Count | None = None
    prompt_tokens_host_restored: Count | None = None


class Slab(_Part):
    capacity: Whole = 0
    free: Whole = 0
    record_bytes: Whole = 0


class Capture(_Part):
    at: Annotated[float, Field(allow_inf_nan=False)] | None = None
    generation: str | None = None
    identity: dict[str, str] = {}
    budget_bytes: Whole | None = None
    slabs: dict[str, Slab] = {}
    counters: dict[str, Whole] = {}
    requests: Count | None = None
    ranks: Whole | None = None
    inflight: Whole | None = None
    power_limits_watts: dict[str, Count | None] | None = None


class Phase(_Part):
    name: str
    state: Literal["open", "ended"] | None = None
    valid: bool | None = None
    invalid_reasons: list[str] = []
    generation: str | None = None
    begin: Capture | None = None
    end: Capture | None = None
    deltas: Deltas | None = None


Sha256 = Annotated[str, Field(pattern="^[0-9a-f]{64}$")]


class Output(_Part):
    """One request's output as the probe received it (v3)."""

    sha256: Sha256  # the body's
    output_sha256: Sha256 | None = None
    completion_tokens: Whole | None = None
    expected_tokens: Whole | None = None
    prompt_tokens: Whole | None = None


class Pass(_Part):
    """One probe pass as the evidence document carries it."""

    phase: str
    order: str | None = None
    sent: Whole
    failed: Whole
    sequence_sha256: Sha256
    body_sha256: list[Sha256] | None = None
    failures: list[dict[str, Any]] = []
    # v3: the repetition it belongs to, the pass before it on its incarnation, what came back
    repetition: Whole | None = None
    repetitions: Whole | None = None
    previous: str | None = None
    outputs: list[Output] | None = None
    completion_tokens: Whole | None = None
    prompt_tokens: Whole | None = None
    declared: dict[str, str] = {}
    engine: str | None = None


class Evidence(_Part):
    phases: list[Phase]
    passes: list[Pass] = []
    probes: list[dict[str, Any]] = []
    simulated: bool | None = None


class RecordPass(Pass):
    requests: list[dict[str, Any]] = []


class Record(_Part):
    format: Literal[1]
    name: str
    complete: bool | None = None  # absent in records of older probes (they were complete)
    passes: list[RecordPass]


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the document)"


def _check(model: type[_Part], doc: Any) -> None:
    if not isinstance(doc, dict):
        raise SchemaError("not a JSON object")
    try:
        model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        raise SchemaError(f"{_where(tuple(first['loc']))}: {message}{more}") from None


def check_evidence(doc: Any) -> None:
    _check(Evidence, doc)
    names = [p["name"] for p in doc["phases"]]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SchemaError(f"phases: the names {', '.join(twice)} occur more than once (a phase "
                          "name means one phase)")


def check_record(doc: Any) -> None:
    _check(Record, doc)
