"""The engine GET over a real socket: a kept-alive connection the engine closed while idle is
retried once on a new connection; nothing else is.

uvicorn (which serves SGLang and vLLM) closes a connection after 5 s idle, the default poll
interval: a poll that reuses the connection as the engine closes it got no answer, and the
request never reached the engine. Before the retry, that cost a failed poll (offload metrics
missing, the source down) every so often on a healthy engine.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from exporter.labels import ErrorReason
from exporter.sources.http import Bounds, FetchError, bounded_get
from tests.hostile.stub import (
    METRICS,
    Behaviour,
    Case,
    each_time,
    hang_up,
    head,
    keep_alive_then_hang_up,
    raw,
    respond,
    running_engine,
)


def fetch_twice(behaviour: Behaviour) -> tuple[list[bytes | FetchError], int]:
    """Two GETs on one client against an engine answering `behaviour` on /metrics; what each
    returned, and how many connections the engine served."""
    async def go(url: str) -> list[bytes | FetchError]:
        out: list[bytes | FetchError] = []
        async with httpx.AsyncClient(timeout=5) as client:
            for _ in range(2):
                try:
                    out.append((await bounded_get(client, url, Bounds(5.0, 1 << 20))).body)
                except FetchError as exc:
                    out.append(exc)
        return out

    with running_engine() as engine:
        engine.case = Case("http", metrics=behaviour)
        results = asyncio.run(go(engine.url + METRICS))
        return results, engine.count("http", METRICS)


def all_connect_errors(results: list[bytes | FetchError]) -> bool:
    return all(isinstance(r, FetchError) and r.reason == ErrorReason.CONNECT for r in results)


def test_a_connection_closed_while_idle_is_retried_once_on_a_new_one() -> None:
    first = keep_alive_then_hang_up(b"first")
    results, connections = fetch_twice(
        each_time(lambda n: first if n == 0 else respond(200, "second")))
    assert results == [b"first", b"second"]
    assert connections == 2  # the retry went out on a new connection


def test_an_engine_that_hangs_up_on_every_request_fails_after_one_retry() -> None:
    results, connections = fetch_twice(hang_up())
    assert all_connect_errors(results)
    assert connections == 4  # two attempts per GET, never more


@pytest.mark.parametrize("sent", [0, 10])
def test_an_answer_cut_short_is_not_sent_again(sent: int) -> None:
    """The engine answered (the head, part of the body) and then hung up: the request reached
    it, so it fails the poll instead of being sent twice."""
    results, connections = fetch_twice(raw(head(200, length=100) + b"x" * sent))
    assert all_connect_errors(results)
    assert connections == 2  # one connection per GET: no retry
