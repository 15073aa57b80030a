"""The restore window's data: engines, the open window, the last windows, the whole state, inputs.

Everything here is immutable and plain: `window.step` builds the next state, `store` writes it,
collectors and `/status` read it. Fields are only ever added (with a default), so a state file
written by an earlier release still loads. A field marked `PROCESS_ONLY` is what one sidecar
process watched: it is never written, and a new process starts from its default (the one home
of that list: `process_only`, read by `window.restarted` and the codec).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Final, Literal

from exporter.defaults import DOWN_GRACE, REQUEST_CUTOFF, RESTORE_BOUND
from exporter.snapshot.model import Snapshot

Phase = Literal["serving", "draining", "drained", "down", "restoring", "verifying"]
Cause = Literal["drain", "event", "unreachable"]
EventKind = Literal["drain_started", "restore_started", "window_closed", "abort"]
Outcome = Literal["in_time", "late", "aborted", "unobserved"]

PHASES: Final = ("serving", "draining", "drained", "down", "restoring", "verifying")
CAUSES: Final = ("drain", "event", "unreachable")
EVENT_KINDS: Final = ("drain_started", "restore_started", "window_closed", "abort")
OUTCOMES: Final = ("in_time", "late", "aborted", "unobserved")
# The ids of the last this many accepted events are kept (on file too): a replay of an older one
# is a new event (docs/interface.md section 6.6).
MAX_EVENT_IDS: Final = 1000
PROCESS_ONLY: Final[Mapping[str, Any]] = MappingProxyType({"process_only": True})


def process_only(cls: type) -> dict[str, Any]:
    """The fields of `cls` that are never written, with the default a new process starts from."""
    return {f.name: f.default for f in fields(cls) if f.metadata.get("process_only")}
# Two `started_at` further apart than this are two incarnations (an engine that computes its
# start from a whole-second uptime may report it up to a second apart, plus rounding).
SAME_START_SECONDS: Final = 2.0


@dataclass(frozen=True, slots=True)
class Bounds:
    request_cutoff: float = REQUEST_CUTOFF
    restore_bound: float = RESTORE_BOUND
    down_grace: float = DOWN_GRACE
    preflight: tuple[str, ...] = ()  # configured probes: "direct", "routed"


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine incarnation: what the identity checks compare, and when it says it started."""

    generation: str
    image_digest: str | None = None
    container_id: str | None = None
    package: str | None = None
    checkpoint: str | None = None
    started_at: float | None = None  # the engine's own clock: evidence of when a restore ended

    @classmethod
    def of(cls, snap: Snapshot) -> Engine:
        ident = snap.identity
        if ident is None:
            return cls(snap.generation, started_at=snap.started_at)
        return cls(snap.generation, ident.image_digest, ident.container_id, ident.package,
                   ident.checkpoint, snap.started_at)

    def replaced_by(self, other: Engine) -> bool:
        """`other` is another incarnation: another generation, container or start. Unknown
        fields do not tell: the same generation with no container id and no `started_at` is the
        same incarnation (docs/interface.md section 6.2)."""
        if self.generation != other.generation:
            return True
        if (self.container_id is not None and other.container_id is not None
                and self.container_id != other.container_id):
            return True
        # A restart that kept its generation (the check `fresh_generation` fails it).
        return (self.started_at is not None and other.started_at is not None
                and abs(self.started_at - other.started_at) > SAME_START_SECONDS)


@dataclass(frozen=True, slots=True)
class Window:
    start: float
    cause: Cause
    incumbent: Engine | None  # the engine serving when the window opened: whose requests drain
    last_inflight: int | None = None  # the incumbent's in-flight as last seen while it was up
    drained: bool = False  # in-flight reached 0, admission not open, before it went / the cutoff
    seen_not_open: bool = False  # engine seen draining, closed or unreachable in this window
    restored: Engine | None = None  # engine answering with admission open again
    preflight: dict[str, bool] = field(default_factory=dict)
    restore_started: bool = False
    # The incumbent is away: unreachable for longer than the down grace, or another incarnation
    # answers. Its own incarnation answering again clears it: it never went away.
    incumbent_gone: bool = False
    lost: int | None = None  # incumbent requests in flight when it went away or past the cutoff
    lost_at_cutoff: bool = False  # `lost` was counted at the request cutoff (not by going away)
    # The last verified engine, which the identity checks compare with; None: the incumbent.
    # Differs from the incumbent only when the incumbent is a restore whose checks failed.
    reference: Engine | None = None
    # False when the window opened on the sidecar's first look after it started: the engine
    # may have gone away earlier, so the true start (and deadline) may be earlier than `start`.
    start_exact: bool = True
    last_unrestored: float | None = None  # last observation that saw the restore incomplete
    unreachable: bool = False  # the latest poll in this window failed
    # This sidecar process saw the restore incomplete.
    watched: bool = field(default=False, metadata=PROCESS_ONLY)
    # The start on this process's monotonic clock, when this process saw the window open: its
    # observations are timed from it (a step of the wall clock changes none of them); None: the
    # start came from the file (another process), timed on the wall clock, never before it.
    start_mono: float | None = field(default=None, metadata=PROCESS_ONLY)

    def record(self, at: float, mono: float | None) -> float:
        """The time of record (wall-clock seconds) of an observation inside this window made at
        `at` (wall clock), `mono` (monotonic): the start plus the monotonic time since it when
        this process saw the start, else `at`; never before the start."""
        if self.start_mono is not None and mono is not None:
            return self.start + max(0.0, mono - self.start_mono)
        return max(at, self.start)

    def deadline(self, bounds: Bounds, bound: Literal["request_cutoff", "restore"]) -> float:
        return self.start + (bounds.request_cutoff if bound == "request_cutoff" else bounds.restore_bound)

    def incumbent_inflight(self) -> int | None:
        """The incumbent's in-flight as last seen while up; 0 once it went away or was replaced
        (the restored engine's own requests never count); None while never reported."""
        return 0 if self.incumbent_gone else self.last_inflight

    def compared_with(self) -> Engine | None:
        return self.reference if self.reference is not None else self.incumbent


@dataclass(frozen=True, slots=True)
class LastWindow:
    """A window that ended (closed, aborted) or a restore nobody watched, with its evidence."""

    start: float | None  # None: a restore that happened while the sidecar was down
    end: float  # time of record: the observation (or event) that closed it, or the abort
    cause: Cause | None  # None: nobody watched it open
    outcome: Outcome
    # Evidence of when the restore completed: after `not_before`, at or before `end`. Equal to
    # `end` when the sidecar watched it happen; None when nothing bounds it (and for an abort).
    not_before: float | None = None
    start_exact: bool = True
    lost: int | None = None  # the incumbent's requests lost; None: unknown
    incumbent: Engine | None = None
    reference: Engine | None = None  # what the restored engine was compared with
    restored: Engine | None = None
    # Closed without a restored engine: the incumbent's own incarnation admitted again (it never
    # restarted), so no check was judged. (A file of an earlier release does not say: False.)
    nothing_restored: bool = False


@dataclass(frozen=True, slots=True)
class RestoreState:
    phase: Phase = "serving"
    window: Window | None = None
    last_seen: Engine | None = None  # the engine of the last good snapshot
    last_inflight: int | None = field(default=None, metadata=PROCESS_ONLY)  # last good snapshot's
    # First failed poll of the current failure streak.
    unreachable_since: float | None = field(default=None, metadata=PROCESS_ONLY)
    # The same on the monotonic clock: the down grace is a duration, never measured on the wall
    # clock (a step back of the wall clock would delay a window by as much).
    unreachable_mono: float | None = field(default=None, metadata=PROCESS_ONLY)
    checks: dict[str, bool] = field(default_factory=dict)  # of the last closed window
    last_window: LastWindow | None = None  # the last window that ended, however
    event_ids: tuple[str, ...] = ()  # the last MAX_EVENT_IDS accepted, oldest first
    # The kind each id was accepted for (an id reused for another kind is refused); files of
    # earlier releases do not say: such an id is a duplicate for any kind.
    event_kinds: dict[str, str] = field(default_factory=dict)
    judged: LastWindow | None = None  # the window `checks` belong to (an abort keeps them)
    reference: Engine | None = None  # the engine the last judged window compared with or passed
    # New incarnations that no window saw coming (docs/interface.md section 6.8), and when the
    # last one was seen.
    unplanned_restarts: int = 0
    last_unplanned_restart: float | None = None
    # A good snapshot since this sidecar process started.
    seen_since_start: bool = field(default=False, metadata=PROCESS_ONLY)
    # An abort discarded the window while the engine was unreachable: that outage opens no new
    # window (it would restart the clock of an engine declared gone); cleared when it answers.
    outage_aborted: bool = False


@dataclass(frozen=True, slots=True)
class Poll:
    at: float  # wall clock: what a window's start and its record show
    snapshot: Snapshot | None  # None: the poll failed
    mono: float | None = None  # monotonic clock, for durations (the down grace); None: `at`
    # The engine answered although without a valid snapshot (a source error, not an outage:
    # docs/interface.md section 6.1); only with `snapshot` None.
    answered: bool = False


@dataclass(frozen=True, slots=True)
class Event:
    at: float
    id: str
    kind: EventKind
    mono: float | None = None  # monotonic clock; None: `at`


@dataclass(frozen=True, slots=True)
class Preflight:
    at: float
    probe: str  # "direct" | "routed"
    ok: bool
    mono: float | None = None  # monotonic clock; None: `at`


Input = Poll | Event | Preflight
