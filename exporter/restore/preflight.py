"""Preflight probe: one minimal completion that must come back whole.

Passes on HTTP 200 with exactly `max_tokens` completion tokens in `usage`, within the timeout.
The request goes through the sidecar's one bounded client path (exporter/sources/http.py): one
deadline for the whole exchange, at most MAX_ANSWER_BYTES decoded, JSON at most MAX_DEPTH deep,
no redirects. Whatever the endpoint does, the probe returns (False, why), never raises: a probe's
failure is a failed check, not a failed poll cycle.
"""

from __future__ import annotations

import asyncio

import httpx
import structlog

from exporter.labels import ErrorReason
from exporter.sources.http import Bounds, FetchError, request_json

PROMPT = "helios preflight"
MAX_ANSWER_BYTES = 1024 * 1024
MAX_DEPTH = 16  # an OpenAI-style completion answer nests 3 deep

log = structlog.get_logger("helios_exporter.preflight")


async def probe(
    client: httpx.AsyncClient,
    url: str,
    max_tokens: int,
    timeout: float,
    auth_header: str | None = None,
    model: str | None = None,
) -> tuple[bool, str]:
    headers = {"Authorization": auth_header} if auth_header else {}
    # ignore_eos/min_tokens (vLLM and SGLang sampling parameters) make a healthy engine produce
    # exactly max_tokens even when the model would stop early; without a model name the engine
    # serves its default model, and a router needs --preflight-model to route.
    body: dict[str, object] = {"prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0,
                               "ignore_eos": True, "min_tokens": max_tokens}
    if model is not None:
        body["model"] = model
    try:
        answer = await request_json(client, "POST", url,
                                    Bounds(timeout, MAX_ANSWER_BYTES, MAX_DEPTH),
                                    json=body, headers=headers, statuses=(200,))
    except FetchError as exc:
        if exc.reason is ErrorReason.HTTP_STATUS:
            return False, f"HTTP {exc.status}"
        return False, f"{exc.reason.value}: {exc}"  # a closed-set reason first
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a bug here is a failed check, never a failed poll cycle
        log.exception("preflight_probe_error")
        return False, f"internal error: {type(exc).__name__}"
    return _judge(answer, max_tokens)


def _judge(answer: object, max_tokens: int) -> tuple[bool, str]:
    try:
        tokens = answer["usage"]["completion_tokens"]  # type: ignore[index]
    except (KeyError, TypeError, IndexError):
        return False, "no usage.completion_tokens in the answer"
    # JSON true would compare equal to 1: only an integer count is a count.
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens != max_tokens:
        return False, f"completion_tokens {str(tokens)[:40]!r} != {max_tokens}"
    return True, "ok"
