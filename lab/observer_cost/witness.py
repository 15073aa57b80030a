"""What proves the observer really switched: a witness in the engine's state, read after every
--on/--off command and again after the repetition (`--witness`).

A switch command that exits 0 says only that the command ran. The witness is read from the
engine (or, for `command:`, from wherever the operator's command reads it) at both edges of
every step:

- `snapshot:PATH`: a boolean in the engine's snapshot, by dotted PATH (the simulator's
  `simulator.trace.enabled`). On holds when it is true at both edges, off when false at both.
- `metric:NAME{L="V",...}`: a counter on the engine's `/metrics`, the engine's count of the
  observer's requests or events (the labels select one series). On holds when it grew between
  the edges, off when it did not change.
- `command:CMD`: a number the shell command prints, a count of the observer's events from
  wherever the operator can read one (weaker: not the engine's own state). As `metric:`.

A reading that fails, or a value of the wrong kind, leaves the check not evaluated, and a
repetition whose switch is not verified is not valid. checks.py judges the readings.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx
from prometheus_client.parser import text_string_to_metric_families

from lab.observer_cost.run import SNAPSHOT_PATH

Kind = Literal["snapshot", "metric", "command"]
KINDS: tuple[Kind, ...] = ("snapshot", "metric", "command")
MAX_PATH_DEPTH = 16
MAX_METRICS_BYTES = 16 * 1024 * 1024
MAX_COMMAND_OUTPUT = 4096
PATH_RE = re.compile(r"[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,15}")
SELECTOR_RE = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>[^{}]*)\})?")
LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\]*)"\s*(,|$)')


@dataclass(frozen=True, slots=True)
class Witness:
    kind: Kind
    arg: str
    labels: tuple[tuple[str, str], ...] = ()

    @property
    def counter(self) -> bool:
        """True for a count that grows while the observer is on; False for a state flag."""
        return self.kind != "snapshot"

    def describe(self) -> str:
        return f"{self.kind}:{self.arg}"


def parse(text: str) -> Witness:
    """`--witness KIND:ARG`; ValueError naming what is wrong."""
    kind, sep, arg = text.partition(":")
    if not sep or kind not in KINDS or not arg.strip():
        raise ValueError(f"--witness {text!r}: give snapshot:PATH, metric:NAME{{LABEL=\"V\"}} or "
                         "command:CMD: what in the engine's state shows the observer on or off")
    if kind == "snapshot" and not PATH_RE.fullmatch(arg):
        raise ValueError(f"--witness {text!r}: PATH is dotted keys of the engine's snapshot, "
                         "e.g. simulator.trace.enabled")
    labels: list[tuple[str, str]] = []
    if kind == "metric":
        m = SELECTOR_RE.fullmatch(arg.strip())
        body = (m.group("labels") or "").strip() if m else ""
        pos = 0
        while m and pos < len(body):
            lm = LABEL_RE.match(body, pos)
            if lm is None:
                m = None
                break
            labels.append((lm.group(1), lm.group(2)))
            pos = lm.end()
        if m is None:
            raise ValueError(f"--witness {text!r}: a metric is NAME or NAME{{LABEL=\"VALUE\",...}}")
        arg = m.group("name")
    return Witness(kind, arg, tuple(sorted(labels)))


def _reading(value: Any = None, error: str | None = None) -> dict[str, Any]:
    return {"value": value, "error": error}


def read(witness: Witness, engine: httpx.Client, log: Path, timeout: float,
         env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One reading: `value` (a bool for snapshot:, a number otherwise) or `error`."""
    try:
        if witness.kind == "snapshot":
            return _snapshot(witness, engine)
        if witness.kind == "metric":
            return _metric(witness, engine)
        return _command(witness, log, timeout, env or {})
    except httpx.HTTPError as exc:
        return _reading(error=f"{type(exc).__name__}: {exc}")


def _snapshot(witness: Witness, engine: httpx.Client) -> dict[str, Any]:
    resp = engine.get(SNAPSHOT_PATH)
    if resp.status_code != 200:
        return _reading(error=f"GET {SNAPSHOT_PATH} answered {resp.status_code}")
    try:
        value: Any = resp.json()
    except (ValueError, RecursionError):
        return _reading(error=f"GET {SNAPSHOT_PATH}: not JSON")
    for key in witness.arg.split(".")[:MAX_PATH_DEPTH]:
        if not isinstance(value, dict) or key not in value:
            return _reading(error=f"the engine's snapshot has no {witness.arg}")
        value = value[key]
    if not isinstance(value, bool):
        return _reading(error=f"the engine's snapshot's {witness.arg} is not true or false")
    return _reading(value)


def _metric(witness: Witness, engine: httpx.Client) -> dict[str, Any]:
    with engine.stream("GET", "/metrics") as resp:
        if resp.status_code != 200:
            return _reading(error=f"GET /metrics answered {resp.status_code}")
        body = bytearray()
        for chunk in resp.iter_bytes():
            body += chunk
            if len(body) > MAX_METRICS_BYTES:
                return _reading(error=f"GET /metrics: more than {MAX_METRICS_BYTES} bytes")
    want = dict(witness.labels)
    found: list[float] = []
    try:
        for family in text_string_to_metric_families(body.decode("utf-8", "replace")):
            for sample in family.samples:
                if sample.name == witness.arg and all(sample.labels.get(k) == v
                                                       for k, v in want.items()):
                    found.append(float(sample.value))
    except ValueError as exc:
        return _reading(error=f"GET /metrics: not a Prometheus text exposition ({exc})")
    if len(found) != 1 or not math.isfinite(found[0]):
        what = "no series" if not found else (f"{len(found)} series" if len(found) > 1
                                              else "a value that is not finite")
        return _reading(error=f"the engine's /metrics has {what} of {witness.arg}"
                        + (f" with {want}" if want else "") + ": one series must match")
    return _reading(found[0])


def _command(witness: Witness, log: Path, timeout: float,
             env: Mapping[str, str]) -> dict[str, Any]:
    try:
        with log.open("ab") as f:
            f.write(f"--- witness: {witness.arg}\n".encode())
            f.flush()
            done = subprocess.run(witness.arg, shell=True, stdout=subprocess.PIPE,  # noqa: S602  (the operator's own command)
                                  stderr=f, stdin=subprocess.DEVNULL, timeout=timeout,
                                  check=False, env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        return _reading(error=f"the witness command did not finish within {timeout:g} s")
    except OSError as exc:
        return _reading(error=f"cannot run the witness command: {exc.strerror or exc}")
    text = done.stdout[:MAX_COMMAND_OUTPUT].decode("utf-8", "replace").strip()
    if done.returncode != 0:
        return _reading(error=f"the witness command exited {done.returncode}")
    try:
        value = float(text)
    except ValueError:
        return _reading(error=f"the witness command printed {text[:40]!r}, not one number")
    if not math.isfinite(value):
        return _reading(error="the witness command printed a number that is not finite")
    return _reading(value)


def judge(witness: Mapping[str, Any] | None, arm: str) -> tuple[bool | None, str]:
    """Whether the readings at a step's two edges show the observer `arm` (on or off) through
    the step: (True, ""), (False, why) or (None, why not evaluated)."""
    if witness is None:
        return None, "the switch was not read (no --witness reading)"
    begin, end = witness.get("begin"), witness.get("end")
    for name, r in (("after the switch", begin), ("after the repetition", end)):
        if r is None:
            return None, f"no witness reading {name}"
        if r.get("error"):
            return None, f"the witness {name}: {r['error']}"
    assert begin is not None and end is not None
    a, b = begin["value"], end["value"]
    what = witness.get("what", "the witness")
    if witness.get("counter"):
        if b < a:
            return False, (f"{what} went back from {a:g} to {b:g}: the counter restarted, so "
                           "whether the observer ran cannot be told")
        if arm == "on" and b == a:
            return False, (f"{what} stayed at {a:g} with the observer on: it did not run during "
                           "the repetition (make repetitions longer than its interval)")
        if arm == "off" and b != a:
            return False, f"{what} grew from {a:g} to {b:g} with the observer off: it still ran"
        return True, f"{what} {a:g} to {b:g}"
    want = arm == "on"
    if a is not want or b is not want:
        return False, (f"{what} was {str(a).lower()} after the switch and {str(b).lower()} after "
                       f"the repetition; the observer should have been {arm} throughout")
    return True, f"{what} {str(want).lower()} at both edges"
