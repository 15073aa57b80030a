"""Preflight probe: one minimal completion that must come back whole.

Passes on HTTP 200 with exactly `max_tokens` completion tokens in `usage`, within the timeout.
"""

from __future__ import annotations

import httpx

PROMPT = "helios preflight"
MAX_ANSWER_BYTES = 1024 * 1024


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
        resp = await client.post(url, json=body, headers=headers, timeout=timeout,
                                 follow_redirects=False)
        if len(resp.content) > MAX_ANSWER_BYTES:
            return False, f"answer over {MAX_ANSWER_BYTES} bytes"
    except httpx.TimeoutException:
        return False, "timeout"
    except httpx.HTTPError as exc:
        return False, f"transport: {type(exc).__name__}"
    if resp.status_code != 200:
        return False, f"HTTP {resp.status_code}"
    try:
        tokens = resp.json()["usage"]["completion_tokens"]
    except (ValueError, KeyError, TypeError):
        return False, "no usage.completion_tokens in the answer"
    # JSON true would compare equal to 1: only an integer count is a count.
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens != max_tokens:
        return False, f"completion_tokens {tokens!r} != {max_tokens}"
    return True, "ok"
