"""The calls of ``shp-bench ratelimit`` -- the same for the client and every peer -- and a run's summary."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from shp_ray.providers.base import ChatRequest


def bench_request(i: int, model: str, max_tokens: int) -> ChatRequest:
    role = ("Writer", "Critic")[i % 2]
    user = f"Question: Which archive holds record {i} of the survey?\nRound: {1 + i % 6}"
    return ChatRequest(model, (("system", f"You are the {role}."), ("user", user)), max_tokens)


def summary(mode: str, n: int, failed: int, elapsed: float, http_429: int, retries: int) -> dict[str, Any]:
    return {
        "mode": mode,
        "requests": n,
        "ok": n - failed,
        "failed": failed,
        "elapsed_s": round(elapsed, 3),
        "throughput_rps": round((n - failed) / elapsed, 3) if elapsed > 0 else 0.0,
        "http_429": http_429,
        "retries": retries,
    }


async def fire(n: int, concurrency: int, one: Callable[[int], Awaitable[object]]) -> tuple[int, float]:
    """``n`` calls of ``one``, at most ``concurrency`` at a time: (how many raised, seconds). A call that raises is
    lost: a baseline's or a peer's failures are what the bench measures."""
    gate = asyncio.Semaphore(concurrency)

    async def guarded(i: int) -> bool:
        async with gate:
            try:
                await one(i)
                return True
            except Exception:  # noqa: BLE001 - counted, never raised
                return False

    t0 = time.monotonic()
    oks = await asyncio.gather(*(guarded(i) for i in range(n)))
    return oks.count(False), time.monotonic() - t0
