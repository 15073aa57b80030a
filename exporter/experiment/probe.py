"""The cache-order probe: a corpus sent pass by pass at concurrency 1, each pass a phase.

Pass n in order o is the phase `NAME/<o>-<n>` (with `--repetitions R`, R more passes in the last
order follow as `NAME/1` ... `NAME/R`, the repetitions `compare` reads). Between a pass's begin
and end the probe sends only the corpus's bodies, byte for byte as the file holds them, and
nothing between passes. Every request is recorded: its position, the body's SHA-256, the status,
the client-side seconds, and for a failure its whole output (up to MAX_OUTPUT_BYTES). A failed
request never stops the pass; a phase edge the sidecar refuses stops the probe (the record of what
was sent is still written) because an unbracketed pass proves nothing. The record goes to disk as
it grows (exporter/experiment/record.py).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from exporter.experiment.client import SidecarClient, SidecarError

ORDERS = ("forward", "reverse")
MAX_OUTPUT_BYTES = 64 * 1024


class CorpusError(ValueError):
    """The corpus file cannot be used; nothing was sent."""


@dataclass(frozen=True)
class Corpus:
    path: Path
    bodies: tuple[bytes, ...]  # exactly the bytes of each line, without its newline

    @property
    def hashes(self) -> tuple[str, ...]:
        return tuple(hashlib.sha256(b).hexdigest() for b in self.bodies)


def read_corpus(path: Path) -> Corpus:
    """Every non-blank line must be a JSON object (a completion body)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: {exc.strerror or exc}") from None
    bodies = []
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        line = raw.removesuffix(b"\r")
        if not line.strip():
            continue
        try:
            body = json.loads(line)
        except ValueError as exc:
            raise CorpusError(f"{path}:{lineno}: not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise CorpusError(f"{path}:{lineno}: a body must be a JSON object")
        bodies.append(line)
    if not bodies:
        raise CorpusError(f"{path}: no bodies")
    return Corpus(path, tuple(bodies))


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


def plan(name: str, orders: Sequence[str], repetitions: int, corpus: Corpus,
         replay: Corpus | None = None) -> list[PassPlan]:
    """The passes: the first is the prime, every later one a replay (of `replay` when given)."""
    passes = [PassPlan(f"{name}/{order}-{n}", order, corpus if n == 1 else replay or corpus)
              for n, order in enumerate(orders, 1)]
    passes += [PassPlan(f"{name}/{r}", orders[-1], replay or corpus)
               for r in range(1, repetitions + 1)]
    return passes


@dataclass
class PassRecord:
    phase: str
    order: str
    corpus: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    begin_error: str | None = None
    end_error: str | None = None

    def summary(self) -> dict[str, Any]:
        ok = [r["seconds"] for r in self.requests if r.get("ok")]
        hashes = "".join(r["sha256"] for r in self.requests)
        return {
            "phase": self.phase, "order": self.order, "corpus": self.corpus,
            "sent": len(self.requests), "failed": sum(not r.get("ok") for r in self.requests),
            "sequence_sha256": hashlib.sha256(hashes.encode()).hexdigest(),
            "body_sha256": [r["sha256"] for r in self.requests],  # in the order sent
            "client_mean_seconds": sum(ok) / len(ok) if ok else None,
            "failures": [r for r in self.requests if not r.get("ok")],
            "begin_error": self.begin_error, "end_error": self.end_error,
        }


def _send(client: httpx.Client, url: str, body: bytes, position: int, index: int,
          sha: str) -> dict[str, Any]:
    record: dict[str, Any] = {"position": position, "index": index, "sha256": sha}
    t0 = time.perf_counter()
    try:
        resp = client.post(url, content=body, headers={"content-type": "application/json"})
    except httpx.HTTPError as exc:
        record.update(ok=False, seconds=time.perf_counter() - t0, status=None,
                      error=f"{type(exc).__name__}: {exc}", output="")
        return record
    record.update(seconds=time.perf_counter() - t0, status=resp.status_code,
                  ok=resp.status_code == 200)
    content = resp.content
    if resp.status_code != 200:
        record.update(output=content[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"),
                      output_bytes=len(content), error=f"HTTP {resp.status_code}")
        return record
    record["response_sha256"] = hashlib.sha256(content).hexdigest()
    try:
        usage = resp.json().get("usage") or {}
        record["completion_tokens"] = usage.get("completion_tokens")
    except (ValueError, AttributeError):
        record.update(ok=False, error="200 without a JSON body",
                      output=content[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"))
    return record


def run_passes(engine_url: str, sidecar: SidecarClient, passes: Sequence[PassPlan],
               timeout: float, progress: bool | None = None,
               say: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
               records: list[PassRecord] | None = None,
               checkpoint: Callable[[bool], object] = lambda force: None) -> list[PassRecord]:
    """Send every pass, appending to `records` as it goes (so a caller interrupted halfway
    still holds what was sent); stops early only when the sidecar refuses a phase edge.
    `checkpoint(force)` is called after every request (force False) and every phase edge
    (force True): the caller saves the record there."""
    from tqdm import tqdm

    url = engine_url.rstrip("/") + "/v1/completions"
    show_bar = sys.stderr.isatty() if progress is None else progress
    records = [] if records is None else records
    with httpx.Client(timeout=timeout, headers={"User-Agent": "helios-exporter-probe"}) as client:
        for p in passes:
            record = PassRecord(p.phase, p.order, p.corpus.path.name)
            records.append(record)
            try:
                sidecar.phase("begin", p.phase, f"probe {p.order} of {p.corpus.path.name}",
                              retries=2)
            except SidecarError as exc:
                record.begin_error = str(exc)
                say(f"probe: cannot begin phase {p.phase}: {exc}; stopping")
                break
            checkpoint(True)
            indices = list(range(len(p.corpus.bodies)))
            if p.order == "reverse":
                indices.reverse()
            hashes = p.corpus.hashes
            t0 = time.monotonic()
            bar = tqdm(total=len(indices), desc=p.phase, unit="req", file=sys.stderr,
                       disable=not show_bar, leave=True)
            try:
                for position, i in enumerate(indices):
                    r = _send(client, url, p.corpus.bodies[i], position, i, hashes[i])
                    record.requests.append(r)
                    checkpoint(False)
                    bar.update(1)
                    if not r["ok"]:
                        bar.set_postfix(failed=sum(not x["ok"] for x in record.requests))
            finally:
                bar.close()
            try:
                sidecar.phase("end", p.phase, None, retries=5)
            except SidecarError as exc:
                record.end_error = str(exc)
                say(f"probe: cannot end phase {p.phase}: {exc}; stopping (the phase stays open: "
                    f"end it with `helios-exporter phase end {p.phase}`)")
                break
            checkpoint(True)
            s = record.summary()
            if not show_bar:  # a log, not a terminal: one line per pass
                say(f"probe: {p.phase}: {s['sent']} sent, {s['failed']} failed, "
                    f"{time.monotonic() - t0:.1f} s")
    return records


def record_doc(name: str, engine_url: str, sidecar_url: str, corpus: Corpus,
               replay: Corpus | None, records: Sequence[PassRecord], started: float,
               complete: bool = True) -> dict[str, Any]:
    """probe.json; `complete` is False while the probe runs and when it was interrupted."""
    def about(c: Corpus) -> dict[str, Any]:
        return {"path": str(c.path), "bodies": len(c.bodies),
                "sha256": hashlib.sha256(b"\n".join(c.bodies) + b"\n").hexdigest(),
                "body_sha256": list(c.hashes)}

    return {
        "format": 1, "name": name, "engine_url": engine_url, "sidecar": sidecar_url,
        "started_at": started, "written_at": time.time(),
        "ended_at": time.time() if complete else None, "concurrency": 1,
        "complete": complete,
        "corpus": about(corpus), "replay_corpus": about(replay) if replay else None,
        "passes": [{**r.summary(), "requests": r.requests} for r in records],
    }
