"""What an observer-cost run does against the engine and the sidecar: switch the observer, mark a
phase edge with its clock anchors, send a repetition's requests at a concurrency.

Everything returns plain JSON-able records (kept in observer-cost.json); judging them is
the job of checks.py. No record is ever dropped: a failure is recorded where it happened.
"""

from __future__ import annotations

import email.utils
import hashlib
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

from lab.client.sidecar import SidecarClient, SidecarError

SNAPSHOT_PATH = "/debug/offload/snapshot"
MAX_OUTPUT_BYTES = 4096  # of a failed answer, kept in the record
USER_AGENT = "helios-exporter-observer-cost"


def _clock() -> dict[str, float]:
    return {"wall": time.time(), "monotonic": time.monotonic()}


# -- the observer's switch ------------------------------------------------------------------------
def switch(command: str, arm: str, env: Mapping[str, str], log: Path,
           timeout: float) -> dict[str, Any]:
    """Run the --on or --off shell command; its output goes to `log` (a file, not a pipe, so
    that a command which starts a background process returns at once)."""
    started = time.monotonic()
    out: dict[str, Any] = {"arm": arm, "command": command, "exit_code": None, "error": None}
    with log.open("ab") as f:
        f.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {arm}: "
                f"{command}\n".encode())
        f.flush()
        try:
            done = subprocess.run(command, shell=True, stdout=f, stderr=subprocess.STDOUT,  # noqa: S602  (the operator's own command)
                                  stdin=subprocess.DEVNULL, timeout=timeout, check=False,
                                  env={**os.environ, **env})
        except subprocess.TimeoutExpired:
            out["error"] = f"did not finish within {timeout:g} s"
        except OSError as exc:
            out["error"] = f"cannot run it: {exc.strerror or exc}"
        else:
            out["exit_code"] = done.returncode
            if done.returncode != 0:
                out["error"] = f"exited {done.returncode} (its output is in {log.name})"
    out["seconds"] = time.monotonic() - started
    return out


# -- the engine's own view at an edge -------------------------------------------------------------
def _date(resp: httpx.Response) -> float | None:
    value = resp.headers.get("date")
    if not value:
        return None
    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def read_engine(client: httpx.Client) -> dict[str, Any]:
    """The engine snapshot's identity, ranks and clocks, with the client's clock around the GET."""
    before = _clock()
    out: dict[str, Any] = {"error": None}
    try:
        resp = client.get(SNAPSHOT_PATH)
    except httpx.HTTPError as exc:
        out["error"] = f"GET {SNAPSHOT_PATH}: {type(exc).__name__}: {exc}"
    else:
        out["date"] = _date(resp)
        if resp.status_code != 200:
            out["error"] = f"GET {SNAPSHOT_PATH} answered {resp.status_code}"
        else:
            try:
                snap = resp.json()
            except ValueError:
                snap = None
            if not isinstance(snap, dict):
                out["error"] = f"GET {SNAPSHOT_PATH}: not a JSON object"
            else:
                out.update(_engine_fields(snap))
    out["client_before"], out["client_after"] = before, _clock()
    return out


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _engine_fields(snap: Mapping[str, Any]) -> dict[str, Any]:
    identity, clock = _obj(snap.get("identity")), _obj(snap.get("clock"))
    ranks = snap.get("ranks")
    sim = snap.get("simulator")
    trace = _obj(sim).get("trace")
    trace = trace if isinstance(trace, dict) else None
    return {
        "generation": snap.get("generation") if isinstance(snap.get("generation"), str) else None,
        "started_at": _number(snap.get("started_at")),
        "container_id": identity.get("container_id"),
        "ranks": None if not isinstance(ranks, list) else sorted(
            [r.get("rank"), str(r.get("gpu_uuid"))] for r in ranks
            if isinstance(r, dict) and isinstance(r.get("rank"), int)),
        "clock": {"unix_seconds": _number(clock.get("unix_seconds")),
                  "monotonic_seconds": _number(clock.get("monotonic_seconds"))}
        if _number(clock.get("unix_seconds")) is not None else None,
        "simulated": isinstance(sim, dict),
        "trace": None if trace is None else {"enabled": trace.get("enabled") is True,
                                             "cost": _number(trace.get("cost"))},
    }


# -- a phase edge ---------------------------------------------------------------------------------
def edge(sidecar: SidecarClient, engine: httpx.Client, action: str, phase: str,
         note: str | None = None) -> dict[str, Any]:
    """Begin or end `phase` on the sidecar and read the engine's snapshot (before a begin, after
    an end, so that the read lies outside the phase). The client's clock is read around each."""
    out: dict[str, Any] = {"action": action, "error": None, "capture_at": None,
                           "capture_generation": None, "phase": None}
    if action == "begin":
        out["engine"] = read_engine(engine)
    out["client_before"] = _clock()
    try:
        answer = sidecar.phase(action, phase, note, retries=2 if action == "begin" else 5)
    except SidecarError as exc:
        out["error"] = str(exc)
    else:
        capture = _obj(answer.get("capture"))
        out["capture_at"] = _number(capture.get("at"))
        out["capture_generation"] = capture.get("generation")
        if action == "end" and isinstance(answer.get("phase"), dict):
            p = answer["phase"]
            out["phase"] = {"valid": p.get("valid"), "invalid_reasons": p.get("invalid_reasons"),
                            "generation": p.get("generation"), "deltas": p.get("deltas")}
    out["client_after"] = _clock()
    if action == "end":
        out["engine"] = read_engine(engine)
    return out


# -- the traffic ----------------------------------------------------------------------------------
def send(client: httpx.Client, bodies: Sequence[bytes], requests: int,
         concurrency: int) -> dict[str, Any]:
    """Send bodies 0, 1, ... (cycling) `requests` times, `concurrency` at a time, each timed at
    the client. Every request is recorded, failed or not, in the order sent."""
    records: list[dict[str, Any]] = [{} for _ in range(requests)]
    hashes = [hashlib.sha256(b).hexdigest() for b in bodies]
    lock = threading.Lock()
    cursor = iter(range(requests))
    t0 = time.perf_counter()

    def worker() -> None:
        while True:
            with lock:
                position = next(cursor, None)
            if position is None:
                return
            index = position % len(bodies)
            try:
                records[position] = _one(client, bodies[index], position, index, hashes[index],
                                         t0)
            except Exception as exc:  # recorded, never lost: the check names it
                records[position] = {"position": position, "index": index,
                                     "sha256": hashes[index], "ok": False, "status": None,
                                     "seconds": None, "completion_tokens": None,
                                     "error": f"{type(exc).__name__}: {exc}"}

    threads = [threading.Thread(target=worker, name=f"observer-cost-{i}", daemon=True)
               for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"requests": records, "wall_seconds": time.perf_counter() - t0}


def _one(client: httpx.Client, body: bytes, position: int, index: int, sha: str,
         t0: float) -> dict[str, Any]:
    record: dict[str, Any] = {"position": position, "index": index, "sha256": sha,
                              "completion_tokens": None}
    start = time.perf_counter()
    record["start"] = start - t0
    try:
        resp = client.post("/v1/completions", content=body,
                           headers={"content-type": "application/json"})
    except httpx.HTTPError as exc:
        record.update(seconds=time.perf_counter() - start, status=None, ok=False,
                      error=f"{type(exc).__name__}: {exc}")
        return record
    record.update(seconds=time.perf_counter() - start, status=resp.status_code,
                  ok=resp.status_code == 200)
    if resp.status_code != 200:
        record.update(error=f"HTTP {resp.status_code}",
                      output=resp.content[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"))
        return record
    try:
        answer = resp.json()
        usage = answer.get("usage") or {}
        tokens = usage.get("completion_tokens")
        choices = answer.get("choices") or [{}]
        record["finish_reason"] = choices[0].get("finish_reason")
    except (ValueError, AttributeError, IndexError, TypeError):
        record.update(ok=False, error="200 without a completion JSON body",
                      output=resp.content[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"))
        return record
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        record["completion_tokens"] = tokens
    return record


def engine_client(url: str, timeout: float, concurrency: int) -> httpx.Client:
    limits = httpx.Limits(max_connections=concurrency + 2, max_keepalive_connections=concurrency + 2)
    return httpx.Client(base_url=url.rstrip("/"), timeout=timeout, limits=limits,
                        headers={"User-Agent": USER_AGENT})
