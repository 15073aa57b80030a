"""What the simulated model answers, through the engine's real HTTP app: its own length unless the
body fixes it, the text a function of checkpoint, model and prompt, a fault that stops early, an
API key, and the fingerprint that marks its answers as simulated."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from simulator import outputs
from simulator.app import FINGERPRINT, build_app
from tests.simulator.harness import idle_engine, served, with_row_fraction

pytestmark = pytest.mark.anyio
PROMPT = list(range(1000, 1300))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def complete(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await client.post("/v1/completions", json={"prompt": PROMPT, **body})


def test_the_natural_length_is_the_model_s_own_and_bounded() -> None:
    lengths = {outputs.natural_length("ckpt", "m", [i, 7, 9]) for i in range(500)}
    assert min(lengths) >= outputs.NATURAL_MIN and max(lengths) <= outputs.NATURAL_MAX
    assert len(lengths) > 100  # it depends on the prompt
    assert outputs.natural_length("ckpt", "m", PROMPT) == outputs.natural_length("ckpt", "m",
                                                                                  PROMPT)


async def test_a_body_that_does_not_fix_its_length_stops_where_the_model_stops() -> None:
    engine, clock = idle_engine()
    natural = outputs.natural_length(engine.config.checkpoint, "qwen3-next", PROMPT)
    big = natural + 50
    async with served(engine, clock) as client:
        free = (await complete(client, model="qwen3-next", max_tokens=big)).json()
        fixed = (await complete(client, model="qwen3-next", max_tokens=big,
                                min_tokens=big)).json()
        eos = (await complete(client, model="qwen3-next", max_tokens=big,
                              ignore_eos=True)).json()
        capped = (await complete(client, model="qwen3-next", max_tokens=natural - 1)).json()
        bad = await complete(client, max_tokens=4, min_tokens=5)
    assert free["usage"]["completion_tokens"] == natural
    assert free["choices"][0]["finish_reason"] == "stop"
    assert len(free["choices"][0]["text"].split()) == natural
    for answer in (fixed, eos):
        assert answer["usage"]["completion_tokens"] == big
        assert answer["choices"][0]["finish_reason"] == "length"
    assert capped["usage"]["completion_tokens"] == natural - 1
    # the same prompt, the same words: a longer answer starts with the shorter one
    assert fixed["choices"][0]["text"].startswith(free["choices"][0]["text"])
    assert bad.status_code == 422
    assert free["system_fingerprint"] == FINGERPRINT


async def test_the_text_depends_on_the_checkpoint_not_on_the_geometry() -> None:
    texts = []
    for config in ({}, with_row_fraction(0.5), {"checkpoint": "qwen3-next-w8a16-r1"}):
        engine, clock = idle_engine(**config)
        async with served(engine, clock) as client:
            answer = (await complete(client, max_tokens=16, ignore_eos=True)).json()
        texts.append(answer["choices"][0]["text"])
    assert texts[0] == texts[1] != texts[2]


async def test_an_engine_that_stops_early_answers_fewer_tokens_and_faster() -> None:
    for early, tokens in ((None, 32), (20, 20)):
        engine, clock = idle_engine(early_stop=early, latency=outputs_free_latency())
        async with served(engine, clock) as client:
            answer = (await complete(client, max_tokens=32, min_tokens=32,
                                     ignore_eos=True)).json()
        assert answer["usage"]["completion_tokens"] == tokens
        metrics = engine.metrics.render().decode()
        assert f'helios:generation_tokens_total{{model_name="qwen3-next"}} {tokens}.0' in metrics
        latency = engine.metrics.registry.get_sample_value(
            "helios:e2e_request_latency_seconds_sum", {"model_name": "qwen3-next"})
        assert latency == pytest.approx(300 / 40_000 + tokens * 0.010)


def outputs_free_latency() -> Any:
    from simulator.latency import LatencyModel

    return LatencyModel(noise=0.0)


async def test_an_api_key_guards_the_completions_only() -> None:
    engine, clock = idle_engine()

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)

    app = build_app(engine, sleep=sleep, api_key="k-123")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://engine") as client:
        assert (await complete(client, max_tokens=4)).status_code == 401
        wrong = await client.post("/v1/completions", json={"prompt": PROMPT},
                                  headers={"Authorization": "Bearer k-124"})
        assert wrong.status_code == 401
        ok = await client.post("/v1/completions", json={"prompt": PROMPT, "max_tokens": 4},
                               headers={"Authorization": "Bearer k-123"})
        assert ok.status_code == 200
        assert (await client.get("/debug/offload/snapshot")).status_code == 200
        assert (await client.get("/metrics")).status_code == 200
    assert engine.snapshot()["offload"]["lookups"]["total"] == 1  # refused ones never ran
