"""The cache-order probe and the arms' repetitions: a corpus sent pass by pass, each pass a phase.

The cache-order probe's rules (docs/experiments.md section 3), kept here:

- every body fixes its output length (`max_tokens` with `min_tokens` equal to it, or
  `ignore_eos`), and is sent byte for byte as the corpus holds it;
- the prime runs on a fresh incarnation: its begin capture must show zero lookups and a
  generation this probe has not seen (`--fresh-command` makes one before every prime);
- nothing is sent between passes, and nothing but the probe's bodies reaches the engine in a
  pass: the edges' captures show it (a pass's end capture against the next pass's begin, the
  engine's finished requests and lookups against the requests sent);
- the probe stops at the first identity, pin, authentication or output-contract failure, and
  at traffic it did not send, keeping every output: what ran is bracketed, recorded and
  reported.

Plan: without `--repetitions`, pass n in order o is the phase `NAME/<o>-<n>`, all on one
incarnation (the prime first). With `--repetitions R`, each repetition r runs the orders on its
own fresh incarnation: `NAME/r/<o>-<n>` for all but the last pass and `NAME/r` for the last, the
pass `compare` measures.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from lab.client.sidecar import SidecarClient, SidecarError
from lab.probe.corpus import Corpus
from lab.probe.send import Sender

ORDERS = ("forward", "reverse")
# What must not change while a probe runs (the container may, across --fresh-command).
IDENTITY_KEYS = ("image_digest", "package", "checkpoint")
FRESH_BEGIN_RETRIES = 60  # seconds a new incarnation's first capture may take to succeed


def parse_orders(text: str) -> list[str]:
    orders = [o.strip() for o in text.split(",") if o.strip()]
    bad = [o for o in orders if o not in ORDERS]
    if not orders or bad:
        raise ValueError(f"--order takes a comma-separated list of {' and '.join(ORDERS)}, "
                         f"got {text!r}")
    return orders


@dataclass(frozen=True)
class PassPlan:
    phase: str
    order: str
    corpus: Corpus
    repetition: int | None = None  # None: a probe without repetitions
    prime: bool = False  # the first pass on its incarnation (a fresh one)


def plan(name: str, orders: Sequence[str], repetitions: int, corpus: Corpus,
         replay: Corpus | None = None) -> list[PassPlan]:
    """The passes: on each incarnation the first primes, every later one replays (`replay`
    when given)."""
    def passes(prefix: str, r: int | None, last: str | None) -> list[PassPlan]:
        out = []
        for n, order in enumerate(orders, 1):
            phase = last if last and n == len(orders) else f"{prefix}/{order}-{n}"
            out.append(PassPlan(phase, order, corpus if n == 1 else replay or corpus, r, n == 1))
        return out

    if not repetitions:
        return passes(name, None, None)
    return [p for r in range(1, repetitions + 1) for p in passes(f"{name}/{r}", r, f"{name}/{r}")]


@dataclass
class PassRecord:
    phase: str
    order: str
    corpus: str
    repetition: int | None = None
    repetitions: int | None = None
    previous: str | None = None  # the pass before it on the same incarnation
    generation: str | None = None  # of its begin capture
    requests: list[dict[str, Any]] = field(default_factory=list)
    begin_error: str | None = None
    end_error: str | None = None

    def summary(self) -> dict[str, Any]:
        ok = [r["seconds"] for r in self.requests if r.get("ok")]
        hashes = "".join(r["sha256"] for r in self.requests)
        engines = sorted({r["engine"] for r in self.requests if r.get("engine")})
        return {
            "phase": self.phase, "order": self.order, "corpus": self.corpus,
            "repetition": self.repetition, "repetitions": self.repetitions,
            "previous": self.previous, "generation": self.generation,
            "sent": len(self.requests), "failed": sum(not r.get("ok") for r in self.requests),
            "sequence_sha256": hashlib.sha256(hashes.encode()).hexdigest(),
            "body_sha256": [r["sha256"] for r in self.requests],  # in the order sent
            "outputs": [{k: r.get(k) for k in ("sha256", "output_sha256", "completion_tokens",
                                               "expected_tokens", "prompt_tokens")}
                        for r in self.requests],
            "completion_tokens": _total(self.requests, "completion_tokens"),
            "prompt_tokens": _total(self.requests, "prompt_tokens"),
            "engine": engines[0] if len(engines) == 1 else ",".join(engines) or None,
            "client_mean_seconds": sum(ok) / len(ok) if ok else None,
            "failures": [r for r in self.requests if not r.get("ok")],
            "begin_error": self.begin_error, "end_error": self.end_error,
        }


def _total(requests: Sequence[Mapping[str, Any]], key: str) -> int | None:
    values = [r.get(key) for r in requests]
    return None if not values or None in values else sum(values)  # type: ignore[arg-type]


@dataclass
class Options:
    """How a probe sends: concurrency, engine credentials, how to get a fresh incarnation,
    what it declares about the engine (probe --declare), and the request time limit."""

    concurrency: int = 1
    headers: Mapping[str, str] = field(default_factory=dict)
    fresh_command: str | None = None
    fresh_timeout: float = 900.0
    declared: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 300.0


class Stop(Exception):
    """Why the probe stops before its plan is done (the record says it)."""


class OutputLog:
    """outputs.jsonl: every answer the engine gave, one JSON line each (threads may write)."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream, self._lock, self.phase = stream, threading.Lock(), ""

    def __call__(self, result: Mapping[str, Any], content: bytes) -> None:
        if self._stream is None:
            return
        line = json.dumps({"phase": self.phase, "position": result["position"],
                           "sha256": result["sha256"], "status": result.get("status"),
                           "answer": content[:1 << 20].decode("utf-8", "replace")})
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def _check_capture(answer: Mapping[str, Any], first: dict[str, Any], where: str) -> None:
    """Stop on an identity that changed since the probe's first capture, or a failed pin."""
    capture = answer.get("capture") or {}
    ident = capture.get("identity") or {}
    now = {k: ident.get(k) for k in IDENTITY_KEYS} | {"ranks": capture.get("ranks")}
    if not first:
        first.update(now)
    changed = [f"{k} {first[k]} -> {now[k]}" for k in now if now[k] != first[k]]
    if changed:
        raise Stop(f"identity failure at {where}: {'; '.join(changed)}")
    failed = sorted(pin for pin, ok in (capture.get("pins") or {}).items() if ok is False)
    if failed:
        raise Stop(f"pin failure at {where}: {', '.join(failed)} (see the sidecar's /status)")


def _counts(capture: Mapping[str, Any]) -> tuple[Any, Any]:
    return (capture.get("counters") or {}).get("lookups.total"), capture.get("requests")


def run_passes(sender: Sender, sidecar: SidecarClient, passes: Sequence[PassPlan],
               options: Options, records: list[PassRecord], *,
               progress: bool | None = None, outputs: OutputLog | None = None,
               say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
               checkpoint: Callable[[bool], object] = lambda force: None,
               repetitions: int | None = None) -> str | None:
    """Send every pass, appending to `records` as it goes (so a caller interrupted halfway
    still holds what was sent); None when the plan ran through, else why it stopped.
    `checkpoint(force)` is called after every request (force False) and every phase edge
    (force True): the caller saves the record there."""
    from tqdm import tqdm

    show_bar = sys.stderr.isatty() if progress is None else progress
    outputs = outputs or OutputLog(None)
    identity: dict[str, Any] = {}
    seen_generations: set[str] = set()
    last_end: dict[str, Any] | None = None
    previous: str | None = None
    for p in passes:
        record = PassRecord(p.phase, p.order, p.corpus.path.name, p.repetition, repetitions)
        try:
            if p.prime and options.fresh_command:
                _fresh(options.fresh_command, options.fresh_timeout, say)
                last_end, previous = None, None
            records.append(record)
            record.previous = None if p.prime else previous
            begin = _edge(sidecar, "begin", p, record, retries=(
                FRESH_BEGIN_RETRIES if p.prime and options.fresh_command else 2))
            checkpoint(True)
            capture = begin.get("capture") or {}
            record.generation = capture.get("generation")
            try:
                _check_begin(begin, p, identity, seen_generations, last_end, previous)
                failure = _send_pass(sender, p, record, outputs, show_bar, checkpoint, tqdm)
            except Stop as exc:  # nothing (more) is sent; the phase begun is ended all the same
                failure = str(exc)
            end = _edge(sidecar, "end", p, record, retries=5)
            checkpoint(True)
            last_end, previous = end.get("capture") or {}, p.phase
            if failure:
                raise Stop(failure)
            _check_capture(end, identity, f"the end of {p.phase}")
            deltas = (end.get("phase") or {}).get("deltas") or {}
            sent = len(record.requests)
            seen = {"finished": deltas.get("requests"), "looked up": deltas.get("lookups")}
            for what, value in seen.items():
                if value is not None and value != sent:
                    raise Stop(f"{p.phase}: the engine {what} {value:g} requests, the probe sent "
                               f"{sent}: another client's traffic reached the engine")
            if not show_bar:  # a log, not a terminal: one line per pass
                s = record.summary()
                say(f"probe: {p.phase}: {s['sent']} sent, {s['failed']} failed")
        except Stop as exc:
            return str(exc)
        except SidecarError as exc:
            return str(exc)
    return None


def _check_begin(begin: Mapping[str, Any], p: PassPlan, identity: dict[str, Any],
                 seen: set[str], last_end: Mapping[str, Any] | None,
                 previous: str | None) -> None:
    """Stop unless a pass may start here: the same engine and pins, a fresh incarnation for a
    prime, and for a later pass the incarnation and counters its previous pass ended with."""
    _check_capture(begin, identity, f"the begin of {p.phase}")
    capture = begin.get("capture") or {}
    generation = capture.get("generation")
    if p.prime:
        lookups = _counts(capture)[0]
        if lookups is None:
            raise Stop(f"{p.phase}: the engine reports no lookup counters, so whether the prime "
                       "runs on a fresh incarnation is unknown")
        if lookups or generation in seen:
            raise Stop(f"{p.phase}: not a fresh incarnation (generation {generation}, "
                       f"{lookups:,} lookups served already): the prime needs a fresh one "
                       "(restart the engine, or --fresh-command)")
        seen.add(str(generation))
    elif last_end is not None:
        if generation != last_end.get("generation"):
            raise Stop(f"{p.phase}: the engine restarted since {previous} (generation "
                       f"{last_end.get('generation')} -> {generation})")
        if _counts(capture) != _counts(last_end):
            raise Stop(f"{p.phase}: the engine counted traffic between {previous} and "
                       f"{p.phase} (lookups, finished requests: {_counts(last_end)} -> "
                       f"{_counts(capture)}): nothing may be sent between passes")


def _fresh(command: str, timeout: float, say: Callable[[str], None]) -> None:
    """Run `--fresh-command`; Stop when it fails."""
    try:
        done = subprocess.run(shlex.split(command), timeout=timeout, check=False,
                              stdout=sys.stderr)
    except (OSError, ValueError) as exc:
        raise Stop(f"--fresh-command could not run: {exc}") from None
    except subprocess.TimeoutExpired:
        raise Stop(f"--fresh-command did not finish within {timeout:g} s") from None
    if done.returncode != 0:
        raise Stop(f"--fresh-command exited {done.returncode}: no fresh incarnation")
    say("probe: --fresh-command done")


def _edge(sidecar: SidecarClient, action: str, p: PassPlan, record: PassRecord,
          retries: int) -> dict[str, Any]:
    try:
        return sidecar.phase(action, p.phase,
                             f"probe {p.order} of {p.corpus.path.name}" if action == "begin"
                             else None, retries=retries)
    except SidecarError as exc:
        if action == "begin":
            record.begin_error = str(exc)
            raise Stop(f"cannot begin phase {p.phase}: {exc}") from None
        record.end_error = str(exc)
        raise Stop(f"cannot end phase {p.phase}: {exc} (the phase stays open: end it with "
                   f"`helios-exporter phase end {p.phase}`)") from None


def _send_pass(sender: Sender, p: PassPlan, record: PassRecord, outputs: OutputLog,
               show_bar: bool, checkpoint: Callable[[bool], object], tqdm: Any) -> str | None:
    """Send one pass; why it failed (the first failed request), None when every request held."""
    indices = list(range(len(p.corpus.bodies)))
    if p.order == "reverse":
        indices.reverse()
    outputs.phase = p.phase
    bar = tqdm(total=len(indices), desc=p.phase, unit="req", file=sys.stderr,
               disable=not show_bar, leave=True)

    def done(result: dict[str, Any]) -> None:
        record.requests.append(result)
        record.requests.sort(key=lambda r: r["position"])
        checkpoint(False)
        bar.update(1)

    try:
        sender.send(p.corpus.sendable(), indices, done, outputs)
    finally:
        bar.close()
    failed = [r for r in record.requests if not r.get("ok")]
    if not failed:
        return None
    first = failed[0]
    kind = ("authentication" if first.get("auth") else
            "request" if first.get("status") is None else "output-contract")
    return (f"{kind} failure in {p.phase}: request #{first['position']} (body "
            f"{first['sha256'][:12]}): {first.get('error')}; {len(failed)} of "
            f"{len(record.requests)} sent failed")


def record_doc(name: str, engine_url: str, sidecar_url: str, corpus: Corpus,
               replay: Corpus | None, records: Sequence[PassRecord], started: float,
               options: Options, complete: bool = True, stopped: str | None = None,
               repetitions: int = 0, orders: Sequence[str] = ()) -> dict[str, Any]:
    """probe.json; `complete` is False while the probe runs and when it was interrupted."""
    def about(c: Corpus) -> dict[str, Any]:
        return {"path": str(c.path), "bodies": len(c.bodies),
                "sha256": hashlib.sha256(b"\n".join(c.bodies) + b"\n").hexdigest(),
                "body_sha256": list(c.hashes)}

    return {
        "format": 1, "name": name, "engine_url": engine_url, "sidecar": sidecar_url,
        "started_at": started, "written_at": time.time(),
        "ended_at": time.time() if complete else None, "concurrency": options.concurrency,
        "complete": complete, "stopped": stopped,
        "orders": list(orders), "repetitions": repetitions or None,
        "fresh_command": options.fresh_command, "declared": dict(options.declared),
        "engine_headers": sorted(options.headers),  # names only: values are credentials
        "corpus": about(corpus), "replay_corpus": about(replay) if replay else None,
        "passes": [{**r.summary(), "declared": dict(options.declared), "requests": r.requests}
                   for r in records],
    }
