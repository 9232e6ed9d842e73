"""One real round trip through the embedded llama.cpp server (SmolLM2-135M, a TINY model)."""

from __future__ import annotations

import asyncio

import pytest

from shp_ray.providers.base import ChatRequest
from shp_ray.providers.llama import LlamaServer, model_path
from shp_ray.providers.registry import make_provider

pytestmark = pytest.mark.integration


def test_two_calls_through_the_embedded_llm():
    assert model_path().stat().st_size > 50_000_000
    server = LlamaServer(n_threads=1)
    with server:
        assert server.running

        async def two_calls():
            async with make_provider(server.spec()) as provider:  # type: ignore[attr-defined]
                first = await provider.complete(
                    ChatRequest(server.alias, (("user", "Name one colour."),), max_tokens=8, seed=1)
                )
                second = await provider.complete(
                    ChatRequest(server.alias, (("user", "Name one animal."),), max_tokens=8, seed=1)
                )
                return first, second

        first, second = asyncio.run(two_calls())
    assert not server.running
    for c in (first, second):
        assert c.content.strip()
        assert 0 < c.usage.completion_tokens <= 8 and c.usage.prompt_tokens > 3
        assert c.attempts == 1 and c.latency_s > 0


def test_a_missing_model_file_is_a_clear_error(tmp_path):
    from shp_ray.providers.llama import EmbeddedLLMError

    with pytest.raises(EmbeddedLLMError, match="does not exist"):
        LlamaServer(model=tmp_path / "nope.gguf").start()
