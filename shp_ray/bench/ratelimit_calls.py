"""The calls of ``shp-bench ratelimit`` -- the same for the client and every peer -- and a run's summary."""

from __future__ import annotations

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
