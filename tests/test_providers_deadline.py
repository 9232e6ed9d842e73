"""The adaptive deadline and hedging: against the simulated server's slow faults, over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import pytest

from bench import ratelimit as bench_ratelimit
from shp_ray.providers.base import ChatRequest, Completion, ProviderError, ProviderSpec
from shp_ray.providers.client import OpenAICompatProvider
from shp_ray.providers.deadline import AdaptiveDeadline, DeadlinePolicy
from shp_ray.providers.limiter import RateLimiter, RateLimits
from shp_ray.providers.retry_policy import Backoff
from shp_ray.providers.sim.server import SimServer

pytestmark = pytest.mark.integration
SEED, RATE = 5, 0.3
FAST = DeadlinePolicy(
    floor_s=0.2, min_samples=2, watch=0.0, abandon_floor_s=0.0
)  # learns from the two warm-up calls at once


def _req(i: int) -> ChatRequest:
    return ChatRequest("sim-1", (("system", "You are the Writer."), ("user", f"Question: d{i}?\nRound: 1")), 32)


def _client(
    base_url: str, deadline: DeadlinePolicy | bool = FAST, headroom: float = 0.98, **spec
) -> OpenAICompatProvider:
    spec = {"kind": "sim", "base_url": base_url, "model": "sim-1", "max_retries": 4, **spec}
    backoff = Backoff(base_s=0.01, cap_s=0.05)
    return OpenAICompatProvider(
        ProviderSpec(**spec), backoff=backoff, headroom=headroom, use_ray=False, deadline=deadline
    )


async def _sequential(client: OpenAICompatProvider, indices: list[int]) -> list[Completion]:
    async with client:
        return [await client.complete(_req(i)) for i in indices]


def _probe(n: int) -> list[tuple[bool, bool]]:
    """Which of requests 0..n-1 slow-fault on their 1st and 2nd arrival (the draw is seeded per body):
    asked of the real server with a zero hold, through the real client without a deadline."""
    out = []
    with SimServer(seed=SEED, slow_fault_rate=RATE, slow_fault_s=(0.0, 0.0)) as sim:
        client = _client(sim.base_url, deadline=False, max_retries=0)

        async def run() -> None:
            async with client:
                for i in range(n):
                    hits = []
                    for _ in range(2):
                        before = sim.stats["slow_faults"]
                        with contextlib.suppress(ProviderError):  # the 504 of a slow fault: what we probe for
                            await client.complete(_req(i))
                        hits.append(sim.stats["slow_faults"] > before)
                    out.append((hits[0], hits[1]))

        asyncio.run(run())
    return out


def test_a_slow_fault_is_hedged_once_the_limiter_has_room_and_no_call_is_paid_twice():
    draws = _probe(24)
    healthy = [i for i, (first, _) in enumerate(draws) if not first][:2]
    stuck = next(i for i, (first, second) in enumerate(draws) if first and not second)
    with SimServer(seed=SEED, slow_fault_rate=RATE, slow_fault_s=(5.0, 5.0)) as sim:
        client = _client(sim.base_url)
        warm, hedged = asyncio.run(_sequential(client, healthy + [stuck]))[1:]
        stats = sim.stats
    assert stats["slow_faults"] == 1  # the stuck request's first attempt, held 5 s then a 504
    assert client.stats["hedges"] == 1 and hedged.attempts == 2 and hedged.content
    assert hedged.latency_s < 5.0  # it did not wait out the hold
    assert stats["ok"] == 3 and stats["ok_unread"] == 0  # paid calls: one per request, none wasted
    assert client.stats["attempts"] == 4  # the hedge is an attempt like any other ...
    assert client._limiter is not None and client._limiter.limiter.counters["acquired"] == 4  # ... and took a lease


def test_without_room_the_stuck_attempt_is_abandoned_and_retried_through_the_queue():
    draws = _probe(24)
    healthy = [i for i, (first, _) in enumerate(draws) if not first][:2]
    stuck = next(i for i, (first, second) in enumerate(draws) if first and not second)
    policy = DeadlinePolicy(floor_s=0.2, min_samples=2, watch=0.0, abandon_after=2.0, abandon_floor_s=0.0)
    # max_concurrency=1: the stuck attempt holds the only slot, so a hedge never finds room
    with SimServer(seed=SEED, slow_fault_rate=RATE, slow_fault_s=(5.0, 5.0)) as sim:
        client = _client(sim.base_url, deadline=policy, max_concurrency=1)
        done = asyncio.run(_sequential(client, healthy + [stuck]))[-1]
        stats = sim.stats
    assert client.stats["hedges"] == 0 and client.stats["abandoned"] == 1 and done.attempts == 2
    assert done.latency_s < 5.0
    assert stats["ok"] == 3 and stats["ok_unread"] == 0


def test_a_hedge_never_takes_a_slot_the_limiter_has_promised_to_someone_else():
    async def run() -> None:
        lim = RateLimiter(RateLimits(rpm=600, max_concurrency=8))  # one start every ~0.1 s
        first = lim.try_acquire(max_delay_s=0.02)
        assert first is not None and first[1] == 0.0  # an idle limiter has room now
        assert lim.try_acquire(max_delay_s=0.02) is None  # pacing puts the next start ~0.1 s out
        before = lim.snapshot()["acquired"]
        assert lim.try_acquire(max_delay_s=0.02) is None and lim.snapshot()["acquired"] == before  # nothing reserved
        queued = [asyncio.ensure_future(lim.acquire()) for _ in range(3)]  # a queue of paced requests
        await asyncio.sleep(0)  # they are waiting for their starts
        assert not any(q.done() for q in queued) and lim.snapshot()["waiting"] == 3
        assert lim.try_acquire(max_delay_s=0.02) is None  # still no room: the hedge waits its turn
        for q in queued:
            q.cancel()
        full = RateLimiter(RateLimits(max_concurrency=1, initial_concurrency=1))
        await full.acquire()
        assert full.try_acquire(max_delay_s=0.02) is None  # no free slot

    asyncio.run(run())


def test_a_told_limit_stays_unbroken_with_hedges_on():
    # 10 requests per 1 s window, paced at 90 % (slack for a loaded machine, as in test_providers_client)
    with SimServer(rpm=600, window_s=1.0, seed=SEED, slow_fault_rate=0.1, slow_fault_s=(2.0, 2.0)) as sim:
        client = _client(sim.base_url, headroom=0.9, rpm=600, max_concurrency=8)

        async def run() -> list[Completion]:
            async with client:
                return await asyncio.gather(*(client.complete(_req(i)) for i in range(30)))

        results = asyncio.run(run())
        stats = sim.stats
    assert all(r.content for r in results) and stats["slow_faults"] > 0
    assert stats["http_429"] <= 2  # hedges and retries were paced inside the told limit like the rest
    # a served reply nobody read can only come from a hedge (a slow machine can make a healthy one late)
    assert stats["ok"] == 30 + stats["ok_unread"] and stats["ok_unread"] <= client.stats["hedges"]


def test_the_deadline_learns_from_successes_and_spends_a_budget():
    d = AdaptiveDeadline(
        DeadlinePolicy(floor_s=0.5, slack=2.0, min_samples=3, watch=0.0, budget_share=0.5, budget_cap=2.0)
    )
    assert d.for_attempt(0) is None  # nothing seen yet
    for latency in (0.1, 0.2, 0.4):
        d.observe(latency)
    assert d.current() == pytest.approx(0.8)  # 2 x the slowest success
    assert d.for_attempt(1) == pytest.approx(1.6)  # doubled after one abandonment of the same call
    d.spend(2)
    assert d.for_attempt(0) is None  # the budget is spent: wait like before
    assert d.for_attempt(0) == pytest.approx(0.8)  # ... and earned back per attempt
    with pytest.raises(ValueError, match="slack"):
        DeadlinePolicy(slack=0.5)


def test_no_deadline_before_the_client_has_watched_long_enough_to_see_a_slow_reply():
    d = AdaptiveDeadline(DeadlinePolicy(floor_s=0.05, min_samples=1, watch=2.0))
    assert d.for_attempt(0) is None  # the first attempt starts the watch
    d.observe(0.001)
    assert d.current() is None  # 0.05 s deadline, but not 2 x 0.05 s watched yet
    time.sleep(0.12)
    assert d.current() == pytest.approx(0.05)


def test_hedging_only_when_asked_and_never_on_the_embedded_server():
    def deadline(**spec):
        spec = {"kind": "sim", "base_url": "http://127.0.0.1:9/v1", **spec}
        return OpenAICompatProvider(ProviderSpec(**spec), use_ray=False).deadline

    assert deadline() is None  # the default: a request is never paid twice
    assert deadline(hedge=True) is not None
    assert deadline(kind="llama", hedge=True) is None  # the embedded server keeps the plain timeout


def test_the_bench_reports_paid_calls(capsys):
    argv = ["--serve", "--serve-rpm", "6000", "--requests", "12", "--serve-slow-fault-rate", "1/4"]
    argv += ["--serve-slow-fault-s", "0.3,0.3"]
    assert bench_ratelimit.main([*argv, "--seed", str(SEED)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["ok"] == 12 and out["server"]["slow_faults"] > 0
    assert out["paid_calls"] == out["server"]["ok"] >= 12
    assert out["paid_calls_wasted"] == out["paid_calls"] - 12
    assert {"hedges", "abandoned", "deadline", "goodput"} <= out.keys()


def test_the_bench_runs_told_untold_and_the_peers_side_by_side(capsys):
    argv = ["--serve", "--serve-rpm", "6000", "--serve-window", "1", "--requests", "12", "--peers"]
    assert bench_ratelimit.main([*argv, "--seed", str(SEED)]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out.strip().splitlines()[-1])
    assert out["told"]["ok"] == out["untold"]["ok"] == 12 and out["told"]["server"]["simulated"]
    for peer in ("litellm_router", "openai_aiolimiter"):
        if "skipped" in out[peer]:  # the bench extra is not installed: one line says so
            assert f"{peer} skipped: " in captured.err and "pip install" in out[peer]["skipped"]
        else:
            assert out[peer]["ok"] + out[peer]["failed"] == 12
    assert set(out["side_by_side"]) == {"told", "untold", "litellm_router", "openai_aiolimiter"}
