"""Retry/header policy and the limiter's pacing/AIMD logic (pure, no HTTP, no Ray)."""

from __future__ import annotations

import asyncio
import random
import time
from email.utils import formatdate

import pytest

from shp_ray.providers.base import ChatRequest, ProviderError, ProviderSpec
from shp_ray.providers.limiter import RateLimiter, RateLimits
from shp_ray.providers.registry import make_provider
from shp_ray.providers.retry_policy import (
    Backoff,
    exhausted_window,
    is_retryable_status,
    parse_duration,
    parse_retry_after,
)
from shp_ray.providers.tokens import count_tokens


def test_retry_after_variants():
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "1"}) == 0.25  # ms is preferred
    assert parse_retry_after({"RETRY-AFTER": "0.5"}) == 0.5
    now = time.time()
    wait = parse_retry_after({"Retry-After": formatdate(now + 10, usegmt=True)}, now=now)
    assert wait is not None and 9.0 <= wait <= 10.0
    assert parse_retry_after({"Retry-After": formatdate(now - 100, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "99999"}) == 600.0  # nonsense is capped


def test_ratelimit_reset_durations():
    assert parse_duration("6m0s") == 360.0
    assert parse_duration("20ms") == pytest.approx(0.02)
    assert parse_duration("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration("1.25") == 1.25
    assert parse_duration("later") is None
    headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5s"}
    assert exhausted_window(headers) == 1.5
    assert exhausted_window({**headers, "x-ratelimit-remaining-requests": "3"}) is None


def test_status_classes():
    assert all(is_retryable_status(s) for s in (429, 500, 502, 503, 504, 408))
    assert not any(is_retryable_status(s) for s in (400, 401, 403, 404, 422))


def test_full_jitter_backoff_bounds():
    rng = random.Random(0)
    b = Backoff(base_s=0.5, cap_s=4.0)
    draws = [b.delay(n, rng) for n in range(10) for _ in range(50)]
    assert all(0.0 <= d <= 4.0 for d in draws)
    assert max(b.delay(0, rng) for _ in range(100)) <= 0.5
    assert len({round(d, 6) for d in draws}) > 400  # jittered, not a fixed schedule


async def _starts(lim: RateLimiter, n: int, est_tokens: int = 0, actual: int | None = None) -> list[float]:
    """The start times ``n`` requests in a row are granted (the grant's time plus its sleep)."""
    starts = []
    for _ in range(n):
        lease, delay = await lim.acquire(est_tokens=est_tokens)
        starts.append(time.monotonic() + delay)
        lim.release(lease, outcome="ok", est_tokens=est_tokens, actual_tokens=actual, latency_s=0.001)
    return starts


def _gaps(starts: list[float]) -> list[float]:
    return [b - a for a, b in zip(starts, starts[1:], strict=False)]


def test_gcra_paces_requests_and_settles_tokens():
    async def run():
        lim = RateLimiter(RateLimits(rpm=600, tpm=6000, headroom=1.0))
        # 600 rpm and no window told = one request per 0.1 s; 10 tokens at 6000 tpm = 0.1 s: smooth, no burst
        # (never sooner; later only if this busy machine wakes the caller late)
        assert all(g >= 0.099 for g in _gaps(await _starts(lim, 5, 10, 10)))
        (s1,) = await _starts(lim, 1, 100, 10)  # estimate 100 tokens = 1 s of budget; refund 90 of them
        (s2,) = await _starts(lim, 1, 10, 10)
        assert 0.099 <= s2 - s1 < 0.5  # 10 tokens' worth after the refund, not 100

    asyncio.run(run())


def test_aimd_window_halves_on_429_and_grows_on_success():
    async def run():
        lim = RateLimiter(RateLimits(max_concurrency=64, initial_concurrency=8))
        leases = [(await lim.acquire())[0] for _ in range(8)]
        assert lim.snapshot()["concurrency_window"] == 8
        blocked = asyncio.ensure_future(lim.acquire())
        await asyncio.sleep(0.01)
        assert not blocked.done()  # the 9th waits for a slot
        lim.release(leases[0], outcome="rate_limited", wait_hint_s=0.05)
        lim.release(leases[1], outcome="rate_limited")  # same round trip: one decrease only
        snap = lim.snapshot()
        assert snap["concurrency_window"] == 4 and snap["decreases"] == 1 and snap["paused_for_s"] > 0
        for lease in leases[2:]:
            lim.release(lease, outcome="ok", latency_s=0.01)
        lease9, delay9 = await asyncio.wait_for(blocked, 1.0)
        assert delay9 > 0  # the server's Retry-After pauses everyone
        lim.release(lease9, outcome="ok", latency_s=0.01)
        assert lim.snapshot()["concurrency_window"] >= 4

    asyncio.run(run())


def test_dead_callers_leases_are_reclaimed():
    async def run():
        lim = RateLimiter(RateLimits(rpm=None, max_concurrency=1, initial_concurrency=1, lease_ttl_s=0.05))
        await lim.acquire()  # never released: its caller "died"
        _, _ = await asyncio.wait_for(_retry_acquire(lim), 2.0)
        assert lim.snapshot()["leases_reclaimed"] == 1

    async def _retry_acquire(lim):
        await asyncio.sleep(0.1)
        return await lim.acquire()

    asyncio.run(run())


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="rpm"):
        RateLimits(rpm=0)
    with pytest.raises(ValueError, match="max_concurrency"):
        RateLimits(max_concurrency=0)
    with pytest.raises(ValueError, match="kind"):
        make_provider(ProviderSpec(kind="nope"))


def test_scripted_provider_replies_counts_and_failures():
    async def run():
        p = make_provider(ProviderSpec(kind="scripted", model="fake"), script=["one two three", ProviderError("boom")])
        c = await p.complete(ChatRequest("fake", (("user", "hello there"),), max_tokens=2))
        assert c.content == "one two" and c.usage.completion_tokens == 2
        assert c.usage.prompt_tokens == count_tokens("hello there") + 3
        with pytest.raises(ProviderError, match="boom"):
            await p.complete(ChatRequest("fake", (("user", "x"),)))
        with pytest.raises(ProviderError, match="exhausted"):
            await p.complete(ChatRequest("fake", (("user", "x"),)))
        sim = make_provider(ProviderSpec(kind="scripted"))
        w = await sim.complete(ChatRequest("m", (("system", "You are the Writer."), ("user", "Question: q\nRound: 2"))))
        assert "(Revision 2.)" in w.content
        echo = make_provider(ProviderSpec(kind="scripted"), script=lambda r: r.messages[-1][1].upper())
        assert (await echo.complete(ChatRequest("m", (("user", "abc"),)))).content == "ABC"

    asyncio.run(run())


def test_should_retry_honours_server_overrides_and_quota():
    from shp_ray.providers.retry_policy import should_retry

    assert should_retry(503, {}, "")
    assert not should_retry(503, {"x-should-retry": "false"}, "")
    assert not should_retry(429, {}, "You exceeded your current quota [insufficient_quota]")
    assert should_retry(409, {"X-Should-Retry": "true"}, "")
    assert not should_retry(401, {"x-should-retry": "true"}, "")


def test_told_limit_that_draws_429s_is_paced_lower_then_recovers():
    async def run():
        lim = RateLimiter(RateLimits(rpm=600, headroom=1.0))
        lease, _ = await lim.acquire()
        lim.release(lease, outcome="rate_limited")
        assert lim.snapshot()["rate_scale"] < 1.0
        assert all(g > 0.1 for g in _gaps(await _starts(lim, 3)))  # slower than the told 0.1 s per request
        await _starts(lim, 30)
        assert lim.snapshot()["rate_scale"] == 1.0

    asyncio.run(run())


def test_unknown_limit_learns_a_rate_from_429s():
    async def run():
        lim = RateLimiter(RateLimits(max_concurrency=64, initial_concurrency=64))
        for _ in range(10):
            lease, delay = await lim.acquire()
            assert delay == 0.0  # nothing learned yet: no pacing
            lim.release(lease, outcome="ok", latency_s=0.001)
        lease, _ = await lim.acquire()
        lim.release(lease, outcome="rate_limited")
        learned = lim.snapshot()["learned_rps"]
        assert learned == pytest.approx(10.0, rel=0.05)  # 10 admitted over the 1 s floor of the horizon
        gaps = _gaps(await _starts(lim, 4))
        assert all(g >= 0.09 for g in gaps)  # paced at the learned rate (x2 per 10 s probe), never sooner

    asyncio.run(run())
