"""The window lanes and the rate-limit headers: the limiter alone, then the client against the simulated
server on 127.0.0.1 (behaviour and counts; the throughput is measured in ``shp-bench ratelimit``)."""

from __future__ import annotations

import asyncio
import time
from email.utils import formatdate
from types import SimpleNamespace

import pytest

from shp_ray.providers import limiter as limiter_module
from shp_ray.providers.base import ChatRequest, Completion, ProviderSpec
from shp_ray.providers.client import OpenAICompatProvider
from shp_ray.providers.limiter import RateLimiter, RateLimits
from shp_ray.providers.quota import Allowance, Heard, read_allowances
from shp_ray.providers.retry_policy import Backoff
from shp_ray.providers.sim.server import SimServer


def test_both_dialects_of_rate_limit_headers_are_read():
    openai = {
        "x-ratelimit-limit-requests": "5000",
        "x-ratelimit-remaining-requests": "4999",
        "x-ratelimit-reset-requests": "12ms",
        "x-ratelimit-limit-tokens": "160000",
        "x-ratelimit-remaining-tokens": "159976",
        "x-ratelimit-reset-tokens": "6m0s",
    }
    said = read_allowances(openai)
    assert said["requests"] == Allowance(4999, pytest.approx(0.012), 5000)
    assert said["tokens"] == Allowance(159976, 360.0, 160000)
    now = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    anthropic = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "42",
        "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:34Z",
        "anthropic-ratelimit-tokens-remaining": "18000",
        "anthropic-ratelimit-tokens-reset": "2026-01-01T00:00:06.500+00:00",
    }
    said = read_allowances(anthropic, wall_now=now)
    assert said["requests"] == Allowance(42, 34.0, 50) and said["tokens"] == Allowance(18000, 6.5, None)
    assert read_allowances({"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "soon"}) == {}
    assert read_allowances({"Retry-After": formatdate(now, usegmt=True)}) == {}


def _grants(lim: RateLimiter, n: int) -> list[int]:
    """Leases granted right now, without waiting (at most ``n``)."""
    out = []
    for _ in range(n):
        grant = lim.try_acquire()
        if grant is None:
            break
        out.append(grant[0])
    return out


def test_a_told_window_is_granted_at_once_and_a_lane_that_never_reached_the_quota_comes_back():
    async def run() -> None:
        lim = RateLimiter(RateLimits(rpm=240, window_s=30.0, max_concurrency=200))  # 120 per 30 s window
        leases = _grants(lim, 200)
        assert len(leases) == 120  # the whole window's allowance, now; the next waits for the window
        lim.release(leases[0], outcome="error")  # it reached the server: its lane stays taken
        assert _grants(lim, 1) == []
        lim.release(leases[1], outcome="unreached")  # a refused connection: its lane is free again
        assert len(_grants(lim, 2)) == 1
        assert lim.snapshot()["lanes_given_back"] == 1

    asyncio.run(run())


def test_a_429_after_a_lane_came_back_stops_giving_lanes_back():
    async def run() -> None:
        lim = RateLimiter(RateLimits(rpm=4, window_s=30.0))  # 2 per 30 s window
        a, b = _grants(lim, 3)
        lim.release(a, outcome="unreached")
        (c,) = _grants(lim, 1)
        lim.release(c, outcome="rate_limited")  # the server had counted the failed one after all
        assert lim.snapshot()["refunds_trusted"] is False
        lim.release(b, outcome="unreached")
        assert _grants(lim, 1) == []  # no longer given back

    asyncio.run(run())


def test_a_refusal_the_lanes_account_for_holds_no_one_past_them():
    async def run() -> None:
        lim = RateLimiter(RateLimits(rpm=4, window_s=30.0))  # 2 per 30 s window
        a, _ = _grants(lim, 2)
        lim.release(a, outcome="unreached")
        (c,) = _grants(lim, 1)
        # refused with a hint rounded up to whole seconds: the lanes now hold the window (the failed one
        # counted), so the hint's extra rounding pauses nobody; an unexplained 429 still pauses everyone
        lim.release(c, outcome="rate_limited", wait_hint_s=30.0)
        assert lim.snapshot()["refunds_distrusted"] == 1 and "pauses" not in lim.snapshot()
        untold = RateLimiter(RateLimits(max_concurrency=4, initial_concurrency=4))
        (d,) = _grants(untold, 1)
        untold.release(d, outcome="rate_limited", wait_hint_s=0.1)  # too short to tell a window
        assert untold.snapshot()["pauses"] == 1

    asyncio.run(run())


def test_a_window_learned_from_a_429_counts_every_request_in_flight_then_drops_those_refused():
    async def run() -> None:
        lim = RateLimiter(RateLimits(max_concurrency=64, initial_concurrency=12))  # nothing told, no headers
        leases = _grants(lim, 12)
        assert len(leases) == 12
        for lease in leases[:3]:  # answered: the server counted them
            lim.release(lease, outcome="ok", latency_s=0.5, heard=Heard(time.monotonic()))
        lim.release(leases[3], outcome="unreached", heard=Heard(time.monotonic()))  # a 503: counted or not
        # the 6th is refused first; the 7th-9th left after it yet arrived before it (fresh connections cross):
        # admitted, still in flight; the 10th-12th arrived after it and are refused in turn
        lim.release(leases[5], outcome="rate_limited", wait_hint_s=4.0)
        assert lim.snapshot()["window_learned"] == 1
        for lease in leases[9:]:
            lim.release(lease, outcome="rate_limited", wait_hint_s=4.0)
        # 4 answered + the 5th and the 7th-9th in flight: 8 lanes (was 4: the 503 and the three that crossed
        # were left out, and a lane left out never comes back)
        assert lim.snapshot()["lanes"] == 8 and lim.snapshot()["window_shrunk"] == 3
        assert _grants(lim, 1) == []  # all 8 held until the hinted end of the window

    asyncio.run(run())


def _seven_lanes_of_5_s(clock: list[float], heard: Heard | None = None) -> tuple[RateLimiter, list]:
    """Nothing told, no headers: 8 requests out, 6 answered, the 7th refused with a 5 s hint -- 7 lanes of 5 s are
    learned; the 8th is still in flight (leases[7])."""
    lim = RateLimiter(RateLimits(max_concurrency=64, initial_concurrency=8))
    leases = _grants(lim, 8)
    for lease in leases[:6]:
        lim.release(lease, outcome="ok", latency_s=0.5, heard=Heard(clock[0]))
    lim.release(leases[6], outcome="rate_limited", wait_hint_s=5.0, heard=heard)
    return lim, leases


def test_a_late_arrival_raises_the_margin_for_a_while_and_only_a_second_refusal_takes_a_lane(monkeypatch):
    clock = [1000.0]  # the limiter's clock, moved by hand: no test timing
    monkeypatch.setattr(limiter_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    async def run() -> None:
        lim, leases = _seven_lanes_of_5_s(clock)
        lim.release(leases[7], outcome="ok", latency_s=0.5, heard=Heard(clock[0]))
        base = lim.snapshot()["lane_margin_s"]
        assert lim.snapshot()["lanes"] == 7 and base == pytest.approx(0.03)
        clock[0] += 5.2  # the window has passed
        (late,) = _grants(lim, 1)
        lim.release(late, outcome="rate_limited")  # its arrival was late: the margin grows, every lane stays
        assert lim.snapshot()["margin_raised"] == 1 and lim.snapshot()["lanes"] == 7  # was 6 at once
        assert lim.snapshot()["lane_margin_s"] > base
        clock[0] += 5.3  # a window without a refusal: the margin comes down a step
        (ok,) = _grants(lim, 1)
        lim.release(ok, outcome="ok", latency_s=0.5, heard=Heard(clock[0]))
        assert lim.snapshot()["margin_eased"] == 1 and base < lim.snapshot()["lane_margin_s"] < 0.095
        (again,) = _grants(lim, 1)  # refused again a window after the raise: the guessed window is too large
        lim.release(again, outcome="rate_limited")
        assert lim.snapshot()["margin_raised"] == 2 and lim.snapshot()["lanes"] == 6
        clock[0] += 9.0  # under two windows since: the lane stays away
        (ok,) = _grants(lim, 1)
        lim.release(ok, outcome="ok", latency_s=0.5, heard=Heard(clock[0]))
        assert lim.snapshot()["lanes"] == 6 and not lim.snapshot()["lanes_regrown"]
        clock[0] += 1.2  # two windows without a refusal: the lane comes back (it was a late arrival, not a lane)
        assert len(_grants(lim, 8)) == 6  # 7 lanes, one still held by the request sent 1.2 s ago
        assert lim.snapshot()["lanes"] == 7 and lim.snapshot()["lanes_regrown"] == 1

    asyncio.run(run())


def test_a_refused_probe_soon_after_a_lane_came_back_stops_giving_lanes_back(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(limiter_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    async def run() -> None:
        lim, leases = _seven_lanes_of_5_s(clock, Heard(None, {}, 1.0))
        lim.release(leases[7], outcome="unreached", heard=Heard(clock[0]))  # a 503: its lane comes back
        assert lim.snapshot()["lanes_given_back"] == 1
        (extra,) = _grants(lim, 2)  # it goes out again (the server takes it: its window had room left)
        lim.release(extra, outcome="ok", latency_s=0.5, heard=Heard(clock[0]))
        clock[0] = 1004.5
        (probe,) = _grants(lim, 2)  # the width probe, refused: the server counted the 503 after all
        lim.release(probe, outcome="rate_limited", wait_hint_s=0.6, heard=Heard(1004.5, {}, 0.001))
        assert lim.snapshot()["refunds_trusted"] is False and lim.snapshot()["refunds_distrusted"] == 1

    asyncio.run(run())


def test_a_429_on_a_windows_lanes_pauses_everyone_only_for_what_its_rounded_hint_surely_means(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(limiter_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    async def run() -> None:
        told = RateLimiter(RateLimits(rpm=480, window_s=5.0, max_concurrency=64))  # 40 lanes of 5 s
        a, b, c = _grants(told, 3)
        # "Retry-After: 1": the server's oldest request leaves within (0, 1] s -- the lanes pace what follows
        told.release(a, outcome="rate_limited", wait_hint_s=1.0, heard=Heard(clock[0], {}, 1.0))
        assert told.snapshot()["paused_for_s"] == 0.0 and "pauses" not in told.snapshot()  # was 1 s for all
        assert told.snapshot()["margin_raised"] == 1
        told.release(b, outcome="rate_limited", wait_hint_s=2.0, heard=Heard(clock[0], {}, 1.0))
        assert told.snapshot()["paused_for_s"] == pytest.approx(1.0)  # "2": at least 1 s for sure
        told.release(c, outcome="error", wait_hint_s=3.0, heard=Heard(clock[0], {}, 1.0))
        assert told.snapshot()["paused_for_s"] == pytest.approx(3.0)  # a 503's hint is not the lanes' to pace
        untold = RateLimiter(RateLimits(max_concurrency=4, initial_concurrency=4))  # no lanes: the whole hint
        (d,) = _grants(untold, 1)
        untold.release(d, outcome="rate_limited", wait_hint_s=0.1, heard=Heard(clock[0], {}, 1.0))
        assert untold.snapshot()["paused_for_s"] == pytest.approx(0.1)

    asyncio.run(run())


def test_a_width_learned_from_whole_second_hints_is_probed_by_one_request_sent_early(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(limiter_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))

    def learned() -> RateLimiter:
        """7 lanes taught by "Retry-After: 5" at 1000.0: the window ends in (4, 5] s after its first request."""
        lim = RateLimiter(RateLimits(max_concurrency=64, initial_concurrency=8))  # nothing told, no headers
        leases = _grants(lim, 8)
        for lease in leases[:6]:
            lim.release(lease, outcome="ok", latency_s=0.5, heard=Heard(clock[0]))
        lim.release(leases[6], outcome="rate_limited", wait_hint_s=5.0, heard=Heard(None, {}, 1.0))
        lim.release(leases[7], outcome="ok", latency_s=0.5, heard=Heard(clock[0]))
        assert lim.snapshot()["lanes"] == 7 and lim.snapshot()["lane_width_s"] == 5.0
        return lim

    async def run() -> None:
        lim = learned()
        clock[0] = 1004.5  # the middle of (4, 5]: every lane is held until 1005.03, yet one request may go
        (probe,) = _grants(lim, 2)  # one, not two: a probe at a time (was none before 1005.03)
        lim.release(probe, outcome="ok", latency_s=0.5, heard=Heard(1004.5))  # admitted: at most 4.5 s
        assert lim.snapshot()["lane_width_s"] == pytest.approx(4.5) and lim.snapshot()["window_probed"] == 1
        clock[0] = 1004.58  # the busy lanes free 0.5 s sooner
        assert len(_grants(lim, 7)) == 6

        clock[0] = 1000.0
        lim = learned()
        clock[0] = 1004.5
        (probe,) = _grants(lim, 2)
        # refused, with a precise hint: the window ends 0.6 s from now, 5.1 s after the first request -- the
        # lanes' 5 s stands, nothing is paused, the lane is free again and no other request probes
        lim.release(probe, outcome="rate_limited", wait_hint_s=0.6, heard=Heard(1004.5, {}, 0.001))
        assert lim.snapshot()["lane_width_s"] == 5.0 and lim.snapshot()["paused_for_s"] == 0.0
        assert "margin_raised" not in lim.snapshot() and _grants(lim, 1) == []
        clock[0] = 1005.08
        assert len(_grants(lim, 8)) == 7

    asyncio.run(run())


def test_headers_create_lanes_and_a_reply_that_says_nothing_is_left_holds_them_until_the_reset():
    async def run() -> None:
        lim = RateLimiter(RateLimits(max_concurrency=64, initial_concurrency=2))  # nothing told
        first = _grants(lim, 10)
        assert len(first) == 2  # the AIMD start
        said = {"requests": Allowance(remaining=4, reset_s=30.0, limit=6)}
        lim.release(first[0], outcome="ok", latency_s=0.01, heard=Heard(time.monotonic(), said))
        assert lim.snapshot()["lanes"] == 6
        assert len(_grants(lim, 10)) == 4  # 6 in the window: 2 taken, the 4 the server has left
        lim.release(first[1], outcome="ok", latency_s=0.01, heard=Heard(time.monotonic(), said))
        assert _grants(lim, 1) == []

    asyncio.run(run())


def _req(i: int) -> ChatRequest:
    return ChatRequest("sim-1", (("system", "You are the Critic."), ("user", f"Question: w{i}?\nRound: 2")), 16)


def _fire(client: OpenAICompatProvider, n: int) -> tuple[list[Completion | BaseException], dict]:
    """``n`` calls at once; their results and the limiter's state after them."""

    async def run() -> tuple[list[Completion | BaseException], dict]:
        async with client:
            done = await asyncio.gather(*(client.complete(_req(i)) for i in range(n)), return_exceptions=True)
            return done, await client.limiter_snapshot()

    return asyncio.run(run())


def _client(base_url: str, **spec: object) -> OpenAICompatProvider:
    spec = {"kind": "sim", "base_url": base_url, "model": "sim-1", "max_concurrency": 64, **spec}
    return OpenAICompatProvider(ProviderSpec(**spec), backoff=Backoff(base_s=0.01, cap_s=0.1), use_ray=False)


@pytest.mark.integration
@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_the_headers_allow_a_burst_and_no_request_is_refused(dialect):
    # 20 per 30 s window, the client told nothing: the first reply's headers say how much is left
    with SimServer(rpm=40, window_s=30.0, ratelimit_dialect=dialect) as sim:
        client = _client(sim.base_url)
        results, limiter = _fire(client, 20)
        stats = sim.stats
    assert all(isinstance(r, Completion) for r in results)
    assert stats["http_429"] == 0 and stats["ok"] == 20
    assert len(stats["timeline"]) <= 2  # all 20 went out together, within the window's first seconds
    assert limiter["lanes"] == 20 and limiter["synced"] == 20


@pytest.mark.integration
def test_a_retry_of_a_request_that_never_reached_the_quota_does_not_wait_for_the_window():
    # 10 per 30 s window, told; a third of the arrivals fail with a 5xx or a dropped connection, and
    # this server does not count those against the quota: every retry fits in the first window
    opts = {"faults": ("500", "503", "drop"), "fault_rate": 0.3, "fault_quota": "refunded", "seed": 3}
    with SimServer(rpm=20, window_s=30.0, ratelimit_headers=False, **opts) as sim:
        client = _client(sim.base_url, rpm=20, rate_window_s=30.0, max_retries=10)
        results, limiter = _fire(client, 10)
        stats = sim.stats
    assert all(isinstance(r, Completion) for r in results)
    assert stats["faults_total"] >= 2 and stats["http_429"] == 0 and stats["ok"] == 10
    assert len(stats["timeline"]) < 30  # no retry waited for the next window
    assert client.stats["fault_connection"] + client.stats["fault_http_5xx"] == stats["faults_total"]
    assert limiter["lanes_given_back"] == stats["faults_total"]  # each failed attempt handed its lane back
