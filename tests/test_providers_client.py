"""The rate-limit-aware client against the simulated server over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging

import pytest

from shp_ray.providers.base import ChatRequest, Completion, ProviderError, ProviderSpec
from shp_ray.providers.client import OpenAICompatProvider
from shp_ray.providers.registry import make_provider
from shp_ray.providers.retry_policy import Backoff
from shp_ray.providers.sim.server import SimServer

pytestmark = pytest.mark.integration
SECRET = "sk-test-DO-NOT-LEAK-1234567890"


def _req(i: int, role: str = "Writer") -> ChatRequest:
    return ChatRequest("sim-1", (("system", f"You are the {role}."), ("user", f"Question: q{i}?\nRound: 1")), 48)


async def _fire(provider, n: int) -> list[Completion | BaseException]:
    async with provider:
        return await asyncio.gather(*(provider.complete(_req(i)) for i in range(n)), return_exceptions=True)


def _client(base_url: str, **spec) -> OpenAICompatProvider:
    spec = {"kind": "sim", "base_url": base_url, "model": "sim-1", **spec}
    return OpenAICompatProvider(ProviderSpec(**spec), backoff=Backoff(base_s=0.01, cap_s=0.1), use_ray=False)


def test_faults_are_retried_and_nothing_is_lost():
    with SimServer(fault_rate=0.3, slow_s=0.05, seed=7) as sim:
        client = _client(sim.base_url, max_retries=10)
        results = asyncio.run(_fire(client, 80))
        stats = sim.stats
    assert all(isinstance(r, Completion) for r in results), [r for r in results if not isinstance(r, Completion)][:3]
    assert stats["faults_total"] >= 10 and stats["faults"]["drop"] > 0 and stats["faults"]["malformed"] > 0
    assert client.stats["retries"] >= stats["faults_total"] - stats["faults"]["slow"]
    assert max(r.attempts for r in results) > 1
    assert all(r.usage.completion_tokens > 0 and r.content for r in results)


def test_a_told_window_goes_out_at_its_start_and_nothing_is_refused():
    # 10 requests per 1 s window, told (rpm and window); a terse server: no header tells the client anything
    with SimServer(rpm=600, window_s=1.0, ratelimit_headers=False) as sim:
        client = _client(sim.base_url, rpm=600, rate_window_s=1.0, max_concurrency=30)
        results = asyncio.run(_fire(client, 30))
        stats = sim.stats
    assert all(isinstance(r, Completion) for r in results)
    assert stats["http_429"] == 0
    assert stats["timeline"][0][0] == 10  # the first window's whole allowance went out at once, no more


@pytest.mark.parametrize("style", ["http-date", "ms", "none"])
def test_unknown_limit_recovers_with_every_retry_after_style(style):
    # 10 per second, not told, and no rate-limit headers to tell it either: only the 429s' hints. No
    # hedging asked for: however slow a reply under CPU load, nothing ends an attempt but its timeout, so
    # no request is paid twice (a hedge of a slow reply once made this 26 ok for 25)
    with SimServer(rpm=600, window_s=1.0, retry_after=style, ratelimit_headers=False) as sim:
        client = _client(sim.base_url, max_concurrency=8)
        results = asyncio.run(_fire(client, 25))
        stats = sim.stats
    assert all(isinstance(r, Completion) for r in results)
    assert client.deadline is None and client.stats.get("hedges", 0) == 0
    assert stats["http_429"] > 0 and stats["ok"] == 25 and stats["ok_repeated"] == 0


def test_permanent_errors_are_not_retried_and_the_key_never_leaks(monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("SHP_TEST_SERVER_KEY", "sk-the-right-one-0987654321")
    monkeypatch.setenv("SHP_TEST_CLIENT_KEY", SECRET)
    with SimServer(api_key_env="SHP_TEST_SERVER_KEY", models=("sim-1",)) as sim:
        wrong = _client(sim.base_url, api_key_env="SHP_TEST_CLIENT_KEY")
        with pytest.raises(ProviderError) as err:
            asyncio.run(_fire_one(wrong, _req(0)))
        assert err.value.status == 401 and err.value.attempts == 1 and not err.value.retryable
        assert sim.stats["requests"] == 1  # not retried
        for text in (str(err.value), repr(err.value), repr(wrong), caplog.text):
            assert SECRET not in text

        monkeypatch.setenv("SHP_TEST_CLIENT_KEY", "sk-the-right-one-0987654321")
        right = _client(sim.base_url, api_key_env="SHP_TEST_CLIENT_KEY")
        with pytest.raises(ProviderError) as err404:
            asyncio.run(_fire_one(right, ChatRequest("no-such-model", (("user", "x"),))))
        assert err404.value.status == 404 and err404.value.attempts == 1
        assert asyncio.run(_fire_one(right, _req(1))).content
    assert "sk-the-right-one" not in str(err404.value)

    monkeypatch.delenv("SHP_TEST_CLIENT_KEY")
    with pytest.raises(ProviderError, match="SHP_TEST_CLIENT_KEY is not set"):
        _client("http://127.0.0.1:9/v1", api_key_env="SHP_TEST_CLIENT_KEY")


def test_retry_budget_ends_in_a_typed_error():
    with SimServer(fault_rate=1.0, faults=("503",)) as sim:
        with pytest.raises(ProviderError) as err:
            asyncio.run(_fire_one(_client(sim.base_url, max_retries=2), _req(0)))
        assert sim.stats["requests"] == 3
    assert err.value.status == 503 and err.value.attempts == 3 and err.value.retryable


def test_connection_refused_and_timeouts_are_typed():
    with SimServer(fault_rate=1.0, faults=("slow",), slow_s=0.5) as sim:
        client = _client(sim.base_url, max_retries=1, timeout_s=0.1)
        with pytest.raises(ProviderError, match="timeout") as err:
            asyncio.run(_fire_one(client, _req(0)))
    assert err.value.attempts == 2 and err.value.status is None
    with pytest.raises(ProviderError, match="connection"):
        asyncio.run(_fire_one(_client(sim.base_url, max_retries=0), _req(0)))  # server is gone


def test_make_provider_http_kinds_use_the_client():
    with SimServer() as sim:
        p = make_provider(ProviderSpec(kind="openai", base_url=sim.base_url, model="sim-1"))
        assert isinstance(p, OpenAICompatProvider)
        c = asyncio.run(_fire_one(p, _req(3, role="Critic")))
    assert c.model == "sim-1" and c.attempts == 1 and c.usage.prompt_tokens > 0


async def _fire_one(provider, request: ChatRequest) -> Completion:
    async with provider:
        return await provider.complete(request)
