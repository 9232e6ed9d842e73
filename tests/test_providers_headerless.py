"""The client against a server that is not ours (the header-less double), over real HTTP on 127.0.0.1.

No ``x-ratelimit-*`` header, a sliding window, every Retry-After style in turn, and a reply latency: the
untold limiter must learn the window from the 429s alone -- the requests still in flight when the first
429 comes included -- and nothing may be lost or paid twice. Behaviour only: goodput is the bench's.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from bench.headerless import HeaderlessServer
from shp_ray.providers.base import ChatRequest, Completion, ProviderSpec
from shp_ray.providers.client import OpenAICompatProvider
from shp_ray.providers.retry_policy import Backoff

pytestmark = pytest.mark.integration


def _req(i: int) -> ChatRequest:
    return ChatRequest("m", (("system", "You are the Writer."), ("user", f"Question: h{i}?\nRound: 1")), 16)


async def _run(base_url: str, n: int, **spec: object) -> tuple[list[Completion | BaseException], dict]:
    spec = {"kind": "openai", "base_url": base_url, "model": "m", "max_concurrency": 64, **spec}
    client = OpenAICompatProvider(ProviderSpec(**spec), backoff=Backoff(base_s=0.01, cap_s=0.1), use_ray=False)
    async with client:
        results = await asyncio.gather(*(client.complete(_req(i)) for i in range(n)), return_exceptions=True)
        return results, await client.limiter_snapshot()


@pytest.mark.parametrize("latency_s", [0.05, 0.3])
def test_an_untold_client_learns_the_window_with_replies_in_flight(latency_s):
    # 10 per 1 s, replies after 50 / 300 ms: when the first 429 comes most admitted requests are unanswered
    with HeaderlessServer(limit=10, window_s=1.0, latency_s=latency_s, fault_rate=0.0, stall_rate=0.0) as srv:
        results, limiter = asyncio.run(_run(srv.base_url, 30))
        stats = srv.stats
    assert all(isinstance(r, Completion) for r in results), [r for r in results if not isinstance(r, Completion)]
    assert stats["ok"] == 30 and stats["paid_twice"] == 0 and stats["http_429"] > 0
    assert limiter["window_learned"] == 1
    assert limiter["lanes"] == 10  # the whole window: the requests in flight at the first 429 count too
    assert 1.0 <= limiter["lane_width_s"] <= 1.5  # the hints' rounding narrowed by the precise one


def test_faults_and_stalls_lose_nothing_and_pay_nothing_twice():
    # every admitted request counts against the window, faults included; no hedging asked for
    options = {"limit": 10, "window_s": 1.0, "latency_s": 0.05, "fault_rate": 0.2, "stall_rate": 0.05}
    with HeaderlessServer(**options, stall_s=(0.3, 0.5), seed=3) as srv:
        results, limiter = asyncio.run(_run(srv.base_url, 30, max_retries=10))
        stats = srv.stats
    assert all(isinstance(r, Completion) for r in results), [r for r in results if not isinstance(r, Completion)]
    assert sum(stats["faults"].values()) > 0 and stats["stalls"] > 0
    assert stats["ok"] == 30 and stats["paid_twice"] == 0 and limiter.get("hedges", 0) == 0


def test_the_double_says_nothing_but_its_hints():
    async def post_all(url: str, n: int) -> list[tuple[int, dict[str, str]]]:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        async with aiohttp.ClientSession() as session:
            out = []
            for _ in range(n):
                async with session.post(url + "/chat/completions", json=body) as resp:
                    await resp.read()
                    out.append((resp.status, {k.lower(): v for k, v in resp.headers.items()}))
            return out

    with HeaderlessServer(limit=2, window_s=30.0, fault_rate=0.0, stall_rate=0.0) as srv:
        replies = asyncio.run(post_all(srv.base_url, 6))
    assert [status for status, _ in replies] == [200, 200, 429, 429, 429, 429]
    assert not any(k.startswith("x-ratelimit") for _, headers in replies for k in headers)
    hints = [(h.get("retry-after"), h.get("retry-after-ms")) for _, h in replies[2:]]
    assert hints[0][0] is not None and hints[0][0].isdigit() and 29 <= int(hints[0][0]) <= 30  # whole seconds
    assert hints[1][0] is not None and hints[1][0].endswith("GMT")  # an HTTP date
    assert hints[2][0] is None and hints[2][1] is not None and 29000 <= int(hints[2][1]) <= 30000
    assert hints[3] == (None, None)  # no hint at all


def test_the_bench_runs_against_the_double_at_a_latency(capsys):
    from bench import ratelimit as bench_ratelimit

    assert bench_ratelimit.main(["--server", "headerless", "--latency-ms", "20", "--requests", "12"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["ok"] == 12 and out["failed"] == 0 and out["paid_twice"] == 0
    assert out["server"]["server"] == "headerless" and out["server"]["latency_s"] == 0.02
    assert out["server"]["ok"] == out["paid_calls"] >= 12 and {"goodput", "utilisation", "limiter"} <= out.keys()
    assert bench_ratelimit.main(["--latency-ms", "20", "--serve"]) == 2  # a latency only for the double
    assert "--latency-ms needs --server headerless" in capsys.readouterr().err
