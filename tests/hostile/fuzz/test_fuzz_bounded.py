"""The bounded client path and the JSON depth limit over generated inputs: every answer's
status, headers, body bytes and chunking, every nesting of brackets, strings and escapes.

Properties: a request returns exactly the body it was sent (decoded once, when gzip was the
coding) or a FetchError with a closed-set reason, never another exception, never more than the
limit; `depth_within` agrees with the real nesting of any JSON document, and `loads` never
raises anything but JsonError.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from exporter.labels import ErrorReason
from exporter.snapshot.limits import JsonError, depth_within, loads
from exporter.sources.http import Bounds, FetchError, request
from tests.hostile.fuzz.fuzzlib import FUZZ

LIMIT = 4096
CODINGS = ["", "gzip", "GZIP", "identity", "gzip, gzip", "deflate", "br", "zstd", "x-gzip",
           "gzip, identity", "compress", "*", ","]


class _Chunks(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def _fetch(status: int, headers: dict[str, str], chunks: list[bytes]) -> bytes | FetchError:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, stream=_Chunks(chunks))

    async def go() -> bytes | FetchError:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            try:
                return (await request(client, "GET", "http://engine.test/", Bounds(5, LIMIT))).body
            except FetchError as exc:
                return exc
    return asyncio.run(go())


_HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=20)


@FUZZ
@given(status=st.sampled_from([200, 201, 204, 206, 299, 301, 304, 400, 404, 500, 503]),
       coding=st.one_of(st.sampled_from(CODINGS), _HEADER_TEXT),
       body=st.one_of(st.binary(max_size=2 * LIMIT),
                      st.integers(0, 3 * LIMIT).map(lambda n: b"\0" * n)),
       layers=st.integers(0, 2), cuts=st.lists(st.integers(0, 10**6)),
       trailer=st.binary(max_size=8))
def test_every_answer_is_the_body_or_a_closed_set_reason(
        status: int, coding: str, body: bytes, layers: int, cuts: list[int],
        trailer: bytes) -> None:
    stages = [body]
    for _ in range(layers):
        stages.append(gzip.compress(stages[-1]))
    sent = stages[-1] + (trailer if layers else b"")
    out = _fetch(status, {"Content-Encoding": coding} if coding else {}, _split(sent, cuts))
    named = [c.strip().lower() for c in coding.split(",") if c.strip()]
    if not 200 <= status < 300:
        assert isinstance(out, FetchError) and out.reason is ErrorReason.HTTP_STATUS
        return
    if isinstance(out, FetchError):
        assert out.reason in (ErrorReason.DECODE, ErrorReason.TOO_LARGE), out
        return
    assert len(out) <= LIMIT
    if named == ["gzip"]:  # one layer decoded, exactly
        assert layers >= 1 and not trailer and out == stages[-2]
    else:  # sent as it is, or refused
        assert all(c == "identity" for c in named) and out == sent


def _depth(obj: Any) -> int:
    if isinstance(obj, dict):
        return 1 + max((_depth(v) for v in obj.values()), default=0)
    if isinstance(obj, list):
        return 1 + max((_depth(v) for v in obj), default=0)
    return 0


_STRINGS = st.text(alphabet='[]{}"\\ab\n', max_size=8)
_DOCS = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _STRINGS),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(_STRINGS, inner, max_size=3)),
    max_leaves=40)


@FUZZ
@given(doc=_DOCS, limit=st.integers(0, 12))
def test_depth_within_is_the_nesting_of_any_json_document(doc: Any, limit: int) -> None:
    body = json.dumps(doc).encode()
    assert depth_within(body, limit) == (_depth(doc) <= limit)


@FUZZ
@given(body=st.one_of(st.binary(max_size=300),
                      st.text(alphabet='[]{}",:\\ 1a', max_size=300).map(str.encode)),
       limit=st.integers(0, 12))
def test_loads_raises_only_json_error_and_never_past_the_limit(body: bytes, limit: int) -> None:
    try:
        obj = loads(body, limit)
    except JsonError:
        return
    assert _depth(obj) <= limit
