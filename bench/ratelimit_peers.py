"""The peers of ``shp-bench ratelimit --peers``: other clients against the same simulated server.

- ``litellm_router``: LiteLLM's ``Router`` with the same retry budget as the client
  (``num_retries = --max-retries``), the told rpm in its deployment, a semaphore of ``--concurrency``.
- ``openai_aiolimiter``: the openai SDK (``max_retries = --max-retries``) behind an ``aiolimiter``
  leaky bucket of one window's allowance per window (``rpm * window / 60`` per ``window``): the usual
  hand-made pacer.

Both come from the ``bench`` extra (``pip install -e '.[bench]'``); a missing one is skipped with
one line saying so. Their retries and 429s are read from the server's counts, not from the peer.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from collections.abc import Awaitable, Callable
from typing import Any

from bench.ratelimit_calls import bench_request, fire, summary

PINS = {"litellm_router": "litellm==1.110.2", "openai_aiolimiter": "aiolimiter==1.3.0"}


def missing(peer: str) -> str:
    """Why ``peer`` cannot run here ("" if it can)."""
    pin = PINS[peer]
    if importlib.util.find_spec(pin.split("==")[0]) is None:
        return f"{pin.split('==')[0]} is not installed (the bench extra: pip install -e '.[bench]', {pin})"
    return ""


def _messages(i: int) -> list[dict[str, str]]:
    return bench_request(i, "", 0).openai_messages()


async def _fire(args: argparse.Namespace, one: Callable[[int], Awaitable[object]], mode: str) -> dict[str, Any]:
    failed, elapsed = await fire(args.requests, args.concurrency, one)
    return summary(mode, args.requests, failed, elapsed, -1, -1)  # -1: see the server's counts


async def run_litellm_router(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download of the price map at import
    import litellm
    from litellm import Router

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    deployment = {"model": f"openai/{args.model}", "api_base": base_url, "api_key": key or "no-key"}
    if args.rpm:
        deployment["rpm"] = args.rpm
    router = Router(
        model_list=[{"model_name": "sim", "litellm_params": deployment}],
        num_retries=args.max_retries,
        timeout=args.timeout,
    )

    async def one(i: int) -> object:
        return await router.acompletion(model="sim", messages=_messages(i), max_tokens=args.max_tokens)

    return await _fire(args, one, "litellm_router")


async def run_openai_aiolimiter(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    from aiolimiter import AsyncLimiter
    from openai import AsyncOpenAI

    key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    client = AsyncOpenAI(base_url=base_url, api_key=key or "no-key", max_retries=args.max_retries, timeout=args.timeout)
    window = args.rate_window or 60.0
    bucket = AsyncLimiter(max(1.0, (args.rpm or 60.0) * window / 60.0), window)

    async def one(i: int) -> object:
        async with bucket:
            return await client.chat.completions.create(
                model=args.model,
                messages=_messages(i),
                max_tokens=args.max_tokens,
            )

    try:
        return await _fire(args, one, "openai_aiolimiter")
    finally:
        await client.close()


PEERS: dict[str, Callable[[argparse.Namespace, str], Awaitable[dict[str, Any]]]] = {
    "litellm_router": run_litellm_router,
    "openai_aiolimiter": run_openai_aiolimiter,
}
