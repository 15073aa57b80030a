"""Sending a corpus's bodies to an engine, byte for byte, and checking what comes back.

`Sender.send` is the probe's sending loop, usable by any command that drives an engine through
a pass: bodies go out in the order given, at most `concurrency` at a time, each with the engine
credentials (`--engine-header`, `--engine-token-file`); every request's result is recorded, and
dispatching stops at the first request that breaks the output contract (the requests in flight
then finish and are recorded too). The contract: HTTP 200, a JSON completion, and exactly the
output length the body fixed (`usage.completion_tokens` equal to its `max_tokens`). A 401 or 403
is an authentication failure.

Each result: `position` (in the order sent), `index` (in the corpus), `sha256` (the body's),
`seconds` (client side), `status`, `ok`; for an answer, `response_sha256` (its bytes),
`output_sha256` (SHA-256 of the completion texts, `choices[].text` in order, joined by NUL),
`completion_tokens`, `expected_tokens`, `prompt_tokens`, `finish_reason`, `engine` (its
`system_fingerprint`); for a failure, `error` and `output` (up to MAX_OUTPUT_BYTES). The whole
answer goes to `on_output`, which the probe keeps in outputs.jsonl.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from exporter.restore.events import read_token

MAX_OUTPUT_BYTES: Final = 64 * 1024
AUTH_STATUSES: Final = (401, 403)
MAX_FINGERPRINT_CHARS: Final = 64


class CredentialError(ValueError):
    """An engine credential flag cannot be used; nothing was sent."""


def engine_headers(headers: Sequence[str], token_file: Path | None) -> dict[str, str]:
    """`--engine-header 'Name: value'` (repeatable) and `--engine-token-file F` (a bearer
    token) as request headers."""
    out: dict[str, str] = {}
    for text in headers:
        name, sep, value = text.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value or any(c in name for c in " \t\r\n") \
                or "\n" in value or "\r" in value:
            raise CredentialError(f"--engine-header takes 'Name: value', got "
                                  f"{name[:40] or text[:40]!r}...")
        out[name] = value
    if token_file is not None:
        try:
            out["Authorization"] = "Bearer " + read_token(token_file).decode()
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise CredentialError(f"--engine-token-file {token_file}: {exc}") from None
    return out


@dataclass(frozen=True)
class Body:
    raw: bytes  # exactly the bytes of the corpus line
    sha256: str
    expected_tokens: int | None  # the output length the body fixes; None: it fixes none


def output_hash(choices: Any) -> str | None:
    if not isinstance(choices, list) or not choices:
        return None
    texts = [c.get("text") if isinstance(c, dict) else None for c in choices]
    if not all(isinstance(t, str) for t in texts):
        return None
    return hashlib.sha256("\0".join(texts).encode()).hexdigest()  # type: ignore[arg-type]


def check(body: Body, status: int, content: bytes) -> dict[str, Any]:
    """What one answer says, with `ok` False and `error` where it breaks the contract."""
    out: dict[str, Any] = {"status": status}
    if status != 200:
        why = (f"HTTP {status}: the engine refused the credentials (check --engine-header or "
               "--engine-token-file)" if status in AUTH_STATUSES else f"HTTP {status}")
        return {**out, "ok": False, "error": why, "auth": status in AUTH_STATUSES}
    out["response_sha256"] = hashlib.sha256(content).hexdigest()
    try:
        answer = json.loads(content)
    except ValueError:
        return {**out, "ok": False, "error": "output contract: 200 without a JSON body"}
    if not isinstance(answer, dict):
        return {**out, "ok": False, "error": "output contract: 200 without a JSON object"}
    usage = answer.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    tokens, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
    choices = answer.get("choices")
    fingerprint = answer.get("system_fingerprint")
    out.update(
        output_sha256=output_hash(choices),
        completion_tokens=tokens if _whole(tokens) else None,
        expected_tokens=body.expected_tokens,
        prompt_tokens=prompt if _whole(prompt) else None,
        finish_reason=(choices[0].get("finish_reason") if isinstance(choices, list) and choices
                       and isinstance(choices[0], dict) else None),
        engine=fingerprint[:MAX_FINGERPRINT_CHARS] if isinstance(fingerprint, str) else None)
    if out["output_sha256"] is None:
        return {**out, "ok": False, "error": "output contract: no completion text "
                "(choices[].text)"}
    if out["completion_tokens"] is None:
        return {**out, "ok": False, "error": "output contract: no usage.completion_tokens"}
    if body.expected_tokens is not None and tokens != body.expected_tokens:
        return {**out, "ok": False, "error": f"output contract: completion_tokens {tokens}, "
                f"the body fixed {body.expected_tokens}"}
    return {**out, "ok": True}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Sender:
    def __init__(self, engine_url: str, *, headers: Mapping[str, str] | None = None,
                 timeout: float = 300.0, concurrency: int = 1,
                 transport: httpx.BaseTransport | None = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.url = engine_url.rstrip("/") + "/v1/completions"
        self.concurrency = concurrency
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._client = httpx.Client(timeout=timeout, limits=limits, transport=transport,
                                    headers={"User-Agent": "helios-exporter-probe",
                                             **(headers or {})})

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def one(self, body: Body, position: int, index: int,
            on_output: Callable[[dict[str, Any], bytes], None] | None = None) -> dict[str, Any]:
        record: dict[str, Any] = {"position": position, "index": index, "sha256": body.sha256}
        t0 = time.perf_counter()
        try:
            resp = self._client.post(self.url, content=body.raw,
                                     headers={"content-type": "application/json"})
        except httpx.HTTPError as exc:
            return {**record, "ok": False, "seconds": time.perf_counter() - t0, "status": None,
                    "error": f"{type(exc).__name__}: {exc}", "output": ""}
        record["seconds"] = time.perf_counter() - t0
        content = resp.content
        record.update(check(body, resp.status_code, content))
        if not record["ok"]:
            record.update(output=content[:MAX_OUTPUT_BYTES].decode("utf-8", "replace"),
                          output_bytes=len(content))
        if on_output is not None:
            on_output(record, content)
        return record

    def send(self, bodies: Sequence[Body], indices: Sequence[int],
             on_result: Callable[[dict[str, Any]], None] = lambda r: None,
             on_output: Callable[[dict[str, Any], bytes], None] | None = None) -> list[dict[str, Any]]:
        """Send `bodies[i]` for each i of `indices`, in that order; the results by position.
        `on_result` runs in the calling thread after each request, in the order they finish."""
        results: list[dict[str, Any]] = []
        failed = False
        order = iter(enumerate(indices))
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="probe-send") as pool:
            pending: set[Future[dict[str, Any]]] = set()
            while True:
                while not failed and len(pending) < self.concurrency:
                    nxt = next(order, None)
                    if nxt is None:
                        break
                    position, i = nxt
                    pending.add(pool.submit(self.one, bodies[i], position, i, on_output))
                if not pending:
                    break
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    result = future.result()
                    results.append(result)
                    on_result(result)
                    failed = failed or not result["ok"]
        return sorted(results, key=lambda r: r["position"])
