"""Preflight probe: one minimal completion that must come back whole.

Passes on HTTP 200 with exactly `max_tokens` completion tokens in `usage`, within the timeout.
"""

from __future__ import annotations

import httpx

PROMPT = "helios preflight"


async def probe(
    client: httpx.AsyncClient,
    url: str,
    max_tokens: int,
    timeout: float,
    auth_header: str | None = None,
) -> tuple[bool, str]:
    headers = {"Authorization": auth_header} if auth_header else {}
    body = {"model": "preflight", "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0}
    try:
        resp = await client.post(url, json=body, headers=headers, timeout=timeout,
                                 follow_redirects=False)
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
